//go:build linux

package sched

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sluice-go/sluice/lanes"
)

// PushFirst queues a task ahead of its lane's queued work, and still
// behind the lanes of better priority; the ring grows around a head moved
// back (more tasks than its first size).
func TestPushFirst(t *testing.T) {
	s := start(t, Config{Clock: (&fakeClock{}).now})
	w := s.Worker(0)
	var order []string
	rec := func(label string) func() { return func() { order = append(order, label) } }
	onWorker(t, w, func() {
		w.Push(lanes.Upstream, rec("u0"))
		w.Push(lanes.Continuation, rec("c0"))
		w.PushFirst(lanes.Upstream, rec("first"))
		for i := 1; i < 100; i++ {
			w.Push(lanes.Upstream, rec(fmt.Sprint("u", i)))
		}
		w.PushFirst(lanes.Upstream, rec("first2"))
	})
	onWorker(t, w, func() {})
	want := []string{"c0", "first2", "first"}
	for i := range 100 {
		want = append(want, fmt.Sprint("u", i))
	}
	assert.Equal(t, want, order)
	assert.Panics(t, func() { w.PushFirst(lanes.Upstream, nil) })
}

func TestContinuationRunsBeforeUpstream(t *testing.T) {
	// A clock that stands still: tasks take no time, so the starvation
	// guard (tested on its own) never lets upstream work jump ahead.
	s := start(t, Config{Clock: (&fakeClock{}).now})
	w := s.Worker(0)
	var mu sync.Mutex
	var order []string
	rec := func(label string) func() {
		return func() { mu.Lock(); order = append(order, label); mu.Unlock() }
	}
	// Queued locally on the worker, interleaved.
	onWorker(t, w, func() {
		for i := 0; i < 50; i++ {
			w.Push(lanes.Upstream, rec(fmt.Sprint("u", i)))
			w.Push(lanes.Continuation, rec(fmt.Sprint("c", i)))
		}
	})
	onWorker(t, w, func() {}) // behind the first batch
	// Queued from outside while the worker is busy, interleaved.
	release := block(t, w)
	for i := 50; i < 100; i++ {
		require.NoError(t, w.Submit(lanes.Upstream, rec(fmt.Sprint("u", i))))
		require.NoError(t, w.Submit(lanes.Continuation, rec(fmt.Sprint("c", i))))
	}
	release()
	onWorker(t, w, func() {})
	mu.Lock()
	defer mu.Unlock()
	var want []string
	for _, batch := range [][2]int{{0, 50}, {50, 100}} {
		for i := batch[0]; i < batch[1]; i++ {
			want = append(want, fmt.Sprint("c", i))
		}
		for i := batch[0]; i < batch[1]; i++ {
			want = append(want, fmt.Sprint("u", i))
		}
	}
	assert.Equal(t, want, order)
}

func TestSharesThreeToOne(t *testing.T) {
	clk := &fakeClock{}
	set := lanes.NewSet()
	a, err := set.Register(lanes.Spec{Name: "a", Priority: 1, Shares: 300})
	require.NoError(t, err)
	b, err := set.Register(lanes.Spec{Name: "b", Priority: 1, Shares: 100})
	require.NoError(t, err)
	s := start(t, Config{Lanes: set, Clock: clk.now})
	w := s.Worker(0)
	const total = 8000
	var runs [lanes.MaxLanes]int
	done := make(chan struct{})
	n := 0
	// Each task costs 10 µs of fake time and queues its successor, so both
	// lanes stay backlogged until total tasks have run.
	var task func(id lanes.ID) func()
	task = func(id lanes.ID) func() {
		return func() {
			if n == total { // the other lane's last task, queued earlier
				return
			}
			clk.advance(10 * time.Microsecond)
			runs[id]++
			n++
			switch {
			case n < total:
				w.Push(id, task(id))
			case n == total:
				close(done)
			}
		}
	}
	onWorker(t, w, func() {
		w.Push(a, task(a))
		w.Push(b, task(b))
	})
	<-done
	ratio := float64(runs[a]) / float64(runs[b])
	assert.InDelta(t, 3.0, ratio, 0.3, "runs a=%d b=%d", runs[a], runs[b])

	onWorker(t, w, func() {}) // let the other lane's last task finish
	snap := s.Snapshot()
	// The counters may also have seen that last task, which returned at once.
	assert.InDelta(t, runs[a]+runs[b], snap.Lanes[a].Run+snap.Lanes[b].Run, 1)
	assert.InDelta(t, runs[a], snap.Lanes[a].Run, 1)
	assert.InDelta(t, runs[b], snap.Lanes[b].Run, 1)
	assert.Equal(t, "a", snap.Lanes[a].Name)
	assert.InDelta(t, 3.0, float64(snap.Lanes[a].RanNs)/float64(snap.Lanes[b].RanNs), 0.3)
}

