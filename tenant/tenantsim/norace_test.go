//go:build !race

package tenantsim

// raceEnabled is set when the race detector is on (see race_test.go).
const raceEnabled = false
