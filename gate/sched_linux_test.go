package gate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/sched"
)

// The executor is what the busy gate reads.
var _ admit.Executor = (*sched.Scheduler)(nil)

// onWorker runs fn on worker i and waits for it.
func onWorker(t *testing.T, s *sched.Scheduler, i int, fn func()) {
	t.Helper()
	done := make(chan struct{})
	require.NoError(t, s.Worker(i).Submit(lanes.Upstream, func() { fn(); close(done) }))
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("task did not run within 10s")
	}
}

// blockWorker holds worker i busy until the returned function is called.
func blockWorker(t *testing.T, s *sched.Scheduler, i int) (release func()) {
	t.Helper()
	running, gate := make(chan struct{}), make(chan struct{})
	require.NoError(t, s.Worker(i).Submit(lanes.Upstream, func() { close(running); <-gate }))
	<-running
	return func() { close(gate) }
}

// On the real executor with 2 workers and the default 0.5, a decision taken
// on a worker counts that worker: it admits while the other worker is idle
// and refuses while the other is busy; the other going idle wakes the
// pipeline.
func TestBusyOnScheduler(t *testing.T) {
	s := schedtest.Start(t, 2)
	g := newBusy(t, BusyConfig{})
	w := attach(t, g, s)
	require.Equal(t, 1, g.Limit())
	require.Eventually(t, func() bool { return s.Busy() == 0 }, 10*time.Second, time.Millisecond)

	var busy int
	var admitted bool
	onWorker(t, s, 0, func() { busy, admitted = s.Busy(), acquire(g) })
	assert.Equal(t, 1, busy, "the deciding worker counts itself")
	assert.True(t, admitted)

	release := blockWorker(t, s, 1)
	onWorker(t, s, 0, func() { busy, admitted = s.Busy(), acquire(g) })
	assert.Equal(t, 2, busy)
	assert.False(t, admitted, "the other worker is busy")

	w.take() // the idle notifications so far
	release()
	require.Eventually(t, func() bool { return len(w.take()) > 0 }, 10*time.Second, time.Millisecond,
		"no wake-up when the blocked worker went idle")
	require.Eventually(t, func() bool { return s.Busy() == 0 }, 10*time.Second, time.Millisecond)
	onWorker(t, s, 0, func() { admitted = acquire(g) })
	assert.True(t, admitted)
}

// newSchedSource returns an executor that is not started: its busy count is
// 0, and reading it costs what it costs on a running one.
func newSchedSource(tb testing.TB, workers int) admit.Executor {
	s, err := sched.New(sched.Config{Workers: workers})
	require.NoError(tb, err)
	return s
}
