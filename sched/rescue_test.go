//go:build linux

package sched

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sluice-go/sluice/internal/syncbuf"
	"github.com/sluice-go/sluice/lanes"
)

// offCPU makes every thread look asleep to the watchdog: the threshold is
// then a pure function of wall time, and any guest region older than
// BlockedAfter is handed over.
func offCPU(int32) (run, wait int64, err error) { return 0, 0, nil }

// startRescue starts a one-worker scheduler whose watchdog sees guest code
// as blocked once it is older than 2 ms.
func startRescue(t *testing.T, cfg Config, cpu func(int32) (run, wait int64, err error)) *Scheduler {
	t.Helper()
	cfg.Workers = max(1, cfg.Workers)
	if cfg.BlockedAfter == 0 {
		cfg.BlockedAfter = 2 * time.Millisecond
	}
	if cfg.SpareIdle == 0 {
		cfg.SpareIdle = 20 * time.Millisecond
	}
	s, err := New(cfg)
	require.NoError(t, err)
	s.schedstat = cpu
	s.threadState = func(int32) (byte, error) { return 'S', nil } // asleep, as cpu says
	s.goBacklog = func() bool { return false }                    // a loaded test machine's backlog would delay the hand-over
	require.NoError(t, s.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Stop(ctx))
	})
	return s
}

type label string

func (l label) String() string { return string(l) }

// A handler blocked in guest code does not stall its worker: tasks queued
// behind it run on a spare thread pinned like the worker, the handler gets
// the worker back when it touches it, and the spare exits once idle.
func TestBlockedGuestHandsWorkerToSpare(t *testing.T) {
	var logged syncbuf.Buffer
	s := startRescue(t, Config{Logger: slog.New(slog.NewTextHandler(&logged, nil))}, offCPU)
	w := s.Worker(0)
	firstTID := w.TID()

	gate := make(chan struct{})
	guestDone := make(chan int, 1)
	require.NoError(t, w.Submit(lanes.Upstream, func() {
		w.Guest(label("GET /plain"), func() {
			<-gate // blocks the thread, as a plain http.Get would
			// Touching the worker from the guest waits for it.
			w.Push(lanes.Continuation, func() {})
		})
		guestDone <- unix.Gettid()
	}))

	// Work submitted after the guest blocked runs meanwhile, on another
	// thread.
	ran := make(chan int, 1)
	require.NoError(t, w.Submit(lanes.Upstream, func() { ran <- unix.Gettid() }))
	var spareTID int
	select {
	case spareTID = <-ran:
	case <-time.After(waitFor):
		t.Fatal("the worker stayed stalled behind the blocked guest")
	}
	assert.NotEqual(t, firstTID, spareTID)
	snap := s.Snapshot()
	assert.Equal(t, int64(1), snap.Blocked)
	assert.Equal(t, int64(1), snap.Handovers)
	assert.Equal(t, 1, snap.Spares)

	close(gate)
	select {
	case tid := <-guestDone:
		assert.Equal(t, firstTID, tid, "the guest's task ends on its own thread")
	case <-time.After(waitFor):
		t.Fatal("the guest did not get its worker back")
	}
	// The worker still serves, and the spare thread retires.
	onWorker(t, w, func() {})
	require.Eventually(t, func() bool { return s.Snapshot().Spares == 0 }, waitFor, tick)
	assert.Equal(t, 1, s.Snapshot().SparesPeak)
	require.Eventually(t, func() bool { return bytes.Contains(logged.Bytes(), []byte("GET /plain")) }, waitFor, tick)
	assert.Contains(t, logged.String(), "sched.Await")
	assert.Contains(t, logged.String(), "held=")
}

