// Package sched is the executor of sluice: one worker per CPU, each a
// goroutine locked to its OS thread (and, if asked, pinned to one CPU), with a
// run queue per lane, an inbox for work submitted from other goroutines, an
// epoll instance it parks in, per-worker timers, and coroutines that let
// sequential code wait off the worker (Await).
//
// Code that runs on a worker (tasks, timer and poll callbacks, coroutines)
// uses the worker's local methods (Push, Go, AfterFunc, At, Watch), which
// take no lock. Every other goroutine uses Submit, which goes through the
// inbox and wakes the worker through an eventfd if it is parked.
//
// Code that may block its thread without Await (a request handler calling
// an SDK) runs as guest code (Worker.Guest): when it holds the thread off
// the CPU for longer than Config.BlockedAfter, a watchdog hands the worker
// to a spare thread, which goes on with the worker's other work, and the
// guest code gets the worker back when it next touches it.
//
// The busy count (Busy) is the number of workers not parked in epoll_wait.
// It changes only when a worker parks or unparks, so reading it is one atomic
// load and it is exact whenever no worker is between the two. A worker whose
// guest code blocked counts by its spare thread: the blocked code holds a
// thread, not a CPU.
//
// # Off Linux
//
// The executor needs Linux (epoll, eventfd, sched_setaffinity). The package
// builds everywhere, so that programs importing it do too, but elsewhere New
// fails with an error that wraps errors.ErrUnsupported and names the way out
// (the front door, package sluice, serves on net/http there). No code runs
// in a coroutine there, so these behave as they do outside one: Await runs
// its operation on the calling goroutine, Sleep blocks the caller, Yield
// returns nil at once, and Pause returns ErrNotCoroutine.
package sched

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/internal/cgroup"
	"github.com/sluice-go/sluice/internal/lograte"
	"github.com/sluice-go/sluice/internal/monotime"
	"github.com/sluice-go/sluice/lanes"
)

// Errors returned by the scheduler.
var (
	// ErrStopped is returned for work submitted after Stop began, and by
	// Await and Sleep in a coroutine that Stop cancelled.
	ErrStopped = errors.New("sched: scheduler stopped")
	// ErrNotStarted is returned for work submitted before Start.
	ErrNotStarted = errors.New("sched: scheduler not started")
	// ErrBadLane is returned for a lane ID the scheduler's lane set lacks.
	ErrBadLane = errors.New("sched: no such lane")
)

// Config configures a Scheduler. The zero value is usable: one unpinned
// worker, the default lanes, the real clock.
type Config struct {
	// Workers is the number of workers; zero means one, or len(CPUs) when
	// CPUs is set.
	Workers int
	// CPUs, when set, pins worker i to CPU CPUs[i] with sched_setaffinity.
	// It must then have one entry per worker. Nil leaves workers unpinned
	// (each still locked to its own OS thread).
	CPUs []int
	// Lanes is the lane set; nil means lanes.NewSet(). Start freezes it.
	Lanes *lanes.Set
	// Clock returns monotonic nanoseconds. Nil means the real clock; tests
	// pass a fake one to drive lane accounting deterministically.
	Clock func() int64
	// PollEvery is how many tasks a busy worker runs between two
	// non-blocking polls of its watched file descriptors; zero means 61.
	// A busy worker also polls once PollInterval has passed since its last
	// poll, however few tasks ran.
	PollEvery int
	// PollInterval is the longest a busy worker runs tasks without a
	// non-blocking poll, so that readiness (a new request) is seen within
	// about PollInterval plus one task however long the tasks are; zero
	// means DefaultPollInterval.
	PollInterval time.Duration
	// IdleCoroutines is how many finished coroutines each worker keeps for
	// reuse; zero means 128.
	IdleCoroutines int
	// Spin is how long a worker that runs out of work keeps polling its
	// inbox and descriptors (non-blocking epoll_wait) before it sleeps in
	// epoll_wait: work arriving meanwhile is taken without the cost of a
	// sleep and a wake-up (and of Go handing the thread's P to another
	// thread). A spinning worker counts as idle. Zero means no spinning;
	// it pays off when the CPUs are the workers' own.
	Spin time.Duration
	// OnPanic is called, on the worker, with the value and stack of a task
	// or coroutine that panicked; the worker then goes on. Nil logs the
	// panic with Logger.
	OnPanic func(v any, stack []byte)
	// Logger receives panics (when OnPanic is nil), guest code found
	// blocking its worker (see Worker.Guest) and internal errors; nil means
	// slog.Default().
	Logger *slog.Logger

	// BlockedAfter is how long guest code (see Worker.Guest) may hold its
	// worker's thread off the CPU before the worker goes on without it on
	// a spare thread; zero means DefaultBlockedAfter, and less than zero
	// turns the watchdog off (guest code that blocks then stalls its
	// worker). The watchdog looks every BlockedAfter/2, or every
	// BlockedAfter while every guest region it finds is younger than
	// BlockedAfter/4, so the worker goes on after BlockedAfter to
	// 1.75×BlockedAfter.
	BlockedAfter time.Duration
	// MaxSpares bounds the spare threads, over all workers, that run
	// workers whose threads are blocked; zero means DefaultMaxSpares, or 8
	// per worker when that is more. Each blocked handler keeps its thread
	// (about 18 KB resident) until it returns: a WebSocket served inside
	// its handler holds one for its life. A worker whose thread blocks
	// when the bound is reached waits, as it would without spares, and
	// the blocking is still counted and logged.
	MaxSpares int
	// SpareIdle is how long a thread that no longer runs its worker, and
	// has nothing of its own to resume, waits before it exits; zero means
	// one second.
	SpareIdle time.Duration
	// BlockedStacks logs, once for each call site, the stack of guest code
	// found blocking its worker: where a missing Await is. It costs a
	// stack walk at the start of every guest region; for debugging.
	BlockedStacks bool
}