func TestStarvationGuardUnderContinuationFlood(t *testing.T) {
	clk := &fakeClock{}
	set := lanes.NewSet()
	s := start(t, Config{Lanes: set, Clock: clk.now})
	w := s.Worker(0)
	const flood = 1000
	// phase floods the Continuation lane with 10 µs tasks, each queueing
	// the next, queues one upstream task behind the first, and returns how
	// many continuations had run when the upstream task ran.
	phase := func() int64 {
		var conts atomic.Int64
		upstreamAt := make(chan int64, 1)
		floodDone := make(chan struct{})
		var cont func()
		cont = func() {
			clk.advance(10 * time.Microsecond)
			if conts.Add(1) < flood {
				w.Push(lanes.Continuation, cont)
			} else {
				close(floodDone)
			}
		}
		onWorker(t, w, func() {
			w.Push(lanes.Continuation, cont)
			w.Push(lanes.Upstream, func() { upstreamAt <- conts.Load() })
		})
		<-floodDone
		return <-upstreamAt
	}
	// 100 µs guard over 10 µs continuations: upstream runs after about
	// ten of them, long before the flood of a thousand ends.
	set.SetGuard(100 * time.Microsecond)
	at := phase()
	assert.GreaterOrEqual(t, at, int64(9))
	assert.LessOrEqual(t, at, int64(12))

	// With the guard off, the same flood starves upstream to the end.
	set.SetGuard(0)
	assert.Equal(t, int64(flood), phase())
}

func TestBusyCountIsExact(t *testing.T) {
	s := start(t, Config{Workers: 3})
	require.Eventually(t, func() bool { return s.Busy() == 0 }, waitFor, tick, "all parked gives 0")

	gate := make(chan struct{})
	var running sync.WaitGroup
	running.Add(3)
	for i := 0; i < 3; i++ {
		require.NoError(t, s.Worker(i).Submit(lanes.Upstream, func() { running.Done(); <-gate }))
	}
	running.Wait()
	for i := 0; i < 100; i++ { // nothing moves: the count stays exact
		require.Equal(t, 3, s.Busy())
	}
	snap := s.Snapshot()
	for _, ws := range snap.Workers {
		assert.True(t, ws.Busy)
	}
	close(gate)
	require.Eventually(t, func() bool { return s.Busy() == 0 }, waitFor, tick)
	for i := 0; i < 100; i++ {
		require.Equal(t, 0, s.Busy())
	}
	snap = s.Snapshot()
	for _, ws := range snap.Workers {
		assert.False(t, ws.Busy)
		assert.Positive(t, ws.BusyNs)
		assert.Positive(t, ws.Parks)
	}
}

