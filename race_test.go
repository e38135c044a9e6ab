//go:build race

package sluice

// raceEnabled is set when the race detector is on: it multiplies the memory
// a process uses, which the low-memory test measures.
const raceEnabled = true