// DefaultMaxSpares is the default Config.MaxSpares: far below Go's own
// bound of 10,000 threads (debug.SetMaxThreads), whose excess kills the
// process, and about 18 MB of threads when all are in use.
const DefaultMaxSpares = 1024

// DefaultBlockedAfter is the default Config.BlockedAfter: long enough that a
// handler preempted or faulting a page is left alone, short enough that the
// requests behind a blocked one wait a few milliseconds.
const DefaultBlockedAfter = 4 * time.Millisecond

// DefaultPollInterval is the default Config.PollInterval: a fraction of a
// millisecond-long handler, and one non-blocking epoll_wait (about a
// microsecond) per 200 µs of work at most.
const DefaultPollInterval = 200 * time.Microsecond

// scheduler states
const (
	stateNew int32 = iota
	stateRunning
	stateDraining  // Stop called: finish queued and in-flight work
	stateCanceling // Stop's context ended: drop what is left
	stateStopped
)

// Scheduler runs tasks on a fixed set of workers.
type Scheduler struct {
	cfg   Config
	set   *lanes.Set
	clock func() int64
	// pollInterval is cfg.PollInterval in nanoseconds.
	pollInterval int64
	workers      []*Worker
	state        atomic.Int32
	busy         atomic.Int32
	rr           atomic.Uint32
	hooks        atomic.Pointer[[]*idleHook]
	wg           sync.WaitGroup
	stopMu       sync.Mutex
	logger       *slog.Logger

	// The watchdog of guest code (watchdog.go).
	threads     atomic.Int32 // runner threads alive, spares included
	blocked     atomic.Int64 // guest regions found holding their thread off the CPU
	handovers   atomic.Int64 // workers handed to a spare thread
	spareHigh   atomic.Int32 // most spare threads alive at once
	starved     atomic.Int64 // readings of a worker waiting for its CPU
	dogStop     chan struct{}
	dogDone     chan struct{}
	dogWake     chan struct{} // wakes a sleeping watchdog (guestBegins)
	dogAsleep   atomic.Bool
	dogLooks    atomic.Int64 // the watchdog's looks at the workers, for tests
	cpuDir      string       // the cgroup directory of the cpu controller, "" when unknown
	blockLog    *lograte.Limiter
	stacks      sync.Map // call sites whose stack was logged
	schedstat   func(tid int32) (run, wait int64, err error)
	threadState func(tid int32) (byte, error)
	goBacklog   func() bool
}

