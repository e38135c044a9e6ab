package shed

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/drop"
	"github.com/sluice-go/sluice/internal/monotime"
)

// Defaults for the zero values of the shedders' configurations. The
// thresholds are the examples of loadshed's README (docs/background.md,
// source 05), each on its one scale: latencies as time.Duration, shares as fractions
// in [0, 1], in-flight requests as counts.
const (
	// DefaultLatencyLower and DefaultLatencyUpper are the latency
	// band: from 200 ms the shedding starts, from 1 s it refuses all.
	DefaultLatencyLower = 200 * time.Millisecond
	DefaultLatencyUpper = time.Second
	// DefaultErrorLower and DefaultErrorUpper are the error-rate
	// band: from 20% of the outcomes failing the shedding starts, at 100%
	// it refuses all.
	DefaultErrorLower = 0.2
	DefaultErrorUpper = 1.0
	// DefaultConcurrencyLower and DefaultConcurrencyUpper are the
	// band of requests in flight.
	DefaultConcurrencyLower = 2500
	DefaultConcurrencyUpper = 5000
	// DefaultWindowLength and DefaultBuckets make the rolling window:
	// 10 s in 10 buckets of 1 s.
	DefaultWindowLength = 10 * time.Second
	DefaultBuckets      = 10
	// DefaultMinSamples is how many outcomes the window must hold for
	// its reading to count (loadshed's requiredPoints).
	DefaultMinSamples = 20
	// DefaultInterval is how often the drop probability is
	// recomputed from the window or the custom value.
	DefaultInterval = 100 * time.Millisecond
)

// MaxBuckets is the largest Window.Buckets.
const MaxBuckets = 3600

// Manual, as Config.Interval, recomputes the drop probability only when
// Refresh is called: tests that script the signal use it. It is the same
// value as gate.Manual.
const Manual time.Duration = -1

// Config holds the settings every shedder has; each signal's
// configuration (LatencyConfig, ErrorRateConfig, ConcurrencyConfig,
// CustomConfig) embeds it. The zero value is usable.
type Config struct {
	// Name is the reason of its refusals (Sluice-Reject-Reason, the
	// rejection counters); empty means the signal's: "shed-latency",
	// "shed-errors", "shed-concurrency" or "shed-custom".
	Name string
	// RetryAfter is the Retry-After of its refusals: zero means the
	// pipeline's (admit.Rejection.RetryAfter, 1 s by default), negative
	// means none.
	RetryAfter time.Duration
	// Interval is how often the drop probability is recomputed from the
	// window (latency, error rate) or from the custom value: by the first
	// decision or outcome after it has passed, never in the background.
	// Zero means DefaultInterval (100 ms); Manual means only when
	// Refresh is called. The concurrency shedder reads its count on every
	// decision and ignores it.
	Interval time.Duration
	// Rand returns uniformly distributed 64-bit values; it must be safe
	// for concurrent use. Nil means math/rand/v2's Uint64. Tests pass a
	// seeded or scripted source.
	Rand func() uint64
	// Clock returns monotonic nanoseconds, for the window and Interval;
	// nil means the real clock. It must be safe for concurrent use. Tests
	// pass a fake one.
	Clock func() int64
}

// Window is the rolling window the latency and error-rate shedders
// read: the outcomes of the last Length, in Buckets buckets of
// Length/Buckets each, the oldest bucket dropped as time moves on
// (loadshed's bucketSize × buckets). The zero value is 10 s in buckets of
// 1 s, counting once it holds 20 outcomes.
type Window struct {
	// Length is the span of the window; zero means DefaultWindowLength.
	Length time.Duration
	// Buckets is how many buckets it is cut into, at most MaxBuckets;
	// zero means DefaultBuckets.
	Buckets int
	// MinSamples is how many outcomes the window must hold for its
	// reading to count (loadshed's requiredPoints): with fewer, nothing
	// is shed. Zero means DefaultMinSamples; use 1 to count from the
	// first outcome.
	MinSamples int
}

// LatencyConfig configures a latency shedder (NewLatency). The zero
// value sheds by the mean latency over 10 s, from 200 ms to 1 s.
type LatencyConfig struct {
	// Lower and Upper are the latency band: at or below Lower nothing is
	// shed, at or above Upper everything, in between a request is refused
	// with probability (latency − Lower)/(Upper − Lower). Both zero mean
	// DefaultLatencyLower and DefaultLatencyUpper (200 ms, 1 s);
	// Upper zero with Lower set is an error.
	Lower, Upper time.Duration
	// Percentile is which latency of the window is compared with the
	// band, as a fraction: 0.95 for the 95th percentile (loadshed's
	// 95.0), 0.5 for the median; zero means the mean (loadshed's
	// AverageLatency). Percentiles come from a histogram whose bins are
	// within 6.25% of the latencies they hold.
	Percentile float64
	// Window is the rolling window of outcomes.
	Window Window
	Config
}