// Code that computes is not blocked: the watchdog leaves it its worker.
func TestComputingGuestKeepsItsWorker(t *testing.T) {
	// Runs all the time: an hour more of CPU at every reading, whatever
	// the watchdog's own delays between its clock and the reading (a
	// reading that tracked the clock was once taken, on a loaded machine
	// under the race detector, long enough after the tick to look idle).
	var ran atomic.Int64
	onCPU := func(int32) (int64, int64, error) { return ran.Add(int64(time.Hour)), 0, nil }
	s := startRescue(t, Config{}, onCPU)
	w := s.Worker(0)
	onWorker(t, w, func() {
		w.Guest(nil, func() { time.Sleep(30 * time.Millisecond) })
	})
	snap := s.Snapshot()
	assert.Zero(t, snap.Blocked)
	assert.Zero(t, snap.Handovers)
}

// Without Guest, blocking code keeps its worker (the isolated model): the
// executor's own callbacks are never handed over.
func TestPlainTaskIsNeverHandedOver(t *testing.T) {
	s := startRescue(t, Config{}, offCPU)
	w := s.Worker(0)
	release := block(t, w)
	time.Sleep(20 * time.Millisecond)
	release()
	onWorker(t, w, func() {})
	assert.Zero(t, s.Snapshot().Handovers)
}

// Coroutines stay on the thread that made them: one suspended on the
// blocked thread resumes there once the guest is back, and one started on
// the spare resumes on the spare, which gets the worker for it.
func TestCoroutinesResumeOnTheirOwnThread(t *testing.T) {
	s := startRescue(t, Config{SpareIdle: time.Minute}, offCPU)
	w := s.Worker(0)
	ctx := context.Background()

	type tids struct{ before, after int }
	// A: suspended on the first thread before the guest blocks.
	aRelease := make(chan struct{})
	aDone := make(chan tids, 1)
	aWaiting := make(chan struct{})
	require.NoError(t, w.Submit(lanes.Upstream, func() {
		w.Go(ctx, lanes.Upstream, func(ctx context.Context) {
			before := unix.Gettid()
			_, err := Await(ctx, func(context.Context) (int, error) { close(aWaiting); <-aRelease; return 0, nil })
			assert.NoError(t, err)
			aDone <- tids{before, unix.Gettid()}
		})
	}))
	<-aWaiting

	// B: blocks the first thread in guest code.
	bGate := make(chan struct{})
	bDone := make(chan struct{})
	require.NoError(t, w.Submit(lanes.Upstream, func() {
		w.Go(ctx, lanes.Upstream, func(ctx context.Context) {
			w.Guest(nil, func() { <-bGate })
			close(bDone)
		})
	}))
	require.Eventually(t, func() bool { return s.Snapshot().Handovers == 1 }, waitFor, tick)

	// A's operation ends while its thread is away: A waits for it.
	close(aRelease)
	// C: starts on the spare and suspends there.
	cRelease := make(chan struct{})
	cDone := make(chan tids, 1)
	cWaiting := make(chan struct{})
	require.NoError(t, w.Submit(lanes.Upstream, func() {
		w.Go(ctx, lanes.Upstream, func(ctx context.Context) {
			before := unix.Gettid()
			_, err := Await(ctx, func(context.Context) (int, error) { close(cWaiting); <-cRelease; return 0, nil })
			assert.NoError(t, err)
			cDone <- tids{before, unix.Gettid()}
		})
	}))
	<-cWaiting
	select {
	case <-aDone:
		t.Fatal("A resumed while its thread was blocked")
	case <-time.After(20 * time.Millisecond):
	}

	close(bGate)
	<-bDone
	a := <-aDone
	assert.Equal(t, a.before, a.after, "A resumed on its own thread")
	close(cRelease)
	c := <-cDone
	assert.Equal(t, c.before, c.after, "C resumed on its own thread")
	assert.NotEqual(t, a.before, c.before)
	onWorker(t, w, func() {})
}

