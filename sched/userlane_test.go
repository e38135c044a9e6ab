//go:build linux

package sched

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/lanes"
)

// orderLog records labels in the order tasks ran, from any goroutine.
type orderLog struct {
	mu     sync.Mutex
	labels []string
}

func (l *orderLog) add(label string) {
	l.mu.Lock()
	l.labels = append(l.labels, label)
	l.mu.Unlock()
}

func (l *orderLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.labels...)
}

// A coroutine started in a registered lane resumes in that lane, ahead of
// the lane's new work but behind better lanes: the built-in order of
// Continuation before Upstream, kept within the lane.
func TestRegisteredLaneResumesBeforeItsNewWork(t *testing.T) {
	set := lanes.NewSet()
	bg, err := set.Register(lanes.Spec{Name: "background", Priority: 2})
	require.NoError(t, err)
	// A still clock: the starvation guard never lets a worse lane in.
	s := start(t, Config{Lanes: set, Clock: (&fakeClock{}).now})
	w := s.Worker(0)
	var log orderLog
	rec := log.add
	onWorker(t, w, func() {
		// Two background requests: each runs a slice, yields, runs a
		// second slice.
		for _, name := range []string{"a", "b"} {
			w.Go(context.Background(), bg, func(ctx context.Context) {
				rec(name + "1")
				assert.NoError(t, Yield(ctx))
				rec(name + "2")
			})
		}
		// New background work queued behind them.
		w.Push(bg, func() { rec("new") })
		// Better lanes' work: all of it runs first.
		w.Push(lanes.Upstream, func() { rec("up") })
		w.Push(lanes.Continuation, func() { rec("cont") })
	})
	onWorker(t, w, func() {})
	require.Eventually(t, func() bool { return len(log.get()) == 7 }, waitFor, tick)
	// a1 yields: its resumption (a2) goes ahead of b's start and of the
	// lane's new work, as b2 goes ahead of "new".
	assert.Equal(t, []string{"cont", "up", "a1", "a2", "b1", "b2", "new"}, log.get())
}

// Await, Sleep and Pause in a coroutine of a registered lane resume it in
// its own lane, not in Continuation, so its resumptions do not jump ahead of
// better lanes.
func TestRegisteredLaneAwaitResumesInItsLane(t *testing.T) {
	set := lanes.NewSet()
	bg, err := set.Register(lanes.Spec{Name: "background", Priority: 2})
	require.NoError(t, err)
	s := start(t, Config{Lanes: set, Clock: (&fakeClock{}).now})
	w := s.Worker(0)
	var log orderLog
	rec := log.add
	opRunning := make(chan struct{})
	opGate := make(chan struct{})
	done := make(chan struct{})
	onWorker(t, w, func() {
		w.Go(context.Background(), bg, func(ctx context.Context) {
			_, _ = Await(ctx, func(context.Context) (int, error) {
				close(opRunning)
				<-opGate
				return 0, nil
			})
			rec("resumed")
			close(done)
		})
	})
	<-opRunning
	// Hold the worker, queue upstream work, and let the resumption arrive:
	// upstream (better) runs first.
	release := block(t, w)
	for range 3 {
		require.NoError(t, w.Submit(lanes.Upstream, func() { rec("up") }))
	}
	close(opGate)
	require.Eventually(t, func() bool { return s.Snapshot().Workers[0].Inbox >= 4 }, waitFor, tick)
	release()
	<-done
	assert.Equal(t, []string{"up", "up", "up", "resumed"}, log.get())
}

func TestYieldOutsideCoroutineIsANoOp(t *testing.T) {
	assert.NoError(t, Yield(context.Background()))
}

// Yield in a built-in lane's coroutine lets queued work of better or equal
// lanes run, and the coroutine goes on after it, in Continuation.
func TestYieldLetsQueuedWorkRun(t *testing.T) {
	s := start(t, Config{Clock: (&fakeClock{}).now})
	w := s.Worker(0)
	var log orderLog
	rec := log.add
	onWorker(t, w, func() {
		w.Push(lanes.Continuation, func() { rec("queued") })
		w.GoNow(context.Background(), func(ctx context.Context) {
			rec("before")
			assert.NoError(t, Yield(ctx))
			rec("after")
		})
		w.Push(lanes.Upstream, func() { rec("upstream") })
	})
	onWorker(t, w, func() {})
	assert.Equal(t, []string{"before", "queued", "after", "upstream"}, log.get())
}