// ErrorRateConfig configures an error-rate shedder (NewErrorRate). The
// zero value sheds by the share of failed requests over 10 s, from 20% to
// 100%, a failure being an error or a 5xx status.
type ErrorRateConfig struct {
	// Lower and Upper are the band of the error rate, fractions in
	// [0, 1] (0.2 is 20%): at or below Lower nothing is shed, at or above
	// Upper everything, in between a request is refused with probability
	// (rate − Lower)/(Upper − Lower). Both zero mean
	// DefaultErrorLower and DefaultErrorUpper (0.2, 1).
	Lower, Upper float64
	// Failed says which outcomes count as failures; nil means
	// FailedOutcome (an error, or a status of 500 or more). loadshed's
	// ErrorCodes list is a Failed that looks the status up.
	Failed func(admit.Outcome) bool
	// Window is the rolling window of outcomes.
	Window Window
	Config
}

// ConcurrencyConfig configures a concurrency shedder (NewConcurrency).
// The zero value sheds from 2500 to 5000 requests in flight.
type ConcurrencyConfig struct {
	// Lower and Upper are the band of requests in flight (admitted by
	// this shedder and not yet ended, the deciding one not included): at
	// or below Lower nothing is shed, at or above Upper everything, in
	// between a request is refused with probability (n − Lower)/(Upper −
	// Lower). Both zero mean DefaultConcurrencyLower and
	// DefaultConcurrencyUpper (2500, 5000).
	Lower, Upper int
	Config
}

// CustomConfig configures a shedder on a value of your own (NewCustom),
// loadshed's Aggregator. The zero value is not usable:
// Value is required.
type CustomConfig struct {
	// Value returns the signal. It is called at most once per Interval,
	// by a decision, one call at a time, so it may be slow-ish but must
	// not block; NaN counts as "no reading" (nothing is shed).
	Value func() float64
	// Lower and Upper are the band of Value: at or below Lower nothing is
	// shed, at or above Upper everything, in between a request is refused
	// with probability (v − Lower)/(Upper − Lower). Both zero mean 0 and
	// 1: Value is then the drop probability itself, as a loadshed
	// Aggregator's is.
	Lower, Upper float64
	Config
}

// FailedOutcome is ErrorRateConfig.Failed's default: the request
// failed (its handler panicked, the response could not be written, the
// call got no response) or was answered with a status of 500 or more.
func FailedOutcome(o admit.Outcome) bool { return o.Err != nil || o.Status >= 500 }

// shedSignal is what a Shedder reads.
type shedSignal uint8

const (
	shedLatency shedSignal = iota + 1
	shedErrors
	shedConcurrency
	shedCustom
)

// Stats is a shedder's state: the drop probability in force and the
// reading it came from, on the signal's own scale.
type Stats struct {
	// Reject is the drop probability in force: the share of new requests
	// refused, in [0, 1].
	Reject float64
	// Latency is a latency shedder's reading: the window's mean, or its
	// percentile.
	Latency time.Duration
	// ErrorRate is an error-rate shedder's reading: the share of the
	// window's outcomes that failed.
	ErrorRate float64
	// InFlight is a concurrency shedder's reading: the requests it
	// admitted that have not ended.
	InFlight int
	// Value is a custom shedder's reading (0 when it gave NaN).
	Value float64
	// Samples is the number of outcomes in the window of a latency or
	// error-rate shedder.
	Samples int
	// Ready says whether the reading counts: false while the window holds
	// fewer than MinSamples outcomes, or while the custom value is NaN,
	// and nothing is then shed.
	Ready bool
}

