package gate

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/admit"
)

// Defaults for the zero values of AdaptiveConfig.
const (
	DefaultAdaptiveInitialLimit = 20
	DefaultAdaptiveMinLimit     = 4
	DefaultAdaptiveMaxLimit     = 1000
	DefaultAdaptiveWindow       = 100
	DefaultAdaptiveLongWindow   = 600
	DefaultAdaptiveSmoothing    = 0.2
)

// MaxAdaptiveWindow is the largest AdaptiveConfig.Window.
const MaxAdaptiveWindow = 4096

// MaxAdaptiveSample is the longest latency an Adaptive gate learns as it is;
// longer ones count as this long.
const MaxAdaptiveSample = time.Duration(1 << 35) // about 34 s

// AdaptiveConfig configures an Adaptive gate. Zero fields take the
// defaults above.
type AdaptiveConfig struct {
	// InitialLimit is the limit before the first update (default 20),
	// clamped to [MinLimit, MaxLimit].
	InitialLimit int
	// MinLimit and MaxLimit bound the limit (defaults 4 and 1000).
	MinLimit, MaxLimit int
	// Window is how many latency samples make one update of the limit
	// (default 100, at most MaxAdaptiveWindow). Windows are counted in
	// samples, not time, so the controller needs no clock: a test drives
	// it by the latencies of the outcomes it passes to Done.
	Window int
	// LongWindow is how many windows the long-term latency average spans
	// (default 600): its exponential weight is 2/(LongWindow+1), after a
	// warm-up of 10 windows averaged plainly.
	LongWindow int
	// Smoothing is how much of each new estimate replaces the limit, in
	// (0, 1] (default 0.2).
	Smoothing float64
	// QueueSize is how many requests above the no-queueing estimate the
	// limit allows, which is also how fast it grows while latency stays
	// flat. Zero means the square root of the current limit (at least 1).
	QueueSize int
}

// Adaptive is a concurrency limit that a controller tunes from the latencies
// of the requests it admitted. The controller is Netflix's Gradient2 (see the package
// documentation for the comparison with Vegas, AIMD, Envoy's gradient
// controller and fbthrift's CPU controller):
//
// Every Window samples (the latencies of the requests it admitted, as the
// pipeline measures them), short is the window's mean latency and long an
// exponential average of the windows' means. Then
//
//	gradient = clamp(long/short, 0.5, 1)
//	limit    = (1-s)·limit + s·(gradient·limit + queue)
//
// clamped to [MinLimit, MaxLimit], with s = Smoothing and queue = QueueSize.
// Flat latency (gradient 1) grows the limit by s·queue per window; latency
// above its long-term average shrinks it, by at most s/2 of itself per
// window. When long is more than twice short (latency fell back after a long
// overload) long is cut by 10% per window, so that the baseline follows it
// down quickly. A window in which the in-flight count never reached half the
// limit leaves the limit alone: the limit was not what bounded the load
// (Gradient2's "app-limited" rule), so latency says nothing about it.
//
// Admit and Done take no lock: the in-flight count is a compare-and-swap,
// and a sample is one atomic add of the count and the sum packed into one
// word. The Done that completes a window takes a mutex, once per window, to
// run the update.
type Adaptive struct {
	c       Concurrency
	refusal *admit.Refusal
	win     atomic.Uint64 // count<<winShift | sum of latencies in ns
	peak    atomic.Int64  // highest in-flight count seen at a Done in this window
	opts    AdaptiveConfig

	mu      sync.Mutex
	est     float64 // the limit, unrounded
	long    float64 // long-term average latency, ns
	short   float64 // last window's mean latency, ns
	windows int64
}

const (
	winShift = 48
	winOne   = 1 << winShift
	winSum   = winOne - 1
	warmup   = 10
)

