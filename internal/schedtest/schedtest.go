// Package schedtest starts executors for the tests of the packages built on
// sched (netpoll, server, gate, ...): bare schedulers, and runtimes for the
// packages that take one.
package schedtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/sched"
)

// Start starts a scheduler with the given number of unpinned workers and
// stops it when the test ends, failing the test if it does not stop within
// 10 seconds.
func Start(t testing.TB, workers int) *sched.Scheduler {
	t.Helper()
	s, err := sched.New(sched.Config{Workers: workers})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Stop(ctx))
	})
	return s
}

// Runtime starts a runtime with the given number of unpinned workers,
// GOMAXPROCS left alone, and the given options after those, and stops it
// when the test ends, failing the test
// if it does not stop within 10 seconds.
func Runtime(t testing.TB, workers int, opts ...srt.Option) *srt.Runtime {
	t.Helper()
	opts = append([]srt.Option{srt.WithWorkers(workers), srt.WithPinning(false), srt.WithGOMAXPROCS(-1)}, opts...)
	rt, err := srt.New(opts...)
	require.NoError(t, err)
	require.NoError(t, rt.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, rt.Stop(ctx))
	})
	return rt
}
