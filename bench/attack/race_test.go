//go:build race

package attack

// raceEnabled is set when the race detector is on: the suite then runs
// for its data races and leaks, too slowly for its verdicts to mean
// anything.
const raceEnabled = true
