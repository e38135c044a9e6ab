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
// itself. Config.Pinning PinOn and Config.CPUs pin whatever the cpuset
// says; PinOff never pins. Runtime.Pinned and Runtime.CPUs report
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

// Config configures a Runtime. Its zero value is the default runtime: a
// worker per CPU the process may use (CPUInfo.Usable), pinned only where
// the CPUs are the process's own (see the package documentation),
// GOMAXPROCS raised so that Go's own goroutines always find a P, the Strict
// lane policy with its starvation guard, and the blocked-worker rescue on.
type Config struct {
	// Workers is the number of workers; zero means one per CPU the
	// process may use (CPUInfo.Usable), or len(CPUs) when CPUs is set.
	Workers int
	// CPUs pins the workers to these CPUs, worker i to CPUs[i], whether
	// or not the process's cpuset is exclusive; each must be in the
	// process's affinity mask. It implies Pinning PinOn.
	CPUs []int
	// Pinning says whether each worker's thread is pinned to a CPU:
	// PinAuto (the zero value) pins only where the process's cpuset is
	// exclusive (CPUInfo.Exclusive) and there are no more workers than
	// CPUs; PinOn pins on the first CPUs of the affinity mask, and New
	// fails with ErrAffinity if there are more workers than CPUs; PinOff
	// never pins (the workers float, still each on an OS thread of its
	// own).
	Pinning Pinning
	// GOMAXPROCS is what Start sets: n > 0 sets exactly n (which must
	// exceed the worker count, or Go's own goroutines could find no P
	// while every worker is busy); n < 0 leaves GOMAXPROCS alone; 0 is
	// the default policy, workers + max(1, workers/2), applied only when
	// it raises GOMAXPROCS. Stop restores the previous value.
	GOMAXPROCS int
	// Lanes are registered when the runtime is built, after the built-in
	// ones and in order, as RegisterLane would: for a runtime that the
	// sluice package starts at once, whose lanes a server names in
	// server.Config.Lanes.
	Lanes []lanes.Spec
	// Policy is the lane policy; the zero value is lanes.Strict.
	Policy lanes.Policy
	// Guard is the starvation guard of the Strict policy: zero means
	// lanes.DefaultGuard, less than zero turns it off.
	Guard time.Duration
	// Spin is how long an idle worker keeps polling for work before it
	// sleeps (sched.Config.Spin); zero means no spinning.
	Spin time.Duration
	// BlockedAfter is how long a handler may hold its worker's thread
	// off the CPU (blocked without Await) before the worker goes on
	// without it on a spare thread (sched.Config.BlockedAfter): zero means
	// sched.DefaultBlockedAfter, less than zero turns the rescue off.
	BlockedAfter time.Duration
	// MaxSpares bounds the spare threads that run workers whose threads
	// are blocked (sched.Config.MaxSpares); zero means
	// sched.DefaultMaxSpares.
	MaxSpares int
	// BlockedStacks logs the stack of a handler found blocking its
	// worker, once per call site: where an Await is missing (for
	// debugging).
	BlockedStacks bool
	// PollEvery is how many tasks a busy worker runs between two polls of
	// its descriptors; zero means sched's default (61).
	PollEvery int
	// Clock replaces the monotonic nanosecond clock, for tests.
	Clock func() int64
	// OnPanic is called with a panicking task's value and stack; nil
	// logs them.
	OnPanic func(v any, stack []byte)
	// Logger is the logger for panics and internal errors; nil means
	// slog.Default().
	Logger *slog.Logger

	// detect replaces CPU detection, for tests; nil means DetectCPUs.
	detect func() (CPUInfo, error)
}

// Pinning says whether the workers' threads are pinned to CPUs
// (Config.Pinning).
type Pinning uint8

// The pinning choices.
const (
	// PinAuto pins only where the process's CPUs are its own: the
	// default.
	PinAuto Pinning = iota
	// PinOn pins each worker to a CPU whatever the cpuset.
	PinOn
	// PinOff never pins.
	PinOff
)

// String names the choice.
func (p Pinning) String() string {
	switch p {
	case PinAuto:
		return "auto"
	case PinOn:
		return "on"
	case PinOff:
		return "off"
	}
	return fmt.Sprintf("Pinning(%d)", uint8(p))
}

// Option changes a Config: the With functions below, from before Config
// existed, kept for one release.
//
// Deprecated: set Config's fields, and give the Config to New (or, through
// the front door, as sluice.Config's Runtime).
type Option func(*Config)

// WithSpin sets Config.Spin.
//
// Deprecated: set Config.Spin.
func WithSpin(d time.Duration) Option { return func(c *Config) { c.Spin = d } }

// WithBlockedAfter sets Config.BlockedAfter.
//
// Deprecated: set Config.BlockedAfter.
func WithBlockedAfter(d time.Duration) Option {
	return func(c *Config) { c.BlockedAfter = d }
}

// WithMaxSpares sets Config.MaxSpares.
//
// Deprecated: set Config.MaxSpares.
func WithMaxSpares(n int) Option { return func(c *Config) { c.MaxSpares = n } }

// WithBlockedStacks sets Config.BlockedStacks.
//
// Deprecated: set Config.BlockedStacks.
func WithBlockedStacks(on bool) Option {
	return func(c *Config) { c.BlockedStacks = on }
}