// NewAdaptive returns an adaptive concurrency gate. It fails, naming the
// field and what to use instead, on settings out of range (negative
// values, MinLimit above MaxLimit, Window above MaxAdaptiveWindow,
// Smoothing outside [0, 1]).
func NewAdaptive(cfg AdaptiveConfig) (*Adaptive, error) {
	o := cfg
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{
		{"InitialLimit", o.InitialLimit}, {"MinLimit", o.MinLimit}, {"MaxLimit", o.MaxLimit},
		{"Window", o.Window}, {"LongWindow", o.LongWindow}, {"QueueSize", o.QueueSize},
	} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("AdaptiveConfig.%s is %d: use 0 (the default) or more", f.name, f.v))
		}
	}
	if o.Window > MaxAdaptiveWindow {
		errs = append(errs, fmt.Errorf("AdaptiveConfig.Window is %d: use at most MaxAdaptiveWindow (%d) samples", o.Window, MaxAdaptiveWindow))
	}
	if !(o.Smoothing >= 0 && o.Smoothing <= 1) {
		errs = append(errs, fmt.Errorf("AdaptiveConfig.Smoothing is %v: use a fraction in (0, 1], or 0 for %v", o.Smoothing, DefaultAdaptiveSmoothing))
	}
	if o.MinLimit > 0 && o.MaxLimit > 0 && o.MinLimit > o.MaxLimit {
		errs = append(errs, fmt.Errorf("AdaptiveConfig.MinLimit %d is above MaxLimit %d: set MinLimit at or below MaxLimit", o.MinLimit, o.MaxLimit))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("gate: NewAdaptive: %w", err)
	}
	if o.MinLimit == 0 {
		o.MinLimit = DefaultAdaptiveMinLimit
		if o.MaxLimit > 0 {
			o.MinLimit = min(o.MinLimit, o.MaxLimit)
		}
	}
	if o.MaxLimit == 0 {
		o.MaxLimit = max(DefaultAdaptiveMaxLimit, o.MinLimit)
	}
	if o.InitialLimit == 0 {
		o.InitialLimit = DefaultAdaptiveInitialLimit
	}
	o.InitialLimit = min(max(o.InitialLimit, o.MinLimit), o.MaxLimit)
	if o.Window == 0 {
		o.Window = DefaultAdaptiveWindow
	}
	if o.LongWindow == 0 {
		o.LongWindow = DefaultAdaptiveLongWindow
	}
	if o.Smoothing == 0 {
		o.Smoothing = DefaultAdaptiveSmoothing
	}
	a := &Adaptive{opts: o, est: float64(o.InitialLimit), refusal: &admit.Refusal{Reason: "adaptive"}}
	a.c.limit.Store(int64(o.InitialLimit))
	return a, nil
}

// Admit admits a request iff fewer than Limit are in flight.
func (a *Adaptive) Admit(*admit.Attempt) *admit.Refusal {
	if a.c.acquire() {
		return nil
	}
	return a.refusal
}

// Done ends an admitted request; its latency is a sample for the
// controller, unless it was canceled (it never ran). It panics if nothing
// was in flight.
func (a *Adaptive) Done(_ *admit.Attempt, o admit.Outcome) {
	n := a.c.release()
	if !o.Canceled && o.Latency > 0 {
		a.sample(o.Latency, n+1)
	}
}

// sample records one latency; inflight is the in-flight count just before
// this request ended.
func (a *Adaptive) sample(latency time.Duration, inflight int64) {
	for p := a.peak.Load(); inflight > p; p = a.peak.Load() {
		if a.peak.CompareAndSwap(p, inflight) {
			break
		}
	}
	v := a.win.Add(winOne | uint64(min(latency, MaxAdaptiveSample)))
	if v>>winShift == uint64(a.opts.Window) {
		a.update()
	}
}

// update closes the window: it runs once per Window samples, on the Done
// that completed it.
func (a *Adaptive) update() {
	a.mu.Lock()
	v := a.win.Swap(0)
	peak := a.peak.Swap(0)
	short := float64(v&winSum) / float64(v>>winShift)
	a.short = short
	a.windows++
	if a.windows <= warmup {
		a.long += (short - a.long) / float64(a.windows)
	} else {
		a.long += (short - a.long) * 2 / float64(a.opts.LongWindow+1)
	}
	if a.long > 2*short {
		a.long *= 0.9
	}
	raised := 0
	if float64(peak) >= a.est/2 {
		gradient := min(max(a.long/short, 0.5), 1)
		queue := float64(a.opts.QueueSize)
		if queue == 0 {
			queue = max(1, math.Sqrt(a.est))
		}
		s := a.opts.Smoothing
		est := (1-s)*a.est + s*(gradient*a.est+queue)
		a.est = min(max(est, float64(a.opts.MinLimit)), float64(a.opts.MaxLimit))
		raised = int(int64(a.est) - a.c.limit.Swap(int64(a.est)))
	}
	a.mu.Unlock()
	if raised > 0 {
		a.c.wake.fire(raised)
	}
}

// Limit returns the current limit.
func (a *Adaptive) Limit() int { return a.c.Limit() }

// InFlight returns the number of requests admitted and not yet ended.
func (a *Adaptive) InFlight() int { return a.c.InFlight() }

// Name returns "adaptive", the reason of its refusals.
func (a *Adaptive) Name() string { return a.refusal.Reason }

// Attach registers the pipeline to be told when an update raises the limit.
func (a *Adaptive) Attach(env admit.Env) (detach func(), err error) { return a.c.wake.attach(env) }

// AdaptiveStats is the state of an Adaptive gate's controller.
type AdaptiveStats struct {
	Limit    int           // the limit in force
	InFlight int           // requests in flight
	Estimate float64       // the limit before rounding down
	Short    time.Duration // mean latency of the last window
	Long     time.Duration // long-term average latency
	Windows  int64         // windows completed
}

// Stats returns the controller's state. It takes the update mutex.
func (a *Adaptive) Stats() AdaptiveStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return AdaptiveStats{
		Limit:    a.c.Limit(),
		InFlight: a.c.InFlight(),
		Estimate: a.est,
		Short:    time.Duration(a.short),
		Long:     time.Duration(a.long),
		Windows:  a.windows,
	}
}