// A bound on spare threads holds: once it is reached, a worker whose
// thread blocks waits, and the blocking is still counted.
func TestSparesAreBounded(t *testing.T) {
	s := startRescue(t, Config{MaxSpares: 1}, offCPU)
	w := s.Worker(0)
	gate := make(chan struct{})
	var done sync.WaitGroup
	for range 2 {
		done.Add(1)
		require.NoError(t, w.Submit(lanes.Upstream, func() {
			w.Guest(nil, func() { <-gate })
			done.Done()
		}))
	}
	require.Eventually(t, func() bool { return s.Snapshot().Blocked == 2 }, waitFor, tick)
	time.Sleep(10 * time.Millisecond)
	snap := s.Snapshot()
	assert.Equal(t, int64(1), snap.Handovers)
	assert.Equal(t, 1, snap.Spares)
	close(gate)
	done.Wait()
	onWorker(t, w, func() {})
}

// Stop waits for a blocked guest, as net/http's Shutdown waits for a
// running handler, and then leaves no thread behind.
func TestStopWhileGuestBlocked(t *testing.T) {
	s, err := New(Config{Workers: 1, BlockedAfter: 2 * time.Millisecond, SpareIdle: time.Minute})
	require.NoError(t, err)
	s.schedstat = offCPU
	s.goBacklog = func() bool { return false }
	require.NoError(t, s.Start())
	w := s.Worker(0)
	gate := make(chan struct{})
	finished := make(chan error, 1)
	require.NoError(t, w.Submit(lanes.Upstream, func() {
		w.Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
			w.Guest(nil, func() { <-gate })
			finished <- Sleep(ctx, time.Millisecond)
		})
	}))
	require.Eventually(t, func() bool { return s.Snapshot().Handovers == 1 }, waitFor, tick)
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(context.Background()) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while a guest was still running")
	case <-time.After(20 * time.Millisecond):
	}
	close(gate)
	require.NoError(t, <-finished)
	require.NoError(t, <-stopped)
	assert.Zero(t, s.Snapshot().Spares)
}

// A Stop whose context has ended cancels suspended coroutines on their own
// threads, the first one's and the spare's.
func TestCancelledStopReachesEveryThread(t *testing.T) {
	s, err := New(Config{Workers: 1, BlockedAfter: 2 * time.Millisecond, SpareIdle: time.Minute})
	require.NoError(t, err)
	s.schedstat = offCPU
	s.goBacklog = func() bool { return false }
	require.NoError(t, s.Start())
	w := s.Worker(0)
	results := make(chan error, 2)
	sleeper := func(ctx context.Context) { results <- Sleep(ctx, time.Hour) }
	require.NoError(t, w.Submit(lanes.Upstream, func() { w.Go(context.Background(), lanes.Upstream, sleeper) }))
	gate := make(chan struct{})
	guestDone := make(chan struct{})
	require.NoError(t, w.Submit(lanes.Upstream, func() {
		w.Guest(nil, func() { <-gate })
		close(guestDone)
	}))
	require.Eventually(t, func() bool { return s.Snapshot().Handovers == 1 }, waitFor, tick)
	// This one suspends on the spare.
	require.NoError(t, w.Submit(lanes.Upstream, func() { w.Go(context.Background(), lanes.Upstream, sleeper) }))
	require.Eventually(t, func() bool {
		var n int
		onWorker(t, w, func() { n = w.suspended.n })
		return n == 2
	}, waitFor, tick)
	close(gate)
	<-guestDone
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.Error(t, s.Stop(ctx))
	assert.ErrorIs(t, <-results, ErrStopped)
	assert.ErrorIs(t, <-results, ErrStopped)
	assert.Zero(t, s.Snapshot().Spares)
}

