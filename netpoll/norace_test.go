//go:build linux && !race

package netpoll

// raceEnabled is set when the race detector is on (see race_test.go).
const raceEnabled = false