func TestAwaitReleasesWorkerAndResumesAsContinuation(t *testing.T) {
	s := start(t, Config{})
	w := s.Worker(0)
	opGate := make(chan struct{})
	opRunning := make(chan struct{})
	type result struct {
		tidBefore, tidAfter int
		v                   int
		err                 error
	}
	res := make(chan result, 1)
	var mu sync.Mutex
	var order []string
	require.NoError(t, s.Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
		var r result
		r.tidBefore = unix.Gettid()
		r.v, r.err = Await(ctx, func(context.Context) (int, error) {
			close(opRunning)
			<-opGate
			return 42, nil
		})
		r.tidAfter = unix.Gettid()
		mu.Lock()
		order = append(order, "resumed")
		mu.Unlock()
		res <- r
	}))
	<-opRunning
	// The operation blocks off the worker, and the worker is idle.
	require.Eventually(t, func() bool { return s.Busy() == 0 }, waitFor, tick)
	assert.Equal(t, int64(1), s.Snapshot().Workers[0].Pending)

	// Fill the worker's upstream lane while it is blocked, then let the
	// operation finish: the resumption must run ahead of that work.
	release := block(t, w)
	for i := 0; i < 20; i++ {
		require.NoError(t, w.Submit(lanes.Upstream, func() {
			mu.Lock()
			order = append(order, "upstream")
			mu.Unlock()
		}))
	}
	close(opGate)
	require.Eventually(t, func() bool { return s.Snapshot().Workers[0].Inbox == 21 }, waitFor, tick)
	release()
	r := <-res
	require.NoError(t, r.err)
	assert.Equal(t, 42, r.v)
	assert.Equal(t, w.TID(), r.tidBefore)
	assert.Equal(t, w.TID(), r.tidAfter, "resumed on the same worker thread")
	onWorker(t, w, func() {})
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, order, 21)
	assert.Equal(t, "resumed", order[0])
}

func TestAwaitOutsideCoroutineRunsInPlace(t *testing.T) {
	// Plain context: runs in place.
	v, err := Await(context.Background(), func(context.Context) (string, error) { return "x", nil })
	require.NoError(t, err)
	assert.Equal(t, "x", v)

	s := start(t, Config{})
	done := make(chan struct{})
	require.NoError(t, s.Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
		defer close(done)
		// A goroutine started by the coroutine, holding its context,
		// while the coroutine runs: must not suspend the coroutine.
		var wg sync.WaitGroup
		wg.Add(1)
		var got int
		go func() {
			defer wg.Done()
			got, _ = Await(ctx, func(context.Context) (int, error) { return 7, nil })
		}()
		wg.Wait() // blocks the worker: the isolated model
		assert.Equal(t, 7, got)
		// After that, the coroutine itself still suspends normally.
		v, err := Await(ctx, func(context.Context) (int, error) { return 8, nil })
		assert.NoError(t, err)
		assert.Equal(t, 8, v)
	}))
	<-done

	// A context kept after its coroutine ended runs in place too.
	kept := make(chan context.Context, 1)
	require.NoError(t, s.Go(context.Background(), lanes.Upstream, func(ctx context.Context) { kept <- ctx }))
	ctx := <-kept
	v2, err := Await(ctx, func(context.Context) (int, error) { return 9, nil })
	require.NoError(t, err)
	assert.Equal(t, 9, v2)
}

func TestAwaitPropagatesErrorsAndPanics(t *testing.T) {
	var panics atomic.Int64
	s := start(t, Config{OnPanic: func(any, []byte) { panics.Add(1) }})
	errBoom := errors.New("boom")
	got := make(chan any, 2)
	require.NoError(t, s.Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
		_, err := Await(ctx, func(context.Context) (int, error) { return 0, errBoom })
		got <- err
		defer func() { got <- recover() }()
		_, _ = Await(ctx, func(context.Context) (int, error) { panic("op failed") })
	}))
	assert.ErrorIs(t, (<-got).(error), errBoom)
	assert.Equal(t, "op failed", <-got)
	assert.Zero(t, panics.Load())
}