// The debug option logs the blocked goroutine's stack once per call site.
func TestBlockedStacksOncePerCallSite(t *testing.T) {
	var logged syncbuf.Buffer
	s := startRescue(t, Config{BlockedStacks: true, Logger: slog.New(slog.NewTextHandler(&logged, nil))}, offCPU)
	w := s.Worker(0)
	for i := range 3 {
		// The guest blocks until it was handed over: the watchdog takes
		// the stack before it hands over, so the stack is the block's
		// whatever the machine's load (a guest that blocked for a fixed
		// 15 ms had sometimes moved on by then).
		gate := make(chan struct{})
		go func() {
			defer close(gate)
			for end := time.Now().Add(waitFor); s.Snapshot().Handovers <= int64(i) && time.Now().Before(end); {
				time.Sleep(time.Millisecond)
			}
		}()
		onWorker(t, w, func() {
			w.Guest(nil, func() { blockHere(gate) })
		})
	}
	assert.Equal(t, 1, bytes.Count(logged.Bytes(), []byte("logged once per call site")), logged.String())
	assert.Contains(t, logged.String(), "blockHere")
}

// blockHere blocks until gate closes, at one call site.
func blockHere(gate chan struct{}) { <-gate }

// A worker whose thread waits for its CPU (another process holds it) is
// counted, and logged when it waits more than a quarter of the time.
func TestStarvedWorkerIsCounted(t *testing.T) {
	var logged syncbuf.Buffer
	var wait int64
	s := startRescue(t, Config{BlockedAfter: -1, Logger: slog.New(slog.NewTextHandler(&logged, nil))},
		func(int32) (int64, int64, error) { return 0, wait, nil })
	w := s.Worker(0)
	sec := int64(time.Second)
	w.checkStarved(sec) // first reading: the baseline
	wait = sec / 10
	w.checkStarved(2 * sec) // waited 10% of a second: counted, not logged
	assert.Equal(t, sec/10, s.Snapshot().Workers[0].RunQueueWaitNs)
	assert.Zero(t, s.Snapshot().Starved)
	wait += sec / 2
	w.checkStarved(3 * sec) // waited half of it: starved
	snap := s.Snapshot()
	assert.Equal(t, sec*6/10, snap.Workers[0].RunQueueWaitNs)
	assert.Equal(t, int64(1), snap.Starved)
	assert.Contains(t, logged.String(), "waited for its CPU")
	assert.Contains(t, logged.String(), "waited=50%")
}

// A thread whose goroutine waits for a P while Go has more runnable
// goroutines than Ps was preempted, not blocked: it keeps its worker.
func TestGoBacklogKeepsTheWorker(t *testing.T) {
	s, err := New(Config{Workers: 1, BlockedAfter: 2 * time.Millisecond})
	require.NoError(t, err)
	s.schedstat = offCPU
	s.goBacklog = func() bool { return true }
	require.NoError(t, s.Start())
	t.Cleanup(func() { require.NoError(t, s.Stop(context.Background())) })
	w := s.Worker(0)
	onWorker(t, w, func() {
		w.Guest(nil, func() { time.Sleep(20 * time.Millisecond) })
	})
	assert.Zero(t, s.Snapshot().Handovers)
}

// Guest code that calls Release before it blocks gives its worker to a
// spare at once: work queued behind it runs meanwhile even with the
// watchdog off, nothing is counted or logged as blocked, and the guest
// takes the worker back when it touches it.
func TestReleaseHandsTheWorkerOverAtOnce(t *testing.T) {
	var logged syncbuf.Buffer
	s := startRescue(t, Config{BlockedAfter: -1, Logger: slog.New(slog.NewTextHandler(&logged, nil))}, offCPU)
	w := s.Worker(0)
	gate := make(chan struct{})
	guestDone := make(chan struct{})
	require.NoError(t, w.Submit(lanes.Upstream, func() {
		w.Guest(label("GET /ws"), func() {
			w.Release()
			<-gate // a WebSocket's loop, say
			w.Push(lanes.Continuation, func() {})
		})
		close(guestDone)
	}))
	ran := make(chan struct{})
	require.NoError(t, w.Submit(lanes.Upstream, func() { close(ran) }))
	select {
	case <-ran:
	case <-time.After(waitFor):
		t.Fatal("the worker stayed behind the released guest (the watchdog is off)")
	}
	close(gate)
	select {
	case <-guestDone:
	case <-time.After(waitFor):
		t.Fatal("the guest did not get its worker back")
	}
	snap := s.Snapshot()
	assert.Equal(t, int64(1), snap.Handovers)
	assert.Zero(t, snap.Blocked)
	assert.NotContains(t, logged.String(), "blocked")

	// Outside guest code it does nothing.
	done := make(chan struct{})
	require.NoError(t, w.Submit(lanes.Upstream, func() { w.Release(); close(done) }))
	<-done
	assert.Equal(t, int64(1), s.Snapshot().Handovers)
}

