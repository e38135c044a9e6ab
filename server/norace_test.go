//go:build linux && !race

package server

const raceEnabled = false