// WithWorkers sets Config.Workers.
//
// Deprecated: set Config.Workers.
func WithWorkers(n int) Option { return func(c *Config) { c.Workers = n } }

// WithCPUs sets Config.CPUs.
//
// Deprecated: set Config.CPUs.
func WithCPUs(cpus ...int) Option {
	return func(c *Config) { c.CPUs = slices.Clone(cpus) }
}

// WithPinning sets Config.Pinning to PinOn or PinOff.
//
// Deprecated: set Config.Pinning.
func WithPinning(on bool) Option {
	return func(c *Config) {
		c.Pinning = PinOff
		if on {
			c.Pinning = PinOn
		}
	}
}

// WithGOMAXPROCS sets Config.GOMAXPROCS.
//
// Deprecated: set Config.GOMAXPROCS.
func WithGOMAXPROCS(n int) Option { return func(c *Config) { c.GOMAXPROCS = n } }

// WithLane adds a lane to Config.Lanes.
//
// Deprecated: set Config.Lanes.
func WithLane(spec lanes.Spec) Option {
	return func(c *Config) { c.Lanes = append(c.Lanes, spec) }
}

// WithPolicy sets Config.Policy.
//
// Deprecated: set Config.Policy.
func WithPolicy(p lanes.Policy) Option { return func(c *Config) { c.Policy = p } }

// WithGuard sets Config.Guard; zero or less turns the guard off.
//
// Deprecated: set Config.Guard (where zero means the default guard and less
// than zero turns it off).
func WithGuard(d time.Duration) Option {
	return func(c *Config) {
		c.Guard = d
		if d <= 0 {
			c.Guard = -1
		}
	}
}

// WithClock sets Config.Clock.
//
// Deprecated: set Config.Clock.
func WithClock(now func() int64) Option { return func(c *Config) { c.Clock = now } }

// WithPanicHandler sets Config.OnPanic.
//
// Deprecated: set Config.OnPanic.
func WithPanicHandler(f func(v any, stack []byte)) Option {
	return func(c *Config) { c.OnPanic = f }
}

// WithLogger sets Config.Logger.
//
// Deprecated: set Config.Logger.
func WithLogger(l *slog.Logger) Option { return func(c *Config) { c.Logger = l } }

// WithPollEvery sets Config.PollEvery.
//
// Deprecated: set Config.PollEvery.
func WithPollEvery(n int) Option { return func(c *Config) { c.PollEvery = n } }

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

// New checks cfg, detects the CPUs and builds the runtime; Start runs it.
func New(cfg Config) (*Runtime, error) {
	detect := cfg.detect
	if detect == nil {
		detect = DetectCPUs
	}
	info, err := detect()
	if err != nil {
		return nil, err
	}
	workers := cfg.Workers
	switch {
	case workers < 0:
		return nil, fmt.Errorf("runtime: Config.Workers %d is negative", workers)
	case cfg.Pinning > PinOff:
		return nil, fmt.Errorf("runtime: Config.Pinning %v is not PinAuto, PinOn or PinOff", cfg.Pinning)
	case cfg.Pinning == PinOff && len(cfg.CPUs) > 0:
		return nil, errors.New("runtime: Config.CPUs pins the workers: it cannot go with Pinning PinOff")
	case workers == 0 && len(cfg.CPUs) > 0:
		workers = len(cfg.CPUs)
	case workers == 0:
		workers = info.Usable()
	}
	pin := cfg.Pinning == PinOn || len(cfg.CPUs) > 0
	if cfg.Pinning == PinAuto && len(cfg.CPUs) == 0 {
		// Pin by default only on CPUs that are the process's own, and
		// only where each worker can have one.
		pin = info.Exclusive && workers <= len(info.Allowed)
	}
	var cpus []int
	if pin {
		if cpus, err = pinPlan(workers, cfg.CPUs, info.Allowed); err != nil {
			return nil, err
		}
	}
	if cfg.GOMAXPROCS > 0 && cfg.GOMAXPROCS <= workers {
		return nil, fmt.Errorf("runtime: Config.GOMAXPROCS %d must exceed the %d workers", cfg.GOMAXPROCS, workers)
	}
	set := lanes.NewSet()
	if err := set.SetPolicy(cfg.Policy); err != nil {
		return nil, err
	}
	if cfg.Guard != 0 {
		set.SetGuard(max(cfg.Guard, 0))
	}
	for _, sp := range cfg.Lanes {
		if _, err := set.Register(sp); err != nil {
			return nil, fmt.Errorf("runtime: Config.Lanes: %w", err)
		}
	}
	s, err := sched.New(sched.Config{
		Workers:   workers,
		CPUs:      cpus,
		Lanes:     set,
		Clock:     cfg.Clock,
		PollEvery: cfg.PollEvery,
		Spin:      cfg.Spin,

		BlockedAfter:  cfg.BlockedAfter,
		MaxSpares:     cfg.MaxSpares,
		BlockedStacks: cfg.BlockedStacks,
		OnPanic:       cfg.OnPanic,
		Logger:        cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	return &Runtime{Scheduler: s, cpus: cpus, info: info, goProcs: cfg.GOMAXPROCS}, nil
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
		return nil, fmt.Errorf("%w: %d pinned workers need %d CPUs, the mask has %d (%v); use fewer workers or Config.Pinning PinOff",
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
