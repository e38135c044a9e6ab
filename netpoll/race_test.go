//go:build linux && race

package netpoll

// raceEnabled is set when the race detector is on: it allocates where the
// program does not, so allocation counts are not checked then.
const raceEnabled = true
