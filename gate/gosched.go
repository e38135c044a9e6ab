package gate

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/admit"
)

// Defaults for the zero values of GoSchedConfig.
const (
	// DefaultGoSchedFraction is the fraction of GOMAXPROCS that running
	// and runnable goroutines may fill, the reader included, for a new
	// request to be admitted: the same default as the busy-worker gate.
	DefaultGoSchedFraction = DefaultBusyFraction
	// DefaultGoSchedMaxAge is how old a reading of the scheduler may be
	// before the next decision takes a new one.
	DefaultGoSchedMaxAge = 50 * time.Microsecond
)

// The runtime/metrics gauges GoSched reads (new in Go 1.26).
const (
	metricRunning  = "/sched/goroutines/running:goroutines"
	metricRunnable = "/sched/goroutines/runnable:goroutines"
)

// GoSchedConfig configures a GoSched gate.
type GoSchedConfig struct {
	// Fraction is the fraction of GOMAXPROCS that running plus runnable
	// goroutines may reach, the reader included, for a new request to be
	// admitted: the limit is max(1, floor(Fraction × GOMAXPROCS)). Zero
	// means DefaultGoSchedFraction (0.5). Unlike the busy-worker gate,
	// values above 1 are meaningful: they admit while a runnable backlog
	// of up to (Fraction − 1) × GOMAXPROCS goroutines waits for a P.
	// Negative values, infinities and NaN are refused.
	Fraction float64
	// MaxAge is how old a reading may be before a decision takes a new
	// one: zero means DefaultGoSchedMaxAge (50 µs); Manual means never
	// (the reading changes only when Refresh is called, for tests).
	MaxAge time.Duration
	// Procs is the GOMAXPROCS the limit is computed from; zero means the
	// runtime's, read with every reading (it can change while the process
	// runs, by runtime.GOMAXPROCS or the runtime's own container-aware
	// updates).
	Procs int
	// Reader, if set, replaces the runtime/metrics read: it returns the
	// running and runnable goroutine counts. Tests script decisions with
	// it. It must be safe for concurrent use; at most one call runs at a
	// time.
	Reader func() (running, runnable int)
	// Clock returns monotonic nanoseconds for MaxAge; nil means the real
	// clock. It must be safe for concurrent use.
	Clock func() int64
}

// GoSchedStats is a GoSched gate's last reading and the decision it gives.
type GoSchedStats struct {
	// Running and Runnable are the goroutine counts of the last reading,
	// Procs the GOMAXPROCS it was taken under.
	Running, Runnable, Procs int
	// Limit is the largest running + runnable + Started at which a
	// request is admitted.
	Limit int
	// Started counts the waiting requests admitted since the reading
	// (admit.Attempt.Spare): goroutines that were parked when it was taken
	// and have been told to start since.
	Started int
	// Age is how long ago the reading was taken.
	Age time.Duration
	// Readings counts readings since NewGoSched.
	Readings uint64
}

