package gate

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/sluice-go/sluice/admit"
)

// DefaultBusyFraction is the fraction of workers that may be busy when
// BusyConfig.Fraction is zero: the default for I/O-bound handlers, whose
// started requests need free workers for their continuations (see
// docs/background.md, "io_isolated").
const DefaultBusyFraction = 0.5

// BusyConfig configures a Busy gate.
type BusyConfig struct {
	// Fraction is the fraction of the workers that may be busy, the
	// deciding one included, for a new request to be admitted: the limit
	// is max(1, floor(Fraction × workers)). Zero means
	// DefaultBusyFraction; values above 1 mean 1. Negative values and NaN
	// are refused.
	Fraction float64
}

// Busy is the busy-worker gate: it admits a request while few enough of the
// sluice executor's workers are busy. It reads the executor's instantaneous
// busy-worker count with one atomic load and holds no state per request.
// It gets its executor when the server's admission pipeline attaches it, so
// it can be built before the runtime; it serves one executor (several
// servers on one runtime may share it), and attaching it to a pipeline
// outside the executor (net/http middleware) or on another executor fails.
//
// The rule, with busy = the executor's busy count at the moment of the
// decision and limit = max(1, floor(Fraction × workers)):
//
//   - a request is admitted iff busy <= limit, when the caller counts
//     itself: the server decides while parsing, on the connection's worker,
//     and that worker is busy, so busy includes it. With 2 workers and the
//     default 0.5, limit is 1: a request is admitted while the deciding
//     worker is the only busy one, that is while the other worker is idle.
//     With 16 workers, limit is 8: the deciding worker and at most 7
//     others;
//   - it is admitted iff busy + 1 <= limit when the caller is a worker that
//     went idle and starts a waiting request (admit.Attempt.Spare): the
//     count no longer includes that worker, and the started request will
//     make one more busy.
//
// With one worker, or Fraction 1, the limit is the number of workers and a
// decision on a worker always admits: the gate then only matters for
// starting waiting requests. What protects CPU-bound handlers is the age
// limit of the pipeline (admit.Config.MaxAge), which sees the requests
// waiting in the kernel's socket buffers, where no busy count does.
//
// When a worker goes idle, the gate tells the pipeline (admit.Env.Wake), so
// that a waiting request starts at once, on that worker's time, without
// polling. The count is exact whenever no worker is between parking and
// unparking; a decision racing a worker that parks or wakes sees either
// side.
type Busy struct {
	fraction atomic.Uint64 // math.Float64bits of the resolved fraction
	limit    atomic.Int64
	ex       atomic.Pointer[busyExecutor]
	mu       sync.Mutex // attach and detach
	refusal  *admit.Refusal
}

// busyExecutor is the executor a Busy gate reads, and how many pipelines
// attached it there.
type busyExecutor struct {
	admit.Executor
	workers  int
	attached int
}

// NewBusy returns a busy-worker gate. It fails, naming the field and what
// to use instead, if cfg.Fraction is negative or NaN.
func NewBusy(cfg BusyConfig) (*Busy, error) {
	g := &Busy{refusal: &admit.Refusal{Reason: "busy"}}
	if err := g.set(cfg); err != nil {
		return nil, fmt.Errorf("gate: NewBusy: %w", err)
	}
	return g, nil
}

// SetConfig changes the fraction live. On a value NewBusy refuses it
// returns the same error and changes nothing.
func (g *Busy) SetConfig(cfg BusyConfig) error {
	if err := g.set(cfg); err != nil {
		return fmt.Errorf("gate: Busy.SetConfig: %w", err)
	}
	return nil
}

func (g *Busy) set(cfg BusyConfig) error {
	f := cfg.Fraction
	if f < 0 || math.IsNaN(f) {
		return fmt.Errorf("BusyConfig.Fraction is %v: use a fraction in (0, 1], or 0 for %v", f, DefaultBusyFraction)
	}
	if f == 0 {
		f = DefaultBusyFraction
	}
	g.fraction.Store(math.Float64bits(min(f, 1)))
	if ex := g.ex.Load(); ex != nil {
		g.limit.Store(int64(busyLimit(ex.workers, f)))
	}
	return nil
}

// busyLimit returns max(1, floor(f × workers)), at most workers.
func busyLimit(workers int, f float64) int {
	// The small epsilon keeps 0.29 × 100 (28.999999999999996 in floating
	// point) at 29.
	return max(1, min(workers, int(math.Floor(min(f, 1)*float64(workers)+1e-9))))
}

// Attach binds the gate to the pipeline's executor and registers for its
// idle notifications; the returned function removes them.
func (g *Busy) Attach(env admit.Env) (detach func(), err error) {
	if env.Executor == nil {
		return nil, errors.New("gate: the busy-worker gate reads the sluice executor's busy count, and this pipeline runs outside it (net/http middleware): use gate.NewGoSched or a concurrency limit there")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	ex := g.ex.Load()
	switch {
	case ex == nil:
		ex = &busyExecutor{Executor: env.Executor, workers: env.Executor.NumWorkers()}
		g.limit.Store(int64(busyLimit(ex.workers, math.Float64frombits(g.fraction.Load()))))
		g.ex.Store(ex)
	case ex.Executor != env.Executor:
		return nil, errors.New("gate: this busy-worker gate already serves another executor (another runtime): make one gate per runtime")
	}
	ex.attached++
	remove := env.Executor.NotifyIdle(func() { env.Wake(1) })
	var once sync.Once
	return func() {
		once.Do(func() {
			remove()
			g.mu.Lock()
			defer g.mu.Unlock()
			if ex.attached--; ex.attached == 0 {
				g.ex.Store(nil)
			}
		})
	}, nil
}

// Limit returns the largest busy count, the deciding worker included, at
// which a request is admitted; 0 until the gate is attached.
func (g *Busy) Limit() int { return int(g.limit.Load()) }

// Admit admits a while few enough workers are busy (see Busy). An unattached
// gate admits everything.
func (g *Busy) Admit(a *admit.Attempt) *admit.Refusal {
	ex := g.ex.Load()
	if ex == nil {
		return nil
	}
	busy := int64(ex.Busy())
	if a.Spare {
		busy++
	}
	if busy <= g.limit.Load() {
		return nil
	}
	return g.refusal
}

// Done does nothing: the busy count needs no bookkeeping per request.
func (g *Busy) Done(*admit.Attempt, admit.Outcome) {}

// Name returns "busy", the reason of its refusals.
func (g *Busy) Name() string { return g.refusal.Reason }
