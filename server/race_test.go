//go:build linux && race

package server

// raceEnabled is set when the race detector is on, which allocates where a
// normal build does not.
const raceEnabled = true
