// Package obs records what the admission pipeline tells its observers
// (admit.Observer): histograms of the wait before each request's start and
// of its run time, answers by status class, rejections by reason and
// status. It allocates nothing per request. Package metrics exports a
// Recorder's counts to Prometheus; package dashboard turns them into
// percentiles per second.
package obs

import (
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// Bounds are the upper bounds of the histograms' buckets, in
// nanoseconds: ten per decade (1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8 times a
// power of ten), from 1 µs to 100 s, so that a quantile read from them is
// within a quarter of its value, and Prometheus's usual bounds (0.0005,
// 0.001, 0.0025, ..., 10 seconds) are among them. A last bucket, without
// bound, holds what is longer.
var bounds = func() []int64 {
	steps := [...]float64{1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8}
	var b []int64
	for d := int64(1_000); d < 100_000_000_000; d *= 10 {
		for _, s := range steps {
			b = append(b, int64(math.Round(s*float64(d))))
		}
	}
	return append(b, 100_000_000_000)
}()

// Bounds returns the upper bounds of the buckets (a copy), in
// nanoseconds; Counts.Buckets has one more bucket, for what is longer
// than the last bound.
func Bounds() []time.Duration {
	out := make([]time.Duration, len(bounds))
	for i, b := range bounds {
		out[i] = time.Duration(b)
	}
	return out
}

// Hist is a histogram of durations on Bounds, updated with atomic
// additions: Observe may be called from any goroutine and allocates
// nothing. The zero value is empty and ready.
type Hist struct {
	buckets [numBuckets]atomic.Uint64
	sum     atomic.Int64 // nanoseconds
}

// numBuckets is len(bounds) + 1; a test checks it.
const numBuckets = 82

// Observe adds d (negative counts as zero).
func (h *Hist) Observe(d time.Duration) {
	v := max(int64(d), 0)
	i, _ := slices.BinarySearch(bounds, v) // the first bound >= v
	h.buckets[i].Add(1)
	h.sum.Add(v)
}

// Counts returns the counts so far. Each is read atomically; together they
// are not one instant's while observations go on.
func (h *Hist) Counts() Counts {
	c := Counts{Buckets: make([]uint64, numBuckets), Sum: time.Duration(h.sum.Load())}
	for i := range h.buckets {
		n := h.buckets[i].Load()
		c.Buckets[i] = n
		c.Count += n
	}
	return c
}

// Counts are a histogram's counts: Buckets[i] counts the observations in
// (Bounds[i-1], Bounds[i]], the last one those above the last bound.
type Counts struct {
	Buckets []uint64
	Count   uint64
	Sum     time.Duration
}

// Sub returns c minus an earlier reading of the same histogram: the
// observations made between the two. A bucket that went backwards (a
// reading of another histogram) counts zero.
func (c Counts) Sub(prev Counts) Counts {
	out := Counts{Buckets: make([]uint64, len(c.Buckets)), Sum: max(c.Sum-prev.Sum, 0)}
	for i, n := range c.Buckets {
		if i < len(prev.Buckets) && prev.Buckets[i] <= n {
			n -= prev.Buckets[i]
		}
		out.Buckets[i] = n
		out.Count += n
	}
	return out
}

// Mean returns Sum / Count, or zero when there is nothing.
func (c Counts) Mean() time.Duration {
	if c.Count == 0 {
		return 0
	}
	return c.Sum / time.Duration(c.Count)
}

// Quantile returns the q-quantile (q in [0, 1]) of the observations,
// interpolated linearly within its bucket; zero when there is nothing. A
// quantile in the last bucket, without bound, reads as the last bound.
func (c Counts) Quantile(q float64) time.Duration {
	if c.Count == 0 || math.IsNaN(q) {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := q * float64(c.Count)
	var seen float64
	for i, n := range c.Buckets {
		if n == 0 {
			continue
		}
		if seen+float64(n) >= rank {
			if i >= len(bounds) {
				return time.Duration(bounds[len(bounds)-1])
			}
			lo := int64(0)
			if i > 0 {
				lo = bounds[i-1]
			}
			frac := (rank - seen) / float64(n)
			return time.Duration(float64(lo) + frac*float64(bounds[i]-lo))
		}
		seen += float64(n)
	}
	return time.Duration(bounds[len(bounds)-1])
}

// Cumulative returns, for each of the upper bounds given (each one of
// Bounds; others are skipped), the number of observations at or below it,
// as Prometheus's histogram buckets count them.
func (c Counts) Cumulative(upper []time.Duration) map[float64]uint64 {
	out := make(map[float64]uint64, len(upper))
	var acc uint64
	j := 0
	for _, u := range upper {
		i, ok := slices.BinarySearch(bounds, int64(u))
		if !ok {
			continue
		}
		for ; j <= i && j < len(c.Buckets); j++ {
			acc += c.Buckets[j]
		}
		out[u.Seconds()] = acc
	}
	return out
}