func TestPanicsAreRecovered(t *testing.T) {
	var panics atomic.Int64
	s := start(t, Config{OnPanic: func(v any, stack []byte) {
		assert.NotEmpty(t, stack)
		panics.Add(1)
	}})
	w := s.Worker(0)
	require.NoError(t, w.Submit(lanes.Upstream, func() { panic("task") }))
	require.NoError(t, s.Go(context.Background(), lanes.Upstream, func(context.Context) { panic("coroutine") }))
	require.NoError(t, s.Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
		_ = Sleep(ctx, time.Millisecond)
		panic("after sleep")
	}))
	require.Eventually(t, func() bool { return panics.Load() == 3 }, waitFor, tick)
	onWorker(t, w, func() {}) // the worker lives on
}

func TestTimersFireInDeadlineOrder(t *testing.T) {
	s := start(t, Config{})
	w := s.Worker(0)
	var order []int
	done := make(chan struct{})
	onWorker(t, w, func() {
		deadlines := []int{30, 10, 50, 20, 10, 40}
		for i, d := range deadlines {
			w.AfterFunc(time.Duration(d)*time.Millisecond, lanes.Upstream, func() {
				order = append(order, i)
				if len(order) == len(deadlines) {
					close(done)
				}
			})
		}
		stopped := w.AfterFunc(5*time.Millisecond, lanes.Upstream, func() { order = append(order, 99) })
		assert.True(t, stopped.Stop())
		assert.False(t, stopped.Stop())
	})
	<-done
	// Equal deadlines fire in the order they were set.
	assert.Equal(t, []int{1, 4, 3, 0, 5, 2}, order)
}

func TestTimerWaitsAtLeastItsDuration(t *testing.T) {
	s := start(t, Config{})
	w := s.Worker(0)
	fired := make(chan time.Duration, 1)
	onWorker(t, w, func() {
		t0 := time.Now()
		w.AfterFunc(20*time.Millisecond, lanes.Continuation, func() { fired <- time.Since(t0) })
	})
	assert.GreaterOrEqual(t, <-fired, 20*time.Millisecond)
}

func TestSleepReleasesWorker(t *testing.T) {
	s := start(t, Config{})
	res := make(chan error, 2)
	require.NoError(t, s.Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
		res <- Sleep(ctx, 200*time.Millisecond)
	}))
	require.Eventually(t, func() bool { return s.Busy() == 0 }, waitFor, tick)
	require.NoError(t, <-res)

	ctx, cancel := context.WithCancel(context.Background())
	t0 := time.Now()
	require.NoError(t, s.Go(ctx, lanes.Upstream, func(ctx context.Context) {
		res <- Sleep(ctx, time.Hour)
	}))
	time.Sleep(10 * time.Millisecond)
	cancel()
	assert.ErrorIs(t, <-res, context.Canceled)
	assert.Less(t, time.Since(t0), time.Minute)
	// Outside a coroutine, Sleep blocks and honours ctx too.
	assert.NoError(t, Sleep(context.Background(), time.Millisecond))
	assert.ErrorIs(t, Sleep(ctx, time.Hour), context.Canceled)
}

func TestOffloadRunsThenOnWorker(t *testing.T) {
	s := start(t, Config{})
	w := s.Worker(0)
	got := make(chan int, 1)
	onWorker(t, w, func() {
		var v int
		w.Offload(func() { v = 5 }, func() { got <- v * unix.Gettid() / w.TID() })
	})
	assert.Equal(t, 5, <-got)
}

func TestIdleHookRunsWhenWorkerGoesIdle(t *testing.T) {
	s, err := New(Config{Workers: 1})
	require.NoError(t, err)
	var waiting []func() // owned by the worker
	busyInHook := make(chan int, 16)
	s.OnIdle(func(w *Worker) {
		busyInHook <- s.Busy()
		if len(waiting) > 0 {
			w.Push(lanes.Upstream, waiting[0])
			waiting = waiting[1:]
		}
	})
	require.NoError(t, s.Start())
	defer func() { require.NoError(t, s.Stop(context.Background())) }()
	assert.Equal(t, 0, <-busyInHook, "the idle worker no longer counts as busy")
	started := make(chan struct{})
	require.NoError(t, s.Worker(0).Submit(lanes.Upstream, func() {
		waiting = append(waiting, func() { close(started) })
	}))
	// The waiting work starts when the worker goes idle, not by polling.
	select {
	case <-started:
	case <-time.After(waitFor):
		t.Fatal("waiting work never started")
	}
}