// A guest whose thread is runnable (R) is left its worker even when it
// neither ran nor waited in a run queue: what its CPU quota's throttling
// looks like (a container's CPU limit). Once its thread sleeps, it is
// handed over.
func TestThrottledGuestIsNotBlocked(t *testing.T) {
	var state atomic.Int32
	state.Store('R')
	s := startRescue(t, Config{Logger: slog.New(slog.DiscardHandler)}, offCPU)
	s.threadState = func(int32) (byte, error) { return byte(state.Load()), nil }
	w := s.Worker(0)
	gate := make(chan struct{})
	guestDone := make(chan struct{})
	require.NoError(t, w.Submit(lanes.Upstream, func() {
		w.Guest(label("GET /forecast"), func() { <-gate })
		close(guestDone)
	}))
	time.Sleep(25 * 2 * time.Millisecond) // 25 times BlockedAfter
	assert.Zero(t, s.Snapshot().Handovers, "a runnable thread is not blocked")
	state.Store('S')
	require.Eventually(t, func() bool { return s.Snapshot().Handovers == 1 }, waitFor, time.Millisecond,
		"a sleeping one is")
	close(gate)
	<-guestDone
}

func TestParseThreadState(t *testing.T) {
	for in, want := range map[string]byte{
		"123 (sluice) R 1 123 123 0 -1":      'R',
		"123 (a) b) S 1 123 123 0 -1":        'S',
		"123 (name with ) inside) D 1 2 3 4": 'D',
		"7 ()) t 1 2":                        't',
	} {
		got, err := parseThreadState([]byte(in))
		require.NoError(t, err, in)
		assert.Equal(t, string(want), string(got), in)
	}
	for _, bad := range []string{"", "123 (x)", "123 x R"} {
		_, err := parseThreadState([]byte(bad))
		assert.Error(t, err, bad)
	}
}

// Guest code that said its blocking is by design (Quiet) is handed over
// when it blocks, as any, but not counted as blocked nor logged; the next
// guest, which did not say so, is.
func TestQuietGuestIsHandedOverUnlogged(t *testing.T) {
	var logged syncbuf.Buffer
	s := startRescue(t, Config{Logger: slog.New(slog.NewTextHandler(&logged, nil))}, offCPU)
	w := s.Worker(0)
	run := func(quiet bool) {
		gate := make(chan struct{})
		done := make(chan struct{})
		require.NoError(t, w.Submit(lanes.Upstream, func() {
			w.Guest(label("GET /events"), func() {
				if quiet {
					w.Quiet()
				}
				<-gate // waits between two events
			})
			close(done)
		}))
		before := s.Snapshot().Handovers
		require.Eventually(t, func() bool { return s.Snapshot().Handovers > before }, waitFor, time.Millisecond)
		close(gate)
		<-done
	}
	run(true)
	assert.Zero(t, s.Snapshot().Blocked)
	assert.NotContains(t, logged.String(), "blocked")
	run(false)
	assert.Equal(t, int64(1), s.Snapshot().Blocked)
	assert.Contains(t, logged.String(), "blocked")
}

