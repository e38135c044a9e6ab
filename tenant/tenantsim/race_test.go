//go:build race

package tenantsim

// raceEnabled is set when the race detector is on: it makes the simulation
// twenty to thirty times slower, so the tests that need long runs skip.
const raceEnabled = true
