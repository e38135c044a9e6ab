// Package runtime assembles the sluice executor: it detects the CPUs the
// process may use, decides the worker count and pinning, sets GOMAXPROCS so
// that Go's own goroutines are not starved by the workers, and runs a
// sched.Scheduler.
//
// # Pinning
//
// Every worker is a goroutine locked to an OS thread of its own. Whether
// that thread is also pinned to one CPU (sched_setaffinity) depends on
// whose CPUs they are. By default New pins only when the process's CPUs
// are its own: a valid cgroup v2 cpuset partition ("root" or "isolated"
// in cpuset.cpus.partition), or a cgroup v1 cpuset other than the root one
// with cpuset.cpu_exclusive set (CPUInfo.Exclusive says which applied, and
// ExclusiveReason why). Everywhere else (a laptop, a shared VM, a
// container limited by a quota or an ordinary cpuset) the workers float:
// the kernel places their threads and moves them. The reason is a
// neighbour: a pinned worker cannot leave a CPU that another process keeps
// busy, while the kernel goes on spreading new connections to it, so the
// requests behind it wait for the share of the CPU it gets, and an
// admission rule reading busy workers or request ages refuses work the
// other CPUs had room for. On CPUs that are the process's own there is no
// such neighbour, and pinning keeps each worker's caches and run queue to
// itself. WithPinning(true) and WithCPUs pin whatever the cpuset says;
// WithPinning(false) never pins. Runtime.Pinned and Runtime.CPUs report
// the decision.
//
// The package shares its name with the standard library's runtime; import it
// under another name where both are needed, for example
//
//	import srt "github.com/sluice-go/sluice/runtime"
//
// # Off Linux
//
// The package builds everywhere, but the executor needs Linux: elsewhere
// New fails with the error of sched.New, which wraps errors.ErrUnsupported,
// and AffinityCPUs, with no affinity mask to read, returns every CPU.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	goruntime "runtime"
	"slices"
	"sync"
	"time"

	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/sched"
)

// Option configures a Runtime.
type Option func(*config)

type config struct {
	workers       int
	cpus          []int
	pin           bool
	pinSet        bool // pin was chosen by an option, not by detection
	goProcs       int
	policy        lanes.Policy
	guard         time.Duration
	guardSet      bool
	clock         func() int64
	onPanic       func(any, []byte)
	logger        *slog.Logger
	pollEvery     int
	spin          time.Duration
	blockedAfter  time.Duration
	maxSpares     int
	blockedStacks bool
	detect        func() (CPUInfo, error)
	lanes         []lanes.Spec
}

// WithSpin sets how long an idle worker keeps polling for work before it
// sleeps (sched.Config.Spin); the default is no spinning.
func WithSpin(d time.Duration) Option { return func(c *config) { c.spin = d } }

// WithBlockedAfter sets how long a handler may hold its worker's thread
// off the CPU (blocked without Await) before the worker goes on without it
// on a spare thread (sched.Config.BlockedAfter; default
// sched.DefaultBlockedAfter, less than zero turns the rescue off).
func WithBlockedAfter(d time.Duration) Option {
	return func(c *config) { c.blockedAfter = d }
}

// WithMaxSpares bounds the spare threads that run workers whose threads
// are blocked (sched.Config.MaxSpares; default sched.DefaultMaxSpares).
func WithMaxSpares(n int) Option { return func(c *config) { c.maxSpares = n } }

// WithBlockedStacks logs the stack of a handler found blocking its worker,
// once per call site: where an Await is missing (sched.Config.BlockedStacks;
// for debugging).
func WithBlockedStacks(on bool) Option {
	return func(c *config) { c.blockedStacks = on }
}

// WithWorkers sets the number of workers. The default is the number of CPUs
// the process may use (CPUInfo.Usable).
func WithWorkers(n int) Option { return func(c *config) { c.workers = n } }

// WithCPUs pins the workers to these CPUs, worker i to cpus[i], whether or
// not the process's cpuset is exclusive; each must be in the process's
// affinity mask. Without WithWorkers the worker count is len(cpus).
func WithCPUs(cpus ...int) Option {
	return func(c *config) { c.cpus = slices.Clone(cpus); c.pin, c.pinSet = true, true }
}

