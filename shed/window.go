package shed

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
)

// window is the rolling window of outcomes that the latency and
// error-rate shedders read: len(buckets) buckets of width nanoseconds of
// the shedder's clock, each holding the outcomes that ended in one period
// of that width. A bucket is reused for a later period once the window has
// moved past it; the first outcome of the new period clears it.
//
// Adding an outcome takes no lock but when it opens a new period (once
// per bucket width): the counters are atomics. An outcome added by a
// goroutine that stalled for a whole window between reading a bucket's
// period and adding to it can land in the bucket's next period; the error
// is one outcome, and the race detector sees only atomics.
type window struct {
	width   int64
	buckets []bucket
	hist    bool // keep a latency histogram per bucket (a percentile is asked)

	mu sync.Mutex // serialises the clearing of a bucket for a new period
}

// bucket is one period of a window.
type bucket struct {
	period atomic.Int64 // the period it holds; math.MinInt64: none yet
	n      atomic.Int64 // outcomes
	errs   atomic.Int64 // outcomes that failed
	sum    atomic.Int64 // latencies, ns
	bins   []atomic.Uint64
}

func newWindow(width int64, buckets int, hist bool) *window {
	w := &window{width: width, buckets: make([]bucket, buckets), hist: hist}
	for i := range w.buckets {
		w.buckets[i].period.Store(math.MinInt64)
		if hist {
			w.buckets[i].bins = make([]atomic.Uint64, histBins)
		}
	}
	return w
}

// period returns the period that the clock reading now falls in (floor
// division, so that a clock before its origin works too).
func (w *window) period(now int64) int64 {
	p := now / w.width
	if now%w.width < 0 {
		p--
	}
	return p
}

// bucket returns the bucket of period p.
func (w *window) bucket(p int64) *bucket {
	n := int64(len(w.buckets))
	return &w.buckets[(p%n+n)%n]
}

// add records an outcome that ended at now.
func (w *window) add(now int64, latency int64, failed bool) {
	p := w.period(now)
	b := w.bucket(p)
	if b.period.Load() != p {
		w.mu.Lock()
		if b.period.Load() != p {
			b.n.Store(0)
			b.errs.Store(0)
			b.sum.Store(0)
			for i := range b.bins {
				b.bins[i].Store(0)
			}
			b.period.Store(p)
		}
		w.mu.Unlock()
	}
	b.n.Add(1)
	if failed {
		b.errs.Add(1)
	}
	b.sum.Add(max(latency, 0))
	if w.hist {
		b.bins[histIndex(latency)].Add(1)
	}
}

// totals are the sums of the buckets of a window.
type totals struct {
	n, errs, sum int64
}

// totals sums the buckets of the periods the window covers at now: the
// current one and the len(buckets)-1 before it. With bins non-nil (of
// length histBins) it also sums their histograms into it.
func (w *window) totals(now int64, bins []uint64) totals {
	cur := w.period(now)
	oldest := cur - int64(len(w.buckets)) + 1
	clear(bins)
	var t totals
	for i := range w.buckets {
		b := &w.buckets[i]
		if p := b.period.Load(); p < oldest || p > cur {
			continue
		}
		t.n += b.n.Load()
		t.errs += b.errs.Load()
		t.sum += b.sum.Load()
		if bins != nil {
			for j := range b.bins {
				bins[j] += b.bins[j].Load()
			}
		}
	}
	return t
}

// The latency histogram is log-linear: values below 2^histSub ns have a
// bin each; above, each power of two is cut into 2^histSub bins of equal
// width, so that a bin's midpoint is within 1/2^(histSub+1) (6.25%) of
// every value in it. Latencies of 2^(histMaxExp+1) ns (about 37 minutes)
// and more share the last bin.
const (
	histSub    = 3
	histMaxExp = 40
	histBins   = 1<<histSub + (histMaxExp-histSub+1)<<histSub
)

// histIndex returns the bin of a latency in nanoseconds.
func histIndex(v int64) int {
	if v < 1<<histSub {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 1
	if e > histMaxExp {
		return histBins - 1
	}
	m := int(v>>(e-histSub)) & (1<<histSub - 1)
	return 1<<histSub + (e-histSub)<<histSub + m
}

// histValue returns the value a bin stands for: its midpoint.
func histValue(i int) float64 {
	if i < 1<<histSub {
		return float64(i)
	}
	e := (i-1<<histSub)>>histSub + histSub
	m := (i - 1<<histSub) & (1<<histSub - 1)
	lo := float64(int64(1<<histSub+m) << (e - histSub))
	return lo + float64(int64(1)<<(e-histSub))/2
}

// quantile returns the value below which a fraction q of the n samples
// counted in bins lie (nearest rank), or NaN when n is 0.
func quantile(bins []uint64, n int64, q float64) float64 {
	if n <= 0 {
		return math.NaN()
	}
	rank := min(max(uint64(math.Ceil(q*float64(n))), 1), uint64(n))
	var seen uint64
	for i, c := range bins {
		if seen += c; seen >= rank {
			return histValue(i)
		}
	}
	return histValue(len(bins) - 1)
}