// GoSched is a busy-CPU gate for plain net/http: the nearest thing to the
// executor's busy-worker count (Busy) that a goroutine-per-request server
// has. It reads the Go scheduler's instantaneous gauges
// /sched/goroutines/running (goroutines executing Go code on a P; at most
// GOMAXPROCS) and /sched/goroutines/runnable (goroutines ready to run,
// waiting in a run queue for a P) from runtime/metrics, and admits while
//
//	running + runnable + started <= limit,  limit = max(1, floor(Fraction × GOMAXPROCS))
//
// where started counts the waiting requests admitted since the reading
// (see below). With the default Fraction 0.5 on 8 Ps the limit is
// 4: a request is admitted while at most 4 goroutines, the reader
// included, are running or waiting for a P.
//
// # What counts
//
// The goroutine that takes a reading is running, so it counts itself,
// exactly as the deciding worker does in Busy: on 2 Ps at 0.5 (limit 1) a
// request is admitted only while the reader is the only goroutine running
// or runnable, and on 16 Ps (limit 8) while at most 7 others are. A
// net/http request's own goroutine decides for it (the middleware runs on
// the connection's goroutine), and the reading counts it. A waiting request
// started by a goroutine other than its own (admit.Attempt.Spare: a gate's
// wake-up starting the queue's head) is another, parked goroutine that the
// reading does not count: it is admitted iff one more still fits, and
// counted in started until the next reading.
//
// Goroutines blocked in a system call or cgo call (/sched/goroutines/not-in-go)
// and goroutines waiting on I/O, channels or locks do not count: an
// I/O-bound handler waiting for its downstream does not close the gate,
// which is the point (retrying elsewhere does not help when a shared
// dependency slows down; see docs/background.md). Everything else on the
// Ps counts: the GC's background mark workers (a quarter of the Ps during a
// cycle, so the gate closes earlier while the GC runs), the goroutines of
// other servers and background work in the process, not only requests.
// runnable is the sign of overload: goroutines that want a CPU and do not
// get one.
//
// # A cached reading
//
// A reading takes the runtime's metrics lock and the scheduler's lock, so
// GoSched does not read on every decision: it keeps the last reading with
// its time, and the first decision that finds it older than MaxAge (50 µs
// by default) takes a new one itself (one goroutine at a time; the others
// decide on the previous reading meanwhile). Under load a reading is at
// most MaxAge old; an idle process reads nothing. A decision costs a clock
// read. docs/design.md explains the choice and its costs.
//
// # No wake-ups
//
// Nothing tells GoSched when the scheduler frees up, so it never wakes its
// pipeline: waiting requests are started when a request ends (its
// goroutine's place goes to the queue's head) and after each push, as the
// pipeline always does; waiting requests that no request end reaches time
// out.
//
// Done is a no-op. GoSched starts no goroutine and needs no Close.
type GoSched struct {
	load     atomic.Int64 // running + runnable at the last reading
	limit    atomic.Int64
	started  atomic.Int64 // spare admissions since the reading
	at       atomic.Int64 // Clock at the last reading
	fraction atomic.Uint64
	maxAge   int64
	procs    int
	clock    func() int64
	reader   func() (running, runnable int)

	mu       sync.Mutex // one reader at a time; guards the fields below
	samples  [2]metrics.Sample
	running  int
	runnable int
	nprocs   int
	readings atomic.Uint64
	refusal  *admit.Refusal
}

// NewGoSched returns a GoSched gate, with a first reading taken. It fails,
// naming the field and what to use instead, if cfg.Fraction is negative,
// infinite or NaN, or cfg.Procs negative.
func NewGoSched(cfg GoSchedConfig) (*GoSched, error) {
	err := errors.Join(checkGoSchedFraction("GoSchedConfig.Fraction", cfg.Fraction), checkGoSchedProcs(cfg.Procs))
	if err != nil {
		return nil, fmt.Errorf("gate: NewGoSched: %w", err)
	}
	g := &GoSched{
		refusal: &admit.Refusal{Reason: "gosched"},
		maxAge:  int64(cfg.MaxAge),
		procs:   cfg.Procs,
		clock:   cfg.Clock,
		reader:  cfg.Reader,
	}
	if g.maxAge == 0 {
		g.maxAge = int64(DefaultGoSchedMaxAge)
	}
	if g.clock == nil {
		g.clock = goSchedClock
	}
	g.samples = newGoSchedSamples()
	g.fraction.Store(math.Float64bits(cfg.Fraction))
	g.Refresh()
	return g, nil
}

var goSchedEpoch = time.Now()

func goSchedClock() int64 { return int64(time.Since(goSchedEpoch)) }

func checkGoSchedFraction(what string, f float64) error {
	if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("%s is %v: use a positive fraction of GOMAXPROCS, such as 0.5 or 2, or 0 for %v", what, f, DefaultGoSchedFraction)
	}
	return nil
}

func checkGoSchedProcs(n int) error {
	if n < 0 {
		return fmt.Errorf("GoSchedConfig.Procs is %d: use a count of Ps, or 0 for the runtime's GOMAXPROCS", n)
	}
	return nil
}

func goSchedLimit(procs int, f float64) int64 {
	if f == 0 {
		f = DefaultGoSchedFraction
	}
	// The epsilon keeps 0.29 × 100 at 29, as in busyLimit.
	return max(1, int64(math.Floor(f*float64(procs)+1e-9)))
}