// Shedder is a proportional load shedder: an admit.Policy that refuses a
// new request with the drop probability that its signal's reading gives
// within its band (see the package documentation). Build one with
// NewLatency, NewErrorRate, NewConcurrency or NewCustom; put it in
// admit.Config.Policies for a server, or in client.ShedConfig.Policies
// for outgoing calls. It learns from the outcome passed to Done
// (admit.Outcome's Latency, Status and Err; outcomes of admissions that
// never ran are ignored).
//
// A Shedder is safe for concurrent use. Admit and Done take no lock and
// allocate nothing. The drop probability of the latency, error-rate and
// custom shedders is computed off the decisions, at most once per
// Interval, by the first decision or outcome after it has passed, and
// kept as an atomic threshold: a decision is one atomic load while
// nothing is shed, plus a clock read and a random draw while something
// is. While everything is refused no outcome arrives, so the decisions
// themselves move the window on: a shedder that refused all admits again
// once the outcomes that closed it have left the window (or fewer than
// MinSamples remain). The concurrency shedder reads its count on every
// decision.
type Shedder struct {
	thr      atomic.Uint64 // refuse iff rnd() < thr; MaxUint64 refuses all
	next     atomic.Int64  // clock reading at which the next refresh is due
	inflight atomic.Int64  // the concurrency shedder's count

	sig        shedSignal
	lo, hi     float64 // the band, on the signal's scale (latencies in ns)
	quantile   float64
	minSamples int64
	failed     func(admit.Outcome) bool
	value      func() float64
	win        *window
	interval   int64 // ns; 0 when Manual
	rnd        func() uint64
	clock      func() int64
	refusal    *admit.Refusal

	mu    sync.Mutex // one refresh at a time; guards stats and bins
	stats Stats
	bins  []uint64
}

// NewLatency returns a shedder on the latency of the requests that
// ended in the window: its mean, or cfg.Percentile of it. It fails,
// naming the value and what to use instead, on settings out of range.
func NewLatency(cfg LatencyConfig) (*Shedder, error) {
	const what = "LatencyConfig"
	var errs []error
	lo, hi := cfg.Lower, cfg.Upper
	if lo == 0 && hi == 0 {
		lo, hi = DefaultLatencyLower, DefaultLatencyUpper
	}
	switch {
	case lo < 0:
		errs = append(errs, fmt.Errorf("%s.Lower is %v: use a latency of 0 or more, such as 200*time.Millisecond", what, lo))
	case hi < lo:
		errs = append(errs, fmt.Errorf("%s.Upper is %v, below Lower %v: set Upper to the latency at which everything is refused, at or above Lower (or both to zero for %v and %v)", what, hi, lo, DefaultLatencyLower, DefaultLatencyUpper))
	}
	if p := cfg.Percentile; !(p >= 0 && p < 1) {
		hint := ""
		if p >= 1 && p < 100 {
			hint = fmt.Sprintf(" (loadshed's %v is %v)", p, p/100)
		}
		errs = append(errs, fmt.Errorf("%s.Percentile is %v: use a fraction in (0, 1), such as 0.95 for the 95th percentile, or 0 for the mean%s", what, p, hint))
	}
	s, err := newShedder(shedLatency, what, "shed-latency", float64(lo), float64(hi), &cfg.Window, cfg.Percentile > 0, cfg.Config, errs)
	if err != nil {
		return nil, fmt.Errorf("shed: NewLatency: %w", err)
	}
	s.quantile = cfg.Percentile
	return s, nil
}

// NewErrorRate returns a shedder on the share of the requests that
// ended in the window that failed (cfg.Failed). It fails, naming the
// value and what to use instead, on settings out of range.
func NewErrorRate(cfg ErrorRateConfig) (*Shedder, error) {
	lo, hi := cfg.Lower, cfg.Upper
	if lo == 0 && hi == 0 {
		lo, hi = DefaultErrorLower, DefaultErrorUpper
	}
	const what = "ErrorRateConfig"
	errs := checkFractions(what, lo, hi, DefaultErrorLower, DefaultErrorUpper)
	s, err := newShedder(shedErrors, what, "shed-errors", lo, hi, &cfg.Window, false, cfg.Config, errs)
	if err != nil {
		return nil, fmt.Errorf("shed: NewErrorRate: %w", err)
	}
	s.failed = cfg.Failed
	if s.failed == nil {
		s.failed = FailedOutcome
	}
	return s, nil
}

// NewConcurrency returns a shedder on the number of requests in flight.
// It fails, naming the value and what to use instead, on settings out of
// range. (gate.Concurrency is the exact limit; this is loadshed's
// proportional one.)
func NewConcurrency(cfg ConcurrencyConfig) (*Shedder, error) {
	const what = "ConcurrencyConfig"
	var errs []error
	lo, hi := cfg.Lower, cfg.Upper
	if lo == 0 && hi == 0 {
		lo, hi = DefaultConcurrencyLower, DefaultConcurrencyUpper
	}
	switch {
	case lo < 0:
		errs = append(errs, fmt.Errorf("%s.Lower is %d: use a count of requests in flight, 0 or more", what, lo))
	case hi < lo:
		errs = append(errs, fmt.Errorf("%s.Upper is %d, below Lower %d: set Upper to the count at which everything is refused, at or above Lower (or both to zero for %d and %d)", what, hi, lo, DefaultConcurrencyLower, DefaultConcurrencyUpper))
	}
	s, err := newShedder(shedConcurrency, what, "shed-concurrency", float64(lo), float64(hi), nil, false, cfg.Config, errs)
	if err != nil {
		return nil, fmt.Errorf("shed: NewConcurrency: %w", err)
	}
	return s, nil
}