// New returns a Scheduler for cfg. It validates the configuration and
// allocates the workers; Start creates their threads and kernel objects.
func New(cfg Config) (*Scheduler, error) {
	if err := supported(); err != nil {
		return nil, err
	}
	if cfg.Workers < 0 {
		return nil, fmt.Errorf("sched: negative worker count %d", cfg.Workers)
	}
	if cfg.Workers == 0 {
		cfg.Workers = max(1, len(cfg.CPUs))
	}
	if cfg.CPUs != nil && len(cfg.CPUs) != cfg.Workers {
		return nil, fmt.Errorf("sched: %d CPUs given for %d workers", len(cfg.CPUs), cfg.Workers)
	}
	for _, c := range cfg.CPUs {
		if c < 0 || c >= 1024 {
			return nil, fmt.Errorf("sched: CPU %d out of range", c)
		}
	}
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = 61
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.IdleCoroutines <= 0 {
		cfg.IdleCoroutines = 128
	}
	if cfg.BlockedAfter == 0 {
		cfg.BlockedAfter = DefaultBlockedAfter
	}
	if cfg.MaxSpares < 0 {
		return nil, fmt.Errorf("sched: negative MaxSpares %d", cfg.MaxSpares)
	}
	if cfg.MaxSpares == 0 {
		cfg.MaxSpares = max(DefaultMaxSpares, 8*cfg.Workers)
	}
	if cfg.SpareIdle < 0 {
		return nil, fmt.Errorf("sched: negative SpareIdle %v", cfg.SpareIdle)
	}
	if cfg.SpareIdle == 0 {
		cfg.SpareIdle = time.Second
	}
	s := &Scheduler{cfg: cfg, set: cfg.Lanes, clock: cfg.Clock, logger: cfg.Logger, pollInterval: int64(cfg.PollInterval),
		blockLog: lograte.New(blockedBurst), schedstat: threadSchedstat, threadState: threadState, goBacklog: goBacklog}
	if dir, err := cgroup.CPUDir("/"); err == nil {
		s.cpuDir = dir
	}
	if s.set == nil {
		s.set = lanes.NewSet()
	}
	if s.clock == nil {
		s.clock = monotime.Clock()
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	for i := 0; i < cfg.Workers; i++ {
		cpu := -1
		if cfg.CPUs != nil {
			cpu = cfg.CPUs[i]
		}
		s.workers = append(s.workers, newWorker(s, i, cpu))
	}
	return s, nil
}

// Lanes returns the scheduler's lane set, whose shares, priorities, policy
// and guard may be tuned while running.
func (s *Scheduler) Lanes() *lanes.Set { return s.set }

// NumWorkers returns the number of workers.
func (s *Scheduler) NumWorkers() int { return len(s.workers) }

// Worker returns worker i.
func (s *Scheduler) Worker(i int) *Worker { return s.workers[i] }

// Now returns the scheduler's clock in nanoseconds.
func (s *Scheduler) Now() int64 { return s.clock() }

// Busy returns the number of workers that are not parked: running a task,
// blocked in a task that does not Await, or polling. It is one atomic load.
func (s *Scheduler) Busy() int { return int(s.busy.Load()) }

// OnIdle registers fn to be called on a worker each time it runs out of work,
// after the busy count has dropped and before the worker parks. fn runs on
// that worker and may Push work there (for example a request waiting for
// admission), in which case the worker does not park. Hooks may be added at
// any time; the returned function removes fn again (a worker may still be
// calling it while remove runs, but never after a worker's next park has
// begun) and may be called more than once.
func (s *Scheduler) OnIdle(fn func(w *Worker)) (remove func()) {
	h := &idleHook{fn: fn}
	s.editHooks(func(hs []*idleHook) []*idleHook { return append(hs, h) })
	var once sync.Once
	return func() {
		once.Do(func() {
			s.editHooks(func(hs []*idleHook) []*idleHook {
				return slices.DeleteFunc(hs, func(x *idleHook) bool { return x == h })
			})
		})
	}
}

// NotifyIdle is OnIdle for a hook that does not need its worker (the
// admission pipeline's, which makes the scheduler an admit.Executor).
func (s *Scheduler) NotifyIdle(fn func()) (remove func()) {
	return s.OnIdle(func(*Worker) { fn() })
}

// IdleHooks returns the number of idle hooks registered: a check that
// what registered them (a server's admission) removed them when it
// stopped.
func (s *Scheduler) IdleHooks() int {
	if hs := s.hooks.Load(); hs != nil {
		return len(*hs)
	}
	return 0
}

// idleHook is one OnIdle registration; its pointer is its identity.
type idleHook struct{ fn func(w *Worker) }

// editHooks replaces the hook list by edit's result on a copy of it:
// copy-on-write, so that a worker reads the list with one atomic load.
func (s *Scheduler) editHooks(edit func([]*idleHook) []*idleHook) {
	for {
		old := s.hooks.Load()
		var hs []*idleHook
		if old != nil {
			hs = slices.Clone(*old)
		}
		hs = edit(hs)
		if s.hooks.CompareAndSwap(old, &hs) {
			return
		}
	}
}

// Start creates the worker threads, pins them when configured, and returns
// once every worker runs, or with the first error (after undoing the rest).
func (s *Scheduler) Start() error {
	if !s.state.CompareAndSwap(stateNew, stateRunning) {
		return errors.New("sched: Start called twice")
	}
	s.set.Freeze()
	errs := make(chan error, len(s.workers))
	for _, w := range s.workers {
		if err := w.open(); err != nil {
			s.state.Store(stateStopped)
			for _, o := range s.workers {
				o.close()
			}
			return err
		}
	}
	s.busy.Store(int32(len(s.workers))) // each worker starts busy
	now := s.clock()
	for _, w := range s.workers {
		w.busySince.Store(now)
		w.isBusy.Store(true)
		r := newRunner(w)
		r.state.Store(rCore)
		w.runners = append(w.runners, r)
		w.owner.Store(r)
		s.threads.Add(1)
		s.wg.Add(1)
		go r.main(true, errs)
	}
	var first error
	for range s.workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		s.state.Store(stateCanceling)
		s.wakeAll()
		s.wg.Wait()
		s.state.Store(stateStopped)
		return first
	}
	if s.cfg.BlockedAfter > 0 {
		s.dogStop, s.dogDone, s.dogWake = make(chan struct{}), make(chan struct{}), make(chan struct{}, 1)
		go s.watchdog()
	}
	return nil
}

