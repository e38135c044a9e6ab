// Package gatetest builds package gate's gates for the tests of the
// packages that use them (admit, server, httpgate, ...): each helper
// returns the gate its constructor builds, and fails the test at once if
// the constructor refuses the configuration.
package gatetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/gate"
)

// Concurrency returns gate.NewConcurrency's gate with the given limit.
func Concurrency(t testing.TB, limit int) *gate.Concurrency {
	t.Helper()
	g, err := gate.NewConcurrency(gate.ConcurrencyConfig{Limit: limit})
	require.NoError(t, err)
	return g
}

// Busy returns gate.NewBusy's gate for cfg.
func Busy(t testing.TB, cfg gate.BusyConfig) *gate.Busy {
	t.Helper()
	g, err := gate.NewBusy(cfg)
	require.NoError(t, err)
	return g
}

// GoSched returns gate.NewGoSched's gate for cfg.
func GoSched(t testing.TB, cfg gate.GoSchedConfig) *gate.GoSched {
	t.Helper()
	g, err := gate.NewGoSched(cfg)
	require.NoError(t, err)
	return g
}

// Adaptive returns gate.NewAdaptive's gate for cfg.
func Adaptive(t testing.TB, cfg gate.AdaptiveConfig) *gate.Adaptive {
	t.Helper()
	g, err := gate.NewAdaptive(cfg)
	require.NoError(t, err)
	return g
}
