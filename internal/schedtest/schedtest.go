// Package schedtest starts executors for the tests of the packages built on
// sched (netpoll, server, gate, ...).
package schedtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