// WithPinning forces pinning on or off. On, each worker is pinned to a CPU
// of the affinity mask (the first ones), and New fails with ErrAffinity if
// there are more workers than CPUs; off, the workers float: still locked to
// their own OS threads, placed by the kernel. Without this option the
// workers are pinned only when the process's cpuset is exclusive
// (CPUInfo.Exclusive) and there are no more of them than CPUs; see the
// package documentation.
func WithPinning(on bool) Option { return func(c *config) { c.pin, c.pinSet = on, true } }

// WithGOMAXPROCS sets the GOMAXPROCS the runtime applies at Start: n > 0
// sets exactly n (which must exceed the worker count, or Go's own goroutines
// could find no P while every worker is busy); n < 0 leaves GOMAXPROCS alone;
// 0 is the default policy, workers + max(1, workers/2), applied only when it
// raises GOMAXPROCS. Stop restores the previous value.
func WithGOMAXPROCS(n int) Option { return func(c *config) { c.goProcs = n } }

// WithLane registers a lane when the runtime is built, after the built-in
// ones and the lanes of earlier WithLane options, as RegisterLane would: for
// a runtime that the sluice package starts at once, whose lanes a server
// names in server.Config.Lanes.
func WithLane(spec lanes.Spec) Option {
	return func(c *config) { c.lanes = append(c.lanes, spec) }
}

// WithPolicy sets the lane policy (default lanes.Strict).
func WithPolicy(p lanes.Policy) Option { return func(c *config) { c.policy = p } }

// WithGuard sets the starvation guard of the Strict policy (default
// lanes.DefaultGuard); zero or less turns it off.
func WithGuard(d time.Duration) Option {
	return func(c *config) { c.guard, c.guardSet = d, true }
}

// WithClock replaces the monotonic nanosecond clock, for tests.
func WithClock(now func() int64) Option { return func(c *config) { c.clock = now } }

// WithPanicHandler is called with a panicking task's value and stack; the
// default logs them.
func WithPanicHandler(f func(v any, stack []byte)) Option {
	return func(c *config) { c.onPanic = f }
}

// WithLogger sets the logger for panics and internal errors.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithPollEvery sets how many tasks a busy worker runs between two polls of
// its descriptors (default 61).
func WithPollEvery(n int) Option { return func(c *config) { c.pollEvery = n } }

// withDetector replaces CPU detection, for tests.
func withDetector(f func() (CPUInfo, error)) Option { return func(c *config) { c.detect = f } }

// ErrAffinity is returned when pinning asks for CPUs the process may not use.
var ErrAffinity = errors.New("runtime: CPU affinity mask too small")

// Runtime is a started or startable executor. The embedded Scheduler gives
// Submit, Go, Busy, OnIdle, Snapshot, Worker and Lanes.
type Runtime struct {
	*sched.Scheduler
	cpus []int
	info CPUInfo

	mu        sync.Mutex
	goProcs   int
	prevProcs int
	setProcs  int
}

