//go:build linux

package sched

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/lanes"
)

// parked waits until w sleeps with nothing to do.
func parked(t *testing.T, w *Worker) {
	t.Helper()
	require.Eventually(t, func() bool {
		return w.parkState.Load() == parkParked && !w.inbox.nonEmpty()
	}, waitFor, tick)
}

// A lease stands for a task of the worker: the worker counts busy, lends
// once at a time, and what is submitted meanwhile waits for the lease's
// end, then runs.
func TestLendHoldsQueuedWorkUntilTheLeaseEnds(t *testing.T) {
	s := start(t, Config{Workers: 1, BlockedAfter: time.Hour})
	w := s.Worker(0)
	parked(t, w)

	l, ok := w.Lend()
	require.True(t, ok)
	assert.Equal(t, 1, s.Busy(), "a lent worker counts busy")
	_, again := w.Lend()
	assert.False(t, again, "one lease at a time")

	ran := make(chan struct{})
	require.NoError(t, w.Submit(lanes.Upstream, func() { close(ran) }))
	select {
	case <-ran:
		t.Fatal("work submitted to a lent worker ran before the lease ended")
	case <-time.After(50 * time.Millisecond):
	}

	assert.True(t, l.End())
	select {
	case <-ran:
	case <-time.After(waitFor):
		t.Fatal("the work queued during the lease did not run after it")
	}
	assert.False(t, l.End(), "a lease ends once")
	snap := s.Snapshot()
	assert.Equal(t, int64(1), snap.Workers[0].Lends)
	assert.Equal(t, int64(0), snap.Workers[0].LendsTaken)
	parked(t, w)
	assert.Equal(t, 0, s.Busy())

	// Lent again once idle.
	l, ok = w.Lend()
	require.True(t, ok)
	assert.True(t, l.End())
}

// A busy worker, or one whose queue holds work, is not lent.
func TestLendRefusesABusyWorker(t *testing.T) {
	s := start(t, Config{Workers: 1, BlockedAfter: time.Hour})
	w := s.Worker(0)
	release := block(t, w)
	_, ok := w.Lend()
	assert.False(t, ok)
	release()
	parked(t, w)
	assert.False(t, Lease{}.End(), "the zero Lease ends nothing")
}

// The watchdog takes back a lease held longer than BlockedAfter: the
// worker starts its queued work, and End then reports the lease lost.
func TestWatchdogEndsALeaseHeldTooLong(t *testing.T) {
	s := start(t, Config{Workers: 1, BlockedAfter: 4 * time.Millisecond})
	w := s.Worker(0)
	parked(t, w)
	l, ok := w.Lend()
	require.True(t, ok)

	ran := make(chan struct{})
	require.NoError(t, w.Submit(lanes.Upstream, func() { close(ran) }))
	select {
	case <-ran:
	case <-time.After(waitFor):
		t.Fatal("the worker stayed lent to code that never gave it back")
	}
	assert.False(t, l.End(), "the watchdog had ended the lease")
	assert.Equal(t, int64(1), s.Snapshot().Workers[0].LendsTaken)
	require.Eventually(t, func() bool { return s.Busy() == 0 }, waitFor, tick)
}

// Without a watchdog nothing would end a lease that is never given back,
// so none is lent.
func TestNoLeaseWithoutTheWatchdog(t *testing.T) {
	s := start(t, Config{Workers: 1, BlockedAfter: -1})
	w := s.Worker(0)
	parked(t, w)
	_, ok := w.Lend()
	assert.False(t, ok)
}

// Stop wakes a lent worker: it does not wait for the lease's end.
func TestStopWakesALentWorker(t *testing.T) {
	s, err := New(Config{Workers: 1, BlockedAfter: time.Hour})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	w := s.Worker(0)
	parked(t, w)
	l, ok := w.Lend()
	require.True(t, ok)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, s.Stop(ctx))
	l.End()
}

// The scheduler lends the first idle worker from the index it is given,
// skipping a busy one, and lends none while every worker is busy.
func TestSchedulerLendsTheFirstIdleWorker(t *testing.T) {
	s := start(t, Config{Workers: 2, BlockedAfter: time.Hour})
	w0, w1 := s.Worker(0), s.Worker(1)
	release0 := block(t, w0)
	parked(t, w1)
	l, ok := s.Lend(0)
	require.True(t, ok)
	assert.Same(t, w1, l.w, "worker 0 is busy")
	_, ok = s.Lend(1)
	assert.False(t, ok, "worker 1 lent, worker 0 busy")
	assert.True(t, l.End())
	release0()
	parked(t, w0)
	parked(t, w1)
	l, ok = s.Lend(0)
	require.True(t, ok)
	assert.Same(t, w0, l.w, "the first idle one from index 0")
	assert.True(t, l.End())
}