// TestIdleHookRemoved: a removed hook is not called at the worker's later
// parks, and the other hooks still are.
func TestIdleHookRemoved(t *testing.T) {
	s := start(t, Config{Workers: 1})
	var gone, kept atomic.Int32
	remove := s.OnIdle(func(*Worker) { gone.Add(1) })
	s.OnIdle(func(*Worker) { kept.Add(1) })
	assert.Equal(t, 2, s.IdleHooks())
	park := func() {
		done := make(chan struct{})
		require.NoError(t, s.Worker(0).Submit(lanes.Upstream, func() { close(done) }))
		<-done
		// The worker parks after the task: wait until the kept hook says so.
		n := kept.Load()
		require.Eventually(t, func() bool { return kept.Load() > n || s.Busy() == 0 }, waitFor, time.Millisecond)
	}
	park()
	require.Eventually(t, func() bool { return gone.Load() > 0 }, waitFor, time.Millisecond)
	remove()
	remove() // twice is harmless
	assert.Equal(t, 1, s.IdleHooks())
	park() // a park that began before remove may still have called it
	before := gone.Load()
	for range 5 {
		park()
	}
	assert.Equal(t, before, gone.Load(), "a removed hook is not called again")
	assert.Positive(t, kept.Load())
}

func TestWatchDeliversReadiness(t *testing.T) {
	s := start(t, Config{})
	w := s.Worker(0)
	var p [2]int
	require.NoError(t, unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC))
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	got := make(chan string, 4)
	var wt *Watch
	onWorker(t, w, func() {
		var err error
		wt, err = w.Watch(p[0], unix.EPOLLIN, func(ev uint32) {
			var buf [16]byte
			n, _ := unix.Read(p[0], buf[:])
			tid := unix.Gettid()
			w.Push(lanes.Continuation, func() { got <- fmt.Sprint(string(buf[:n]), tid == w.TID()) })
		})
		require.NoError(t, err)
	})
	_, err := unix.Write(p[1], []byte("hi"))
	require.NoError(t, err)
	assert.Equal(t, "hitrue", <-got)
	onWorker(t, w, func() {
		require.NoError(t, wt.Modify(unix.EPOLLIN))
		require.NoError(t, wt.Close())
		assert.ErrorIs(t, wt.Close(), ErrClosedWatch)
	})
	_, err = unix.Write(p[1], []byte("x"))
	require.NoError(t, err)
	onWorker(t, w, func() {})
	select {
	case v := <-got:
		t.Fatalf("closed watch delivered %q", v)
	case <-time.After(20 * time.Millisecond):
	}
	onWorker(t, w, func() {
		_, err := w.Watch(-1, unix.EPOLLIN, func(uint32) {})
		assert.Error(t, err)
	})
}

func TestSubmitErrors(t *testing.T) {
	s, err := New(Config{})
	require.NoError(t, err)
	assert.ErrorIs(t, s.Submit(lanes.Upstream, func() {}), ErrNotStarted)
	require.NoError(t, s.Start())
	assert.Error(t, s.Start())
	assert.ErrorIs(t, s.Submit(9, func() {}), ErrBadLane)
	assert.Error(t, s.Worker(0).Submit(lanes.Upstream, nil))
	require.NoError(t, s.Stop(context.Background()))
	require.NoError(t, s.Stop(context.Background()), "Stop is idempotent")
	assert.ErrorIs(t, s.Submit(lanes.Upstream, func() {}), ErrStopped)
	assert.ErrorIs(t, s.Go(context.Background(), lanes.Upstream, func(context.Context) {}), ErrStopped)

	_, err = New(Config{Workers: -1})
	assert.Error(t, err)
	_, err = New(Config{Workers: 2, CPUs: []int{0}})
	assert.Error(t, err)
	_, err = New(Config{CPUs: []int{-3}})
	assert.Error(t, err)
	never, err := New(Config{})
	require.NoError(t, err)
	require.NoError(t, never.Stop(context.Background()), "Stop before Start")
}