// New validates the options, detects the CPUs and builds the runtime; Start
// runs it.
func New(opts ...Option) (*Runtime, error) {
	cfg := config{detect: DetectCPUs}
	for _, o := range opts {
		o(&cfg)
	}
	info, err := cfg.detect()
	if err != nil {
		return nil, err
	}
	if cfg.workers < 0 {
		return nil, fmt.Errorf("runtime: negative worker count %d", cfg.workers)
	}
	if cfg.workers == 0 {
		if len(cfg.cpus) > 0 {
			cfg.workers = len(cfg.cpus)
		} else {
			cfg.workers = info.Usable()
		}
	}
	if !cfg.pinSet {
		// Pin by default only on CPUs that are the process's own, and
		// only where each worker can have one.
		cfg.pin = info.Exclusive && cfg.workers <= len(info.Allowed)
	}
	var cpus []int
	if cfg.pin {
		if cpus, err = pinPlan(cfg.workers, cfg.cpus, info.Allowed); err != nil {
			return nil, err
		}
	}
	if cfg.goProcs > 0 && cfg.goProcs <= cfg.workers {
		return nil, fmt.Errorf("runtime: GOMAXPROCS %d must exceed the %d workers", cfg.goProcs, cfg.workers)
	}
	set := lanes.NewSet()
	if err := set.SetPolicy(cfg.policy); err != nil {
		return nil, err
	}
	if cfg.guardSet {
		set.SetGuard(cfg.guard)
	}
	for _, sp := range cfg.lanes {
		if _, err := set.Register(sp); err != nil {
			return nil, fmt.Errorf("runtime: WithLane: %w", err)
		}
	}
	s, err := sched.New(sched.Config{
		Workers:   cfg.workers,
		CPUs:      cpus,
		Lanes:     set,
		Clock:     cfg.clock,
		PollEvery: cfg.pollEvery,
		Spin:      cfg.spin,

		BlockedAfter:  cfg.blockedAfter,
		MaxSpares:     cfg.maxSpares,
		BlockedStacks: cfg.blockedStacks,
		OnPanic:       cfg.onPanic,
		Logger:        cfg.logger,
	})
	if err != nil {
		return nil, err
	}
	return &Runtime{Scheduler: s, cpus: cpus, info: info, goProcs: cfg.goProcs}, nil
}

// pinPlan returns the CPU of each worker.
func pinPlan(workers int, asked, allowed []int) ([]int, error) {
	if len(asked) > 0 {
		if len(asked) != workers {
			return nil, fmt.Errorf("runtime: %d CPUs given for %d workers", len(asked), workers)
		}
		seen := map[int]bool{}
		for _, c := range asked {
			if !slices.Contains(allowed, c) {
				return nil, fmt.Errorf("%w: CPU %d is not in the affinity mask %v", ErrAffinity, c, allowed)
			}
			if seen[c] {
				return nil, fmt.Errorf("runtime: CPU %d given twice", c)
			}
			seen[c] = true
		}
		return slices.Clone(asked), nil
	}
	if workers > len(allowed) {
		return nil, fmt.Errorf("%w: %d pinned workers need %d CPUs, the mask has %d (%v); use fewer workers or WithPinning(false)",
			ErrAffinity, workers, workers, len(allowed), allowed)
	}
	return slices.Clone(allowed[:workers]), nil
}

// CPUs returns the CPU each worker is pinned to, or nil when the workers
// float.
func (rt *Runtime) CPUs() []int { return slices.Clone(rt.cpus) }

// Pinned reports whether each worker is pinned to a CPU of its own (see
// the package documentation for when it is by default).
func (rt *Runtime) Pinned() bool { return len(rt.cpus) > 0 }

// CPUInfo returns what New detected.
func (rt *Runtime) CPUInfo() CPUInfo { return rt.info }

// RegisterLane adds a lane, for example a Background lane with few shares.
// Lanes are registered before Start; their shares and priorities can be
// tuned afterwards through Lanes().
func (rt *Runtime) RegisterLane(spec lanes.Spec) (lanes.ID, error) {
	return rt.Lanes().Register(spec)
}

// Start applies the GOMAXPROCS policy and starts the workers.
func (rt *Runtime) Start() error {
	rt.mu.Lock()
	prev := currentProcs()
	want := rt.goProcs
	if want == 0 {
		want = goProcsFor(rt.NumWorkers())
		if want <= prev {
			want = -1 // already enough
		}
	}
	if want > 0 && want != prev {
		goruntime.GOMAXPROCS(want)
		rt.prevProcs, rt.setProcs = prev, want
	}
	rt.mu.Unlock()
	if err := rt.Scheduler.Start(); err != nil {
		rt.restoreProcs()
		return err
	}
	return nil
}

// Stop stops the scheduler (see sched.Scheduler.Stop) and restores
// GOMAXPROCS if Start changed it and nothing else has changed it since.
func (rt *Runtime) Stop(ctx context.Context) error {
	err := rt.Scheduler.Stop(ctx)
	rt.restoreProcs()
	return err
}

func (rt *Runtime) restoreProcs() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.setProcs > 0 && currentProcs() == rt.setProcs {
		goruntime.GOMAXPROCS(rt.prevProcs)
	}
	rt.setProcs = 0
}
