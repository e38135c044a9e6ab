// Package schedtest starts executors for the tests of the packages built on
// sched (netpoll, server, gate, ...): bare schedulers, and runtimes for the
// packages that take one. Off Linux, where the executor cannot run, it
// skips the tests that need one.
package schedtest

import (
	"context"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/sched"
)

// SkipWithoutExecutor skips the test where the executor cannot run: off
// Linux, where sched.New and runtime.New fail with an error that wraps
// errors.ErrUnsupported, and sluice.Listen serves on net/http, with no
// runtime or sluice server behind its Server. Tests that need either call
// it first; Start, Runtime and RuntimeWith call it themselves.
func SkipWithoutExecutor(t testing.TB) {
	t.Helper()
	if goruntime.GOOS != "linux" {
		t.Skipf("needs the executor, which is Linux-only (epoll, eventfd, pinned threads); this is %s", goruntime.GOOS)
	}
}

// Start starts a scheduler with the given number of unpinned workers and
// stops it when the test ends, failing the test if it does not stop within
// 10 seconds. Off Linux it skips the test (see SkipWithoutExecutor).
func Start(t testing.TB, workers int) *sched.Scheduler {
	t.Helper()
	SkipWithoutExecutor(t)
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

// Runtime starts a runtime with the given number of unpinned workers and
// GOMAXPROCS left alone, and stops it when the test ends, failing the test
// if it does not stop within 10 seconds. Off Linux it skips the test (see
// SkipWithoutExecutor).
func Runtime(t testing.TB, workers int) *srt.Runtime {
	t.Helper()
	return RuntimeWith(t, srt.Config{Workers: workers})
}

// RuntimeWith is Runtime with the settings of cfg; its workers are
// unpinned and GOMAXPROCS left alone unless cfg says otherwise. Off Linux
// it skips the test, as Runtime does.
func RuntimeWith(t testing.TB, cfg srt.Config) *srt.Runtime {
	t.Helper()
	SkipWithoutExecutor(t)
	if cfg.Pinning == srt.PinAuto && len(cfg.CPUs) == 0 {
		cfg.Pinning = srt.PinOff
	}
	if cfg.GOMAXPROCS == 0 {
		cfg.GOMAXPROCS = -1
	}
	rt, err := srt.New(cfg)
	require.NoError(t, err)
	require.NoError(t, rt.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, rt.Stop(ctx))
	})
	return rt
}

// WaitFor is how long the helpers below wait before they fail the test.
const WaitFor = 10 * time.Second

// Recv waits for ch to close or deliver, failing the test after WaitFor.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(WaitFor):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// WorkersIdle waits until no worker of s is busy and the workers have n
// operations in flight off them between them, the proof that n waits have
// released their workers, and reports whether they did within WaitFor. It
// may be called from any goroutine.
func WorkersIdle(t testing.TB, s *sched.Scheduler, n int64) bool {
	t.Helper()
	return assert.Eventually(t, func() bool {
		snap := s.Snapshot()
		var pending int64
		for _, w := range snap.Workers {
			pending += w.Pending
		}
		return snap.Busy == 0 && pending == n
	}, WaitFor, time.Millisecond, "workers not idle with %d operations off them", n)
}