// Stop stops the scheduler. New submissions from outside the workers fail
// with ErrStopped at once. Then the workers drain: they run every queued
// task, resume every suspended coroutine as its operation completes, and exit
// once they have nothing queued and nothing in flight. Pending timers that
// belong to no suspended coroutine are dropped. If ctx ends first, the
// workers cancel what is left instead: queued tasks are dropped (counted in
// Snapshot), suspended coroutines resume with ErrStopped from Await, and
// Stop returns ctx's error. Either way Stop returns only after every worker
// goroutine has exited and its kernel objects are closed. Operations started
// with Await or Offload that are still running belong to the caller; their
// results are then discarded.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	switch s.state.Load() {
	case stateNew:
		s.state.Store(stateStopped)
		return nil
	case stateStopped:
		return nil
	}
	s.state.Store(stateDraining)
	s.wakeAll()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("sched: stop cancelled queued work: %w", ctx.Err())
		s.state.Store(stateCanceling)
		s.wakeAll()
		<-done
	}
	if s.dogStop != nil {
		close(s.dogStop)
		<-s.dogDone
	}
	s.state.Store(stateStopped)
	return err
}

func (s *Scheduler) wakeAll() {
	for _, w := range s.workers {
		w.wake()
	}
}

// Submit queues fn in lane on a worker, preferring a parked one, else the
// next in turn. It is safe from any goroutine.
func (s *Scheduler) Submit(lane lanes.ID, fn func()) error {
	return s.pickWorker().Submit(lane, fn)
}

// Go starts fn as a coroutine in lane on a worker chosen as by Submit; see
// Worker.Go. It is safe from any goroutine.
func (s *Scheduler) Go(ctx context.Context, lane lanes.ID, fn func(ctx context.Context)) error {
	if fn == nil {
		return errors.New("sched: Go of a nil function")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	w := s.pickWorker()
	return w.Submit(lane, func() { w.start(ctx, fn, resumeLane(lane)) })
}

// IdlePeer returns a worker of w's scheduler other than w that is parked
// (out of work, waiting for events) and not yet woken for new work, or nil
// when every other worker is busy. It is safe from any goroutine. The answer
// is a hint: the worker may find work of its own before the caller's
// reaches it. A server uses it to hand a connection whose request waits
// behind w's work to a worker that can start it now.
func (w *Worker) IdlePeer() *Worker {
	s := w.s
	n := uint32(len(s.workers))
	if n < 2 || s.busy.Load() >= int32(n) {
		return nil
	}
	return s.parkedFrom(s.rr.Add(1), w, false)
}

func (s *Scheduler) pickWorker() *Worker {
	start := s.rr.Add(1)
	if w := s.parkedFrom(start, nil, true); w != nil {
		return w
	}
	return s.workers[start%uint32(len(s.workers))]
}

// parkedFrom returns the first parked worker other than skip, looking
// round the workers from index start, or nil; with woken, a parked worker
// already woken for new work counts too.
func (s *Scheduler) parkedFrom(start uint32, skip *Worker, woken bool) *Worker {
	n := uint32(len(s.workers))
	for i := uint32(0); i < n; i++ {
		w := s.workers[(start+i)%n]
		if w == skip {
			continue
		}
		if st := w.parkState.Load(); st == parkParked || woken && st == parkNotified {
			return w
		}
	}
	return nil
}

func (s *Scheduler) checkSubmit(lane lanes.ID) error {
	if !s.set.Valid(lane) {
		return fmt.Errorf("%w: %d", ErrBadLane, lane)
	}
	switch s.state.Load() {
	case stateNew:
		return ErrNotStarted
	case stateRunning:
		return nil
	default:
		return ErrStopped
	}
}

func (s *Scheduler) handlePanic(v any) {
	stack := debug.Stack()
	if s.cfg.OnPanic != nil {
		s.cfg.OnPanic(v, stack)
		return
	}
	s.logger.Error("sched: task panicked", "panic", v, "stack", string(stack))
}
