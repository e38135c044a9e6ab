//go:build race

package main

// simulateRace is set when the race detector is on: it makes the
// simulation twenty to thirty times slower, so its test runs less.
const simulateRace = true