// NewCustom returns a shedder on cfg.Value, loadshed's Aggregator:
// with the default band [0, 1], Value is the drop probability itself. It
// fails, naming the value and what to use instead, without Value or on a
// band out of order.
func NewCustom(cfg CustomConfig) (*Shedder, error) {
	const what = "CustomConfig"
	var errs []error
	if cfg.Value == nil {
		errs = append(errs, fmt.Errorf("%s.Value is nil: give the function that returns the signal (with the default band [0, 1], the drop probability)", what))
	}
	lo, hi := cfg.Lower, cfg.Upper
	if lo == 0 && hi == 0 {
		hi = 1
	}
	if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) || hi < lo {
		errs = append(errs, fmt.Errorf("%s.Lower and Upper are %v and %v: use finite values with Lower at or below Upper (both zero for 0 and 1)", what, lo, hi))
	}
	s, err := newShedder(shedCustom, what, "shed-custom", lo, hi, nil, false, cfg.Config, errs)
	if err != nil {
		return nil, fmt.Errorf("shed: NewCustom: %w", err)
	}
	s.value = cfg.Value
	return s, nil
}

// checkFractions checks a band of fractions.
func checkFractions(what string, lo, hi, dlo, dhi float64) []error {
	var errs []error
	for _, f := range []struct {
		name string
		v    float64
	}{{"Lower", lo}, {"Upper", hi}} {
		if !(f.v >= 0 && f.v <= 1) {
			hint := ""
			if f.v > 1 && f.v <= 100 {
				hint = fmt.Sprintf(" (%v%% is %v)", f.v, f.v/100)
			}
			errs = append(errs, fmt.Errorf("%s.%s is %v: use a fraction in [0, 1], not a percentage%s", what, f.name, f.v, hint))
		}
	}
	if len(errs) == 0 && hi < lo {
		errs = append(errs, fmt.Errorf("%s.Upper is %v, below Lower %v: set Upper at or above Lower (or both to zero for %v and %v)", what, hi, lo, dlo, dhi))
	}
	return errs
}