// SetFraction changes the fraction live. On a value NewGoSched refuses it
// returns the same error and changes nothing.
func (g *GoSched) SetFraction(f float64) error {
	if err := checkGoSchedFraction("fraction", f); err != nil {
		return fmt.Errorf("gate: GoSched.SetFraction: %w", err)
	}
	g.fraction.Store(math.Float64bits(f))
	g.mu.Lock()
	g.limit.Store(goSchedLimit(g.nprocs, f))
	g.mu.Unlock()
	return nil
}

// Refresh takes a reading now, whatever its age, and returns the gate's
// state. Decisions refresh by themselves (see MaxAge); tests with Manual
// and a scripted Reader call Refresh to move the gate on.
func (g *GoSched) Refresh() GoSchedStats {
	g.mu.Lock()
	g.read()
	st := g.statsLocked()
	g.mu.Unlock()
	return st
}

// read takes a reading; g.mu is held.
func (g *GoSched) read() {
	before := g.started.Load()
	now := g.clock()
	var running, runnable int
	if g.reader != nil {
		running, runnable = g.reader()
	} else {
		running, runnable = readSched(&g.samples)
	}
	procs := g.procs
	if procs == 0 {
		procs = runtime.GOMAXPROCS(0)
	}
	g.running, g.runnable, g.nprocs = running, runnable, procs
	g.load.Store(int64(running + runnable))
	g.limit.Store(goSchedLimit(procs, math.Float64frombits(g.fraction.Load())))
	// Admissions counted before the reading are in it (or have already
	// blocked); those made while it was taken stay counted.
	g.started.Add(-before)
	g.at.Store(now)
	g.readings.Add(1)
}

func newGoSchedSamples() [2]metrics.Sample {
	return [2]metrics.Sample{{Name: metricRunning}, {Name: metricRunnable}}
}

// readSched reads the running and runnable goroutine counts into s, made
// by newGoSchedSamples. It allocates nothing.
func readSched(s *[2]metrics.Sample) (running, runnable int) {
	metrics.Read(s[:])
	return sampleInt(&s[0]), sampleInt(&s[1])
}

func sampleInt(s *metrics.Sample) int {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int(min(s.Value.Uint64(), math.MaxInt32))
}

// fresh takes a new reading if the last one is older than MaxAge and no
// other goroutine is taking one.
func (g *GoSched) fresh() {
	if g.maxAge < 0 {
		return
	}
	if g.clock()-g.at.Load() <= g.maxAge {
		return
	}
	if !g.mu.TryLock() {
		return // another goroutine is reading; decide on the last reading
	}
	if g.clock()-g.at.Load() > g.maxAge {
		g.read()
	}
	g.mu.Unlock()
}

// Admit admits iff running + runnable + started <= limit for a caller that
// the reading counts as running (a request's own goroutine), and iff
// running + runnable + started + 1 <= limit for a spare one (a.Spare: it
// starts another goroutine, parked when the reading was taken), which then
// counts in started until the next reading.
func (g *GoSched) Admit(a *admit.Attempt) *admit.Refusal {
	g.fresh()
	if !a.Spare {
		if g.load.Load()+g.started.Load() <= g.limit.Load() {
			return nil
		}
		return g.refusal
	}
	for {
		s := g.started.Load()
		if g.load.Load()+s+1 > g.limit.Load() {
			return g.refusal
		}
		if g.started.CompareAndSwap(s, s+1) {
			return nil
		}
	}
}

// Done does nothing: GoSched keeps no state per request.
func (g *GoSched) Done(*admit.Attempt, admit.Outcome) {}

// Name returns "gosched", the reason of its refusals.
func (g *GoSched) Name() string { return g.refusal.Reason }

// Limit returns the largest running + runnable + started at which a request
// is admitted.
func (g *GoSched) Limit() int { return int(g.limit.Load()) }

// Stats returns the last reading and the decision it gives, without taking
// a new one.
func (g *GoSched) Stats() GoSchedStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.statsLocked()
}

func (g *GoSched) statsLocked() GoSchedStats {
	return GoSchedStats{
		Running:  g.running,
		Runnable: g.runnable,
		Procs:    g.nprocs,
		Limit:    int(g.limit.Load()),
		Started:  int(g.started.Load()),
		Age:      time.Duration(max(0, g.clock()-g.at.Load())),
		Readings: g.readings.Load(),
	}
}
