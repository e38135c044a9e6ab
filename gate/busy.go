package gate

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// DefaultBusyFraction is the fraction of workers that may be busy when
// BusyOptions.Fraction is zero: the seeds' default for I/O-bound
// (io_isolated) work.
const DefaultBusyFraction = 0.5

// BusySource is an executor's instantaneous busy-worker count.
// *sched.Scheduler and *runtime.Runtime satisfy it: Busy is one atomic load
// there, and NumWorkers does not change after New.
type BusySource interface {
	// Busy returns the number of workers not parked now.
	Busy() int
	// NumWorkers returns the number of workers.
	NumWorkers() int
}

// IdleNotifier is an optional interface of a BusySource that can call back
// each time one of its workers goes idle. *sched.Scheduler does not need it:
// Busy recognises its OnIdle(func(*sched.Worker)) directly (on Linux, where
// the executor exists).
type IdleNotifier interface {
	// NotifyIdle registers fn to be called each time a worker goes idle,
	// after the busy count has dropped.
	NotifyIdle(fn func())
}

// BusyOptions configures a Busy gate.
type BusyOptions struct {
	// Fraction is the fraction of the workers that may be busy, the
	// deciding one included, for a new request to be admitted: the limit is
	// max(1, floor(Fraction × workers)). Zero means DefaultBusyFraction;
	// values above 1 mean 1. Negative values and NaN panic.
	Fraction float64
	// Isolated replaces Fraction by the isolated rule, for CPU-bound
	// handlers: admit while fewer requests run than there are workers
	// (the seeds' "fewer requests than CPUs"). The limit is the number of
	// workers, the deciding one not counted as running a request (see
	// Busy).
	Isolated bool
}

// Busy is the busy-worker gate: it admits a request while few enough of the
// executor's workers are busy. It reads the executor's instantaneous
// busy-worker count with one atomic load, holds no state per request, and
// needs no Release (Release is a no-op).
//
// The rule, with busy = src.Busy() at the moment of the decision and
// limit = max(1, floor(Fraction × workers)):
//
//   - Acquire admits iff busy <= limit. It is meant for a caller that runs
//     on a worker (the server decides while parsing, on the connection's
//     worker): that worker is busy, so busy counts it. With 2 workers and
//     the default 0.5, limit is 1: a request is admitted while the deciding
//     worker is the only busy one, that is while the other worker is idle.
//     With 16 workers, limit is 8: the deciding worker and at most 7
//     others.
//   - AcquireIdle admits iff busy + 1 <= limit. It is meant for a caller
//     the count does not include: an OnIdle hook (its worker has already
//     stopped counting as busy) or a goroutine that is not a worker. Starting
//     the request will make one more worker busy, and the rule is that at
//     most limit are busy once it has started, as with Acquire.
//
// In the isolated mode the limit is the number of workers. A CPU-bound
// handler runs to completion on its worker, so a worker that is parsing a
// request runs no other: fewer requests than workers are running, and
// Acquire on a worker admits always. AcquireIdle (an idle hook, a goroutine
// off the workers) admits while some worker is idle. Under CPU-bound
// overload the requests then wait in the sockets' receive buffers, where no
// busy count sees them; what protects the isolated model is the request's
// age when it is parsed (server.Config.MaxAge, the queue timeout by
// default), not this gate. Fraction 1 is the same limit.
//
// Counting the deciding worker in the isolated mode (limit workers − 1)
// was measured first: on 2 workers it let one CPU-bound handler run at a
// time, half the capacity, and sent every admission to the connections of
// the worker that had just finished.
//
// The count is exact whenever no worker is between parking and unparking;
// a decision racing a worker that parks or wakes sees either side.
type Busy struct {
	src     BusySource
	workers int
	limit   atomic.Int64
	onIdle  func(fn func())
}

// NewBusy returns a busy-worker gate over src. It panics if opts.Fraction is
// negative or NaN.
func NewBusy(src BusySource, opts BusyOptions) *Busy {
	g := &Busy{src: src, workers: src.NumWorkers()}
	g.SetOptions(opts)
	if n, ok := src.(IdleNotifier); ok {
		g.onIdle = n.NotifyIdle
	} else {
		g.onIdle = schedIdleHook(src)
	}
	return g
}

// NewBusyIsolated returns a busy-worker gate in the isolated mode:
// NewBusy(src, BusyOptions{Isolated: true}).
func NewBusyIsolated(src BusySource) *Busy {
	return NewBusy(src, BusyOptions{Isolated: true})
}

// SetOptions changes the fraction or the mode live.
func (g *Busy) SetOptions(opts BusyOptions) {
	g.limit.Store(int64(busyLimit(g.workers, opts)))
}

func busyLimit(workers int, opts BusyOptions) int {
	if opts.Isolated {
		return max(1, workers)
	}
	f := opts.Fraction
	if f < 0 || math.IsNaN(f) {
		panic(fmt.Sprintf("gate: busy fraction %v out of range", f))
	}
	if f == 0 {
		f = DefaultBusyFraction
	}
	f = min(f, 1)
	// The small epsilon keeps 0.29 × 100 (28.999999999999996 in floating
	// point) at 29.
	return max(1, min(workers, int(math.Floor(f*float64(workers)+1e-9))))
}

// Limit returns the largest busy count, the deciding worker included, at
// which Acquire admits.
func (g *Busy) Limit() int { return int(g.limit.Load()) }

// NumWorkers returns the worker count the limit was computed for.
func (g *Busy) NumWorkers() int { return g.workers }

// Acquire reports whether busy <= limit, for a caller that runs on a worker
// and is therefore counted in busy.
func (g *Busy) Acquire() bool {
	return int64(g.src.Busy()) <= g.limit.Load()
}

// AcquireIdle reports whether busy + 1 <= limit, for a caller that is not
// counted in busy: an idle hook or a goroutine that is not a worker.
func (g *Busy) AcquireIdle() bool {
	return int64(g.src.Busy()) < g.limit.Load()
}

// Release does nothing: the busy count needs no bookkeeping per request.
func (g *Busy) Release(time.Duration) {}

// Name returns "busy".
func (g *Busy) Name() string { return "busy" }

// OnOpen registers fn to be called each time a worker goes idle, through the
// source's idle hook (sched.Scheduler.OnIdle, or IdleNotifier). fn then runs
// on the worker that went idle, after the busy count has dropped. If the
// source has no idle hook, OnOpen does nothing and CanWake reports false.
func (g *Busy) OnOpen(fn func()) {
	if g.onIdle != nil && fn != nil {
		g.onIdle(fn)
	}
}

// CanWake reports whether OnOpen registers anything: whether the source
// tells when a worker goes idle.
func (g *Busy) CanWake() bool { return g.onIdle != nil }
