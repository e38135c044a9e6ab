//go:build !race

package main

// simulateRace is set when the race detector is on (see
// simulate_race_test.go).
const simulateRace = false
