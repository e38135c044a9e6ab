package ratelimit

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The accuracy of the sliding window, on a fake clock: one key with a
// quota of Q per window W, offered a load for 60 windows. The figures are
// deterministic; docs/benchmarks.md has them (go test -run Accuracy -v
// ./ratelimit/).

const (
	accQ       = 100
	accW       = time.Minute
	accWindows = 60
)

// accScenario is a load: the arrival times of one key's requests, sorted.
type accScenario struct {
	name     string
	arrivals []int64
}

// evenly returns n arrivals per window, evenly spaced, for every window.
func evenly(perWindow int) []int64 {
	var at []int64
	step := int64(accW) / int64(perWindow)
	for i := range int64(perWindow * accWindows) {
		at = append(at, i*step)
	}
	return at
}

// poisson returns arrivals at rate perWindow a window, exponential gaps.
func poisson(perWindow int, seed uint64) []int64 {
	r := rand.New(rand.NewPCG(seed, seed))
	var at []int64
	mean := float64(accW) / float64(perWindow)
	for t := 0.0; t < float64(accW*accWindows); t += r.ExpFloat64() * mean {
		at = append(at, int64(t))
	}
	return at
}

// burst returns n arrivals at t, 1 µs apart.
func burst(t time.Duration, n int) []int64 {
	at := make([]int64, n)
	for i := range at {
		at[i] = int64(t) + int64(i)*int64(time.Microsecond)
	}
	return at
}

func accScenarios() []accScenario {
	var pairs, echo []int64
	for j := range accWindows / 2 {
		// 2Q in the last 1 ms of an even window, 2Q in the first 1 ms of
		// the next: a fixed window admits 2Q within 2 ms.
		edge := time.Duration(2*j+1) * accW
		pairs = append(pairs, burst(edge-time.Millisecond, 2*accQ)...)
		pairs = append(pairs, burst(edge, 2*accQ)...)
		// 2Q at the end of an even window, 2Q half a window later: the
		// weighting assumes the previous window's requests were spread
		// evenly, and here they were not.
		echo = append(echo, burst(edge-time.Millisecond, 2*accQ)...)
		echo = append(echo, burst(edge+accW/2, 2*accQ)...)
	}
	return []accScenario{
		{"smooth, 1.2× the quota", evenly(accQ * 12 / 10)},
		{"smooth, 2×", evenly(2 * accQ)},
		{"smooth, 10×", evenly(10 * accQ)},
		{"Poisson, 2× (seed 1)", poisson(2*accQ, 1)},
		{"bursts of 2Q at both sides of a boundary, every 2 windows", pairs},
		{"burst of 2Q at a window's end, 2Q half a window later", echo},
	}
}

// accResult is what a limiter let through.
type accResult struct {
	offered, allowed int
	perWindow        [accWindows]int
	maxSliding       int // most allowed in any interval of length W
}

func measure(arrivals, allowed []int64) accResult {
	r := accResult{offered: len(arrivals), allowed: len(allowed)}
	for _, t := range allowed {
		if w := t / int64(accW); w < accWindows {
			r.perWindow[w]++
		}
	}
	// The most allowed in any (t − W, t]: it peaks at an allowed time.
	lo := 0
	for hi, t := range allowed {
		for allowed[lo] <= t-int64(accW) {
			lo++
		}
		r.maxSliding = max(r.maxSliding, hi-lo+1)
	}
	return r
}

// slidingRun offers the arrivals to a Limiter.
func slidingRun(t testing.TB, arrivals []int64) accResult {
	l, clk := newLimiter(t, Config{Window: accW, Quota: accQ, Shards: 1})
	var allowed []int64
	for _, at := range arrivals {
		clk.t.Store(at)
		if l.Allow("k").Allowed {
			allowed = append(allowed, at)
		}
	}
	return measure(arrivals, allowed)
}

// fixedRun offers them to a fixed-window counter, the baseline.
func fixedRun(arrivals []int64) accResult {
	var allowed []int64
	win, n := int64(-1), 0
	for _, at := range arrivals {
		if w := at / int64(accW); w != win {
			win, n = w, 0
		}
		if n < accQ {
			n++
			allowed = append(allowed, at)
		}
	}
	return measure(arrivals, allowed)
}

func (r accResult) windowStats() (mean float64, lo, hi int) {
	lo = r.perWindow[0]
	for _, n := range r.perWindow {
		lo, hi = min(lo, n), max(hi, n)
	}
	return float64(r.allowed) / accWindows, lo, hi
}

func TestAccuracy(t *testing.T) {
	var out strings.Builder
	fmt.Fprintf(&out, "quota Q = %d per %v, %d windows\n", accQ, accW, accWindows)
	fmt.Fprintln(&out, "| load | offered | allowed | per window: mean (min–max) | most in any 60 s | fixed window: most in any 60 s |")
	fmt.Fprintln(&out, "|---|---|---|---|---|---|")
	for _, sc := range accScenarios() {
		s := slidingRun(t, sc.arrivals)
		f := fixedRun(sc.arrivals)
		mean, lo, hi := s.windowStats()
		fmt.Fprintf(&out, "| %s | %d | %d | %.1f (%d–%d) | %d (%.2f Q) | %d (%.2f Q) |\n",
			sc.name, s.offered, s.allowed, mean, lo, hi, s.maxSliding, float64(s.maxSliding)/accQ,
			f.maxSliding, float64(f.maxSliding)/accQ)

		assert.LessOrEqual(t, s.allowed, accWindows*accQ+accQ, sc.name)
		assert.LessOrEqual(t, s.maxSliding, f.maxSliding, "%s: never worse than a fixed window", sc.name)
		switch {
		case strings.HasPrefix(sc.name, "smooth"):
			// A steady load over the quota gets the quota, within 1%, and
			// never more than it in any 60 s.
			assert.InDelta(t, accQ, mean, 1, sc.name)
			assert.LessOrEqual(t, s.maxSliding, accQ+1, sc.name)
		case strings.HasPrefix(sc.name, "bursts of 2Q at both sides"):
			assert.LessOrEqual(t, s.maxSliding, accQ+1, sc.name)
			assert.Equal(t, 2*accQ, f.maxSliding, "the fixed window lets 2Q through in 2 ms")
		}
	}
	t.Log("\n" + out.String())
}

// The same, as benchmarks' metrics, for benchstat-style reports.
func BenchmarkAccuracy(b *testing.B) {
	for _, sc := range accScenarios() {
		b.Run(strings.ReplaceAll(sc.name, " ", "_"), func(b *testing.B) {
			var s accResult
			for b.Loop() {
				s = slidingRun(b, sc.arrivals)
			}
			mean, _, _ := s.windowStats()
			b.ReportMetric(mean/accQ, "allowed/quota")
			b.ReportMetric(float64(s.maxSliding)/accQ, "max-60s/quota")
		})
	}
}

func TestAccuracyScenariosAreSorted(t *testing.T) {
	for _, sc := range accScenarios() {
		for i := 1; i < len(sc.arrivals); i++ {
			require.LessOrEqual(t, sc.arrivals[i-1], sc.arrivals[i], sc.name)
		}
	}
}