func TestStopDrainsQueuedAndInFlightWork(t *testing.T) {
	s, err := New(Config{Workers: 2})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	var ran atomic.Int64
	release := block(t, s.Worker(0))
	for i := 0; i < 100; i++ {
		require.NoError(t, s.Worker(i%2).Submit(lanes.Upstream, func() { ran.Add(1) }))
	}
	opGate := make(chan struct{})
	resumed := make(chan error, 1)
	require.NoError(t, s.Worker(1).Submit(lanes.Upstream, func() {
		s.Worker(1).Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
			_, err := Await(ctx, func(context.Context) (int, error) { <-opGate; return 1, nil })
			resumed <- err
		})
	}))
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(context.Background()) }()
	require.Eventually(t, func() bool { return s.Submit(lanes.Upstream, func() {}) != nil }, waitFor, tick)
	release()
	close(opGate)
	require.NoError(t, <-stopped)
	assert.Equal(t, int64(100), ran.Load(), "every queued task ran")
	assert.NoError(t, <-resumed, "the suspended coroutine finished")
	assert.Zero(t, s.Snapshot().Dropped)
}

func TestStopCancelsWhenContextEnds(t *testing.T) {
	s, err := New(Config{})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	opGate := make(chan struct{})
	opDone := make(chan struct{})
	awaitErr := make(chan error, 2)
	require.NoError(t, s.Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
		_, err := Await(ctx, func(context.Context) (int, error) { defer close(opDone); <-opGate; return 1, nil })
		awaitErr <- err
		// Further waits fail at once instead of suspending.
		awaitErr <- Sleep(ctx, time.Hour)
	}))
	require.Eventually(t, func() bool { return s.Snapshot().Workers[0].Pending == 1 }, waitFor, tick)
	release := block(t, s.Worker(0))
	for i := 0; i < 10; i++ {
		require.NoError(t, s.Worker(0).Submit(lanes.Upstream, func() { t.Error("dropped task ran") }))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(ctx) }()
	// Let the blocked worker go only once Stop has given up draining.
	require.Eventually(t, func() bool { return s.state.Load() == stateCanceling }, waitFor, tick)
	release()
	assert.ErrorIs(t, <-stopped, context.DeadlineExceeded)
	assert.ErrorIs(t, <-awaitErr, ErrStopped)
	assert.ErrorIs(t, <-awaitErr, ErrStopped)
	assert.Equal(t, int64(10), s.Snapshot().Dropped)
	close(opGate) // the operation ends later; its result is discarded
	<-opDone
	require.Eventually(t, func() bool { return s.Snapshot().Workers[0].Pending == 0 }, waitFor, tick)
}

func TestStress(t *testing.T) {
	s, err := New(Config{Workers: 2})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	const producers, each = 8, 300
	var done atomic.Int64
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				switch i % 3 {
				case 0:
					require.NoError(t, s.Submit(lanes.Upstream, func() { done.Add(1) }))
				case 1:
					require.NoError(t, s.Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
						v, err := Await(ctx, func(context.Context) (int64, error) { return 1, nil })
						if err == nil {
							_ = Sleep(ctx, time.Duration(i%4)*time.Millisecond)
							done.Add(v)
						}
					}))
				case 2:
					w := s.Worker(i % 2)
					require.NoError(t, w.Submit(lanes.Continuation, func() {
						w.Push(lanes.Upstream, func() {
							w.Offload(func() {}, func() { done.Add(1) })
						})
					}))
				}
				_ = s.Busy()
				if i%50 == 0 {
					_ = s.Snapshot()
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, s.Stop(context.Background()))
	assert.Equal(t, int64(producers*each), done.Load())
	assert.Zero(t, s.Busy())
}