// With no guest code on any worker, the watchdog sleeps (no wake-ups on an
// idle server); guest code that then blocks wakes it, and is handed over
// as before.
func TestWatchdogSleepsWhileIdle(t *testing.T) {
	s := startRescue(t, Config{Logger: slog.New(slog.DiscardHandler)}, offCPU)
	require.Eventually(t, s.dogAsleep.Load, waitFor, time.Millisecond, "idle: the watchdog sleeps")
	w := s.Worker(0)
	gate := make(chan struct{})
	done := make(chan struct{})
	require.NoError(t, w.Submit(lanes.Upstream, func() {
		w.Guest(label("GET /plain"), func() { <-gate })
		close(done)
	}))
	require.Eventually(t, func() bool { return s.Snapshot().Handovers == 1 }, waitFor, time.Millisecond,
		"a guest that blocks wakes it")
	close(gate)
	<-done
	require.Eventually(t, s.dogAsleep.Load, waitFor, time.Millisecond, "and it sleeps again")
}

// The snapshot reads what the CPU quota of the process's cgroup did from
// its cpu.stat.
func TestSnapshotThrottled(t *testing.T) {
	s := startRescue(t, Config{}, offCPU)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cpu.stat"), []byte("nr_periods 211\nnr_throttled 79\nthrottled_time 3465525775\n"), 0o644))
	s.cpuDir = dir
	assert.Equal(t, int64(79), s.Snapshot().Throttled.Periods)
	assert.Equal(t, 3465525775*time.Nanosecond, s.Snapshot().Throttled.Time)
	s.cpuDir = ""
	assert.Zero(t, s.Snapshot().Throttled)
}

// A guest that computes while more goroutines want to run than Go has Ps
// for (busy loops beside the server, or a machine whose CPUs are shared)
// spends spells waiting for a P, its locked thread asleep until Go hands it
// one: that is being preempted, not blocking, and the real watchdog (real
// schedstat, thread states and Go's run queue) neither hands its worker
// over nor logs it. Three busy goroutines want the three Ps while the
// guest computes for 200 ms, yielding its P every 50 µs: Go's run queue
// then never holds as many goroutines as it has Ps, and yet the guest
// waits in it.
func TestGuestWaitingForAPIsNotBlocked(t *testing.T) {
	prev := goruntime.GOMAXPROCS(3)
	defer goruntime.GOMAXPROCS(prev)
	var logged syncbuf.Buffer
	s, err := New(Config{Workers: 1, BlockedAfter: 2 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(func() { require.NoError(t, s.Stop(context.Background())) })

	stop := make(chan struct{})
	var burners sync.WaitGroup
	for range 3 {
		burners.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := 0; i < 1e5; i++ {
					_ = i * i
				}
			}
		})
	}
	defer func() {
		close(stop)
		burners.Wait()
	}()
	w := s.Worker(0)
	onWorker(t, w, func() {
		w.Guest(label("GET /compute"), func() {
			for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
				for slice := time.Now().Add(50 * time.Microsecond); time.Now().Before(slice); {
				}
				goruntime.Gosched()
			}
		})
	})
	snap := s.Snapshot()
	assert.Zero(t, snap.Blocked, "log: %s", logged.String())
	assert.Zero(t, snap.Handovers)
}

// GoAloneWhile asks its job's alone as the job starts, not as it is
// queued: a job told no longer to need a thread of its own starts on the
// worker's current thread, beside a coroutine suspended there; one told it
// does starts on another.
func TestGoAloneWhileAsksAsTheJobStarts(t *testing.T) {
	for _, alone := range []bool{true, false} {
		s := startRescue(t, Config{Logger: slog.New(slog.DiscardHandler)}, offCPU)
		w := s.Worker(0)
		sleeper := make(chan int, 1)
		onWorker(t, w, func() {
			w.Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
				sleeper <- gettid()
				_ = Sleep(ctx, 100*time.Millisecond)
			})
		})
		tid := <-sleeper // the sleeper has suspended, its thread the worker's
		job := make(chan int, 1)
		asked := 0
		onWorker(t, w, func() {
			decided := true
			w.GoAloneWhile(context.Background(), lanes.Upstream, func(context.Context) { job <- gettid() },
				func() bool { asked++; return decided })
			decided = alone // learned after the job was queued, before it starts
		})
		got := <-job
		if alone {
			assert.NotEqual(t, tid, got, "alone: a thread of its own")
		} else {
			assert.Equal(t, tid, got, "no longer alone: the worker's thread, beside the sleeper")
		}
		onWorker(t, w, func() {
			assert.Equal(t, 1, asked, "asked once, as the job started")
			assert.PanicsWithValue(t, "sched: GoAloneWhile with a nil alone", func() {
				w.GoAloneWhile(context.Background(), lanes.Upstream, func(context.Context) {}, nil)
			})
		})
	}
}

