//go:build linux

package sched

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluice-go/sluice/lanes"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a clock that only moves when told to.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() int64              { return c.ns.Load() }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// start builds and starts a scheduler, stopping it when the test ends.
func start(t *testing.T, cfg Config) *Scheduler {
	t.Helper()
	s, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Stop(ctx))
	})
	return s
}

// onWorker runs fn on w, as an Upstream task, and waits for it: work queued
// earlier in the built-in lanes has run by then.
func onWorker(t *testing.T, w *Worker, fn func()) {
	t.Helper()
	done := make(chan struct{})
	require.NoError(t, w.Submit(lanes.Upstream, func() { fn(); close(done) }))
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("task did not run within 10s")
	}
}

// block occupies w until the returned function is called, and returns once
// the blocking task is running.
func block(t *testing.T, w *Worker) (release func()) {
	t.Helper()
	running := make(chan struct{})
	gate := make(chan struct{})
	require.NoError(t, w.Submit(0, func() { close(running); <-gate }))
	<-running
	return func() { close(gate) }
}

const waitFor = 10 * time.Second
const tick = time.Millisecond