// TestNoLostWakeups hammers the park/wake hand-off: many coroutines awaiting
// trivial operations make the worker park and wake tens of thousands of
// times while completions race with it. A lost wakeup leaves the worker
// asleep with work in its inbox, and the test times out.
func TestNoLostWakeups(t *testing.T) {
	s := start(t, Config{})
	w := s.Worker(0)
	for round := 0; round < 20; round++ {
		var wg sync.WaitGroup
		wg.Add(32)
		require.NoError(t, w.Submit(lanes.Upstream, func() {
			for c := 0; c < 32; c++ {
				w.Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
					defer wg.Done()
					for i := 0; i < 100; i++ {
						_, _ = Await(ctx, func(context.Context) (int, error) { return i, nil })
					}
				})
			}
		}))
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(waitFor):
			t.Fatalf("round %d: coroutines stuck; snapshot %+v", round, s.Snapshot().Workers[0])
		}
	}
}

func TestPauseResumesOnWorker(t *testing.T) {
	s := start(t, Config{})
	w := s.Worker(0)
	var resume func()
	var order []string
	done := make(chan error, 1)
	onWorker(t, w, func() {
		w.GoNow(context.Background(), func(ctx context.Context) {
			order = append(order, "before")
			err := Pause(ctx, func(r func()) { resume = r })
			order = append(order, "after")
			done <- err
		})
		// GoNow returned at the first suspension, inside this task.
		order = append(order, "suspended")
		assert.Equal(t, 1, w.suspended.n)
	})
	onWorker(t, w, func() {
		assert.Equal(t, []string{"before", "suspended"}, order)
		resume()
		resume() // a second call is a no-op
	})
	require.NoError(t, <-done)
	onWorker(t, w, func() {
		assert.Equal(t, []string{"before", "suspended", "after"}, order)
		assert.Equal(t, 0, w.suspended.n)
		resume() // after the pause ended: no-op
	})
}

func TestPauseResumedInsideArm(t *testing.T) {
	s := start(t, Config{})
	w := s.Worker(0)
	done := make(chan error, 1)
	onWorker(t, w, func() {
		w.GoNow(context.Background(), func(ctx context.Context) {
			done <- Pause(ctx, func(r func()) { r() })
		})
	})
	require.NoError(t, <-done)
}

func TestPauseOutsideCoroutine(t *testing.T) {
	assert.False(t, InCoroutine(context.Background()))
	err := Pause(context.Background(), func(func()) { t.Error("arm must not run") })
	assert.ErrorIs(t, err, ErrNotCoroutine)
}

func TestPauseCanceledByStop(t *testing.T) {
	s, err := New(Config{})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	w := s.Worker(0)
	done := make(chan error, 1)
	in := make(chan bool, 1)
	onWorker(t, w, func() {
		w.GoNow(context.Background(), func(ctx context.Context) {
			in <- InCoroutine(ctx)
			done <- Pause(ctx, func(func()) {})
		})
	})
	assert.True(t, <-in)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, s.Stop(ctx), context.DeadlineExceeded)
	assert.ErrorIs(t, <-done, ErrStopped)
}

func TestTimerReset(t *testing.T) {
	clk := &fakeClock{}
	s := start(t, Config{Clock: clk.now})
	w := s.Worker(0)
	var fired atomic.Int32
	var tm *Timer
	onWorker(t, w, func() {
		tm = w.AfterFunc(10*time.Millisecond, lanes.Upstream, func() { fired.Add(1) })
		assert.True(t, tm.Pending())
		tm.Reset(30 * time.Millisecond) // pending: moved, not duplicated
		assert.Equal(t, int64(30*time.Millisecond), tm.Deadline()-w.Now())
	})
	clk.advance(20 * time.Millisecond)
	onWorker(t, w, func() {}) // a pass of the loop: nothing due yet
	assert.Equal(t, int32(0), fired.Load())
	clk.advance(20 * time.Millisecond)
	require.Eventually(t, func() bool {
		_ = w.Submit(lanes.Upstream, func() {}) // wake the worker to see the clock
		return fired.Load() == 1
	}, waitFor, tick)
	onWorker(t, w, func() {
		assert.False(t, tm.Pending())
		assert.False(t, tm.Stop()) // it fired
		tm.Reset(5 * time.Millisecond)
	})
	clk.advance(10 * time.Millisecond)
	require.Eventually(t, func() bool {
		_ = w.Submit(lanes.Upstream, func() {})
		return fired.Load() == 2
	}, waitFor, tick)
}