// A coroutine resumes only on the thread that made it, so one left on a
// thread that goes away with blocking guest code waits for that code to
// end. GoAlone starts the blocking job on a thread of its own: a
// coroutine asleep on the worker's thread wakes and ends while the job
// still blocks. With Go instead of GoAlone it waits for the job.
func TestGoAloneLeavesNoCoroutineBehind(t *testing.T) {
	for _, alone := range []bool{true, false} {
		s := startRescue(t, Config{Logger: slog.New(slog.DiscardHandler)}, offCPU)
		w := s.Worker(0)
		gate := make(chan struct{})
		blocked := make(chan struct{})
		slept := make(chan struct{})
		onWorker(t, w, func() {
			w.Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
				_ = Sleep(ctx, 20*time.Millisecond)
				close(slept)
			})
		})
		time.Sleep(5 * time.Millisecond) // the sleeper has suspended
		start := w.Go
		if alone {
			start = w.GoAlone
		}
		onWorker(t, w, func() {
			start(context.Background(), lanes.Upstream, func(context.Context) {
				w.Guest(label("GET /stream"), func() {
					w.Release()
					close(blocked)
					<-gate
				})
			})
		})
		<-blocked
		select {
		case <-slept:
			assert.True(t, alone, "the sleeper ended while the job blocked, though it shared its thread")
		case <-time.After(500 * time.Millisecond):
			assert.False(t, alone, "the sleeper waits for the thread the job holds")
		}
		close(gate)
		<-slept
	}
}

// While every guest region the watchdog finds is young (under a quarter of
// BlockedAfter), it looks once each BlockedAfter rather than each half:
// each look wakes threads on the workers' CPUs. A region that then blocks
// is still handed over.
func TestWatchdogLooksLessOftenAtShortRegions(t *testing.T) {
	const blockedAfter = 8 * time.Millisecond
	s := startRescue(t, Config{BlockedAfter: blockedAfter, Logger: slog.New(slog.DiscardHandler)}, offCPU)
	w := s.Worker(0)
	const run = 400 * time.Millisecond
	done := make(chan int64, 1)
	start, before := time.Now(), s.dogLooks.Load()
	// A task per region, as a server runs a handler per request, each
	// queueing the next.
	var short func()
	short = func() {
		w.Guest(label("GET /short"), func() {
			for end := time.Now().Add(100 * time.Microsecond); time.Now().Before(end); {
			}
		})
		if time.Since(start) < run {
			w.Push(lanes.Upstream, short)
			return
		}
		done <- s.dogLooks.Load() - before
	}
	require.NoError(t, w.Submit(lanes.Upstream, short))
	var looks int64
	select {
	case looks = <-done:
	case <-time.After(waitFor):
		t.Fatal("the regions did not end")
	}
	// Looks each BlockedAfter/2 would be 100; a loaded machine only
	// delays them.
	assert.LessOrEqual(t, looks, int64(run/blockedAfter)+10, "looks at short regions")
	assert.Zero(t, s.Snapshot().Handovers, "nothing blocked")

	gate := make(chan struct{})
	require.NoError(t, w.Submit(lanes.Upstream, func() {
		w.Guest(label("GET /plain"), func() { <-gate })
	}))
	require.Eventually(t, func() bool { return s.Snapshot().Handovers == 1 }, waitFor, time.Millisecond,
		"a region that blocks after them is handed over")
	close(gate)
}