// newShedder checks the common settings and the window, and builds the
// Shedder.
func newShedder(sig shedSignal, what, name string, lo, hi float64, w *Window, hist bool, o Config, errs []error) (*Shedder, error) {
	if o.Interval < 0 && o.Interval != Manual {
		errs = append(errs, fmt.Errorf("%s.Interval is %v: use a positive duration, zero for %v, or shed.Manual", what, o.Interval, DefaultInterval))
	}
	var width int64
	var buckets int
	var minSamples int64
	if w != nil {
		length, b := w.Length, w.Buckets
		if length == 0 {
			length = DefaultWindowLength
		}
		if b == 0 {
			b = DefaultBuckets
		}
		switch {
		case length < 0:
			errs = append(errs, fmt.Errorf("%s.Window.Length is %v: use a positive duration, or zero for %v", what, length, DefaultWindowLength))
		case b < 0 || b > MaxBuckets:
			errs = append(errs, fmt.Errorf("%s.Window.Buckets is %d: use 1 to %d, or zero for %d", what, b, MaxBuckets, DefaultBuckets))
		case int64(length)/int64(b) <= 0:
			errs = append(errs, fmt.Errorf("%s.Window.Length %v is shorter than its %d buckets of 1 ns: lengthen it or use fewer buckets", what, length, b))
		}
		width, buckets = int64(length)/int64(max(b, 1)), b
		switch {
		case w.MinSamples < 0:
			errs = append(errs, fmt.Errorf("%s.Window.MinSamples is %d: use 1 or more, or zero for %d", what, w.MinSamples, DefaultMinSamples))
		case w.MinSamples == 0:
			minSamples = DefaultMinSamples
		default:
			minSamples = int64(w.MinSamples)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s := &Shedder{sig: sig, lo: lo, hi: hi, minSamples: minSamples, rnd: o.Rand, clock: o.Clock,
		refusal: &admit.Refusal{Reason: o.Name, RetryAfter: o.RetryAfter}}
	if s.refusal.Reason == "" {
		s.refusal.Reason = name
	}
	if s.rnd == nil {
		s.rnd = rand.Uint64
	}
	if s.clock == nil {
		s.clock = monotime.Clock()
	}
	switch o.Interval {
	case 0:
		s.interval = int64(DefaultInterval)
	case Manual:
	default:
		s.interval = int64(o.Interval)
	}
	if w != nil {
		s.win = newWindow(width, buckets, hist)
	}
	if hist {
		s.bins = make([]uint64, histBins)
	}
	if s.interval == 0 {
		s.next.Store(math.MaxInt64)
	}
	return s, nil
}

// Admit refuses the request with the drop probability in force.
func (s *Shedder) Admit(*admit.Attempt) *admit.Refusal {
	var t uint64
	if s.sig == shedConcurrency {
		if n := float64(s.inflight.Load()); n > s.lo {
			t = drop.Threshold(drop.Probability(n, s.lo, s.hi))
		}
	} else {
		t = s.thr.Load()
		if (t != 0 || s.sig == shedCustom) && s.interval > 0 {
			if now := s.clock(); now >= s.next.Load() {
				s.tryRefresh(now)
				t = s.thr.Load()
			}
		}
	}
	if t != 0 && (t == math.MaxUint64 || s.rnd() < t) {
		return s.refusal
	}
	if s.sig == shedConcurrency {
		s.inflight.Add(1)
	}
	return nil
}

// Done ends a request that Admit admitted: the latency and error-rate
// shedders add its outcome to the window (unless it was canceled: it never
// ran), the concurrency shedder counts it out. It panics on a concurrency
// shedder with nothing in flight (a Done without its Admit).
func (s *Shedder) Done(_ *admit.Attempt, o admit.Outcome) {
	switch s.sig {
	case shedConcurrency:
		if s.inflight.Add(-1) < 0 {
			s.inflight.Add(1)
			panic("shed: Done without Admit")
		}
	case shedLatency, shedErrors:
		if o.Canceled {
			return
		}
		now := s.clock()
		s.win.add(now, int64(o.Latency), s.sig == shedErrors && s.failed(o))
		if s.interval > 0 && now >= s.next.Load() {
			s.tryRefresh(now)
		}
	}
}

// tryRefresh recomputes the probability unless another goroutine is at it.
func (s *Shedder) tryRefresh(now int64) {
	if !s.mu.TryLock() {
		return
	}
	if now >= s.next.Load() {
		s.refresh(now)
	}
	s.mu.Unlock()
}

// Refresh recomputes the drop probability now, from the window or the
// custom value, and returns the state. Decisions and outcomes do it by
// themselves every Interval; tests with Interval Manual call it.
func (s *Shedder) Refresh() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refresh(s.clock())
	return s.statsLocked()
}

// refresh computes the state at now; s.mu is held.
func (s *Shedder) refresh(now int64) {
	var st Stats
	v, ok := 0.0, false
	switch s.sig {
	case shedLatency, shedErrors:
		t := s.win.totals(now, s.bins)
		st.Samples = int(t.n)
		if ok = t.n >= s.minSamples && t.n > 0; ok {
			switch {
			case s.sig == shedErrors:
				v = float64(t.errs) / float64(t.n)
				st.ErrorRate = v
			case s.quantile > 0:
				v = quantile(s.bins, t.n, s.quantile)
				st.Latency = time.Duration(v)
			default:
				v = float64(t.sum) / float64(t.n)
				st.Latency = time.Duration(v)
			}
		}
	case shedCustom:
		v = s.value()
		if ok = !math.IsNaN(v); ok {
			st.Value = v
		}
	case shedConcurrency:
		return
	}
	if st.Ready = ok; ok {
		st.Reject = drop.Probability(v, s.lo, s.hi)
	}
	s.stats = st
	s.thr.Store(drop.Threshold(st.Reject))
	if s.interval > 0 {
		s.next.Store(now + s.interval)
	}
}

// Stats returns the state the last refresh computed (for the concurrency
// shedder, the count now).
func (s *Shedder) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statsLocked()
}

func (s *Shedder) statsLocked() Stats {
	if s.sig != shedConcurrency {
		return s.stats
	}
	n := s.inflight.Load()
	st := Stats{InFlight: int(n), Ready: true}
	if float64(n) > s.lo {
		st.Reject = drop.Probability(float64(n), s.lo, s.hi)
	}
	return st
}

// Name returns the reason of its refusals.
func (s *Shedder) Name() string { return s.refusal.Reason }