func TestSpinningWorkerTakesWorkAndCountsIdle(t *testing.T) {
	s := start(t, Config{Spin: 50 * time.Millisecond})
	w := s.Worker(0)
	onWorker(t, w, func() {})
	// Spinning after its last task, the worker counts as idle...
	require.Eventually(t, func() bool { return s.Busy() == 0 }, waitFor, tick)
	// ...and takes submitted work, whether it spins or sleeps by then.
	for range 100 {
		onWorker(t, w, func() {})
	}
	snap := s.Snapshot()
	assert.Less(t, snap.Workers[0].Parks, int64(100), "most hand-offs found the worker spinning")
}

func TestJobContextHoldsTheJobsContext(t *testing.T) {
	s := start(t, Config{})
	w := s.Worker(0)
	type key struct{}
	j := &JobContext{Parent: context.WithValue(context.Background(), key{}, "v")}
	var resume func()
	done := make(chan error, 1)
	var got any
	var allocs float64
	onWorker(t, w, func() {
		w.GoNow(j, func(ctx context.Context) {
			got = ctx.Value(key{})
			done <- Pause(ctx, func(r func()) { resume = r })
		})
		// A job that ends at once: its start allocates nothing for its
		// context when it has a JobContext (the coroutine is reused).
		allocs = testing.AllocsPerRun(100, func() {
			w.GoNow(&JobContext{}, func(context.Context) {})
		})
	})
	assert.Equal(t, "v", got, "the job's context has Parent's values")
	onWorker(t, w, func() { resume() })
	require.NoError(t, <-done, "the job's context found its coroutine")
	onWorker(t, w, func() {
		assert.PanicsWithValue(t, "sched: a JobContext serves one job; use a new one", func() {
			w.GoNow(j, func(context.Context) {})
		})
	})
	// Only the JobContext itself: &JobContext{} escapes, and is the one
	// allocation left of each run.
	assert.Equal(t, 1.0, allocs)
}

// IdlePeer names another worker only while that one is parked, never the
// asker, and nobody on a scheduler of one worker.
func TestIdlePeer(t *testing.T) {
	one := start(t, Config{Workers: 1})
	assert.Nil(t, one.Worker(0).IdlePeer(), "no peer at all")

	s := start(t, Config{Workers: 3, BlockedAfter: -1})
	w0, w1, w2 := s.Worker(0), s.Worker(1), s.Worker(2)
	release0 := block(t, w0)
	defer release0()
	parked := func(w *Worker) bool { return w.parkState.Load() == parkParked }
	require.Eventually(t, func() bool { return parked(w1) && parked(w2) }, waitFor, tick)
	seen := map[*Worker]bool{}
	for range 20 {
		p := w0.IdlePeer()
		require.Contains(t, []*Worker{w1, w2}, p)
		seen[p] = true
	}
	assert.Len(t, seen, 2, "the choice is spread over the idle ones")
	release1 := block(t, w1)
	defer release1()
	require.Eventually(t, func() bool { return parked(w2) }, waitFor, tick)
	assert.Same(t, w2, w0.IdlePeer())
	assert.Same(t, w2, w1.IdlePeer())
	assert.Nil(t, w2.IdlePeer(), "the only idle worker is not its own peer")
	release2 := block(t, w2)
	assert.Nil(t, w0.IdlePeer(), "every other worker is busy")
	release2()
}
