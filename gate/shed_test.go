package gate

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
)

// fakeNow is a clock that moves only when told.
type fakeNow struct{ t atomic.Int64 }

func (c *fakeNow) now() int64              { return c.t.Load() }
func (c *fakeNow) advance(d time.Duration) { c.t.Add(int64(d)) }

// ladder returns a Rand that walks the midpoints of n equal steps of the
// 64-bit range, over and over: of n decisions at drop probability p it
// refuses exactly round(p × n).
func ladder(n uint64) func() uint64 {
	step := math.MaxUint64 / n
	var k atomic.Uint64
	return func() uint64 { return (k.Add(1)-1)%n*step + step/2 }
}

// shedRefusals counts the refusals of n decisions, giving every admission
// back unrun (Done with Canceled), so that a concurrency shedder's count
// and a window stay as they were.
func shedRefusals(g admit.Policy, n int) int {
	r := 0
	for range n {
		if acquire(g) {
			undo(g)
		} else {
			r++
		}
	}
	return r
}

// outcomes ends n requests with the given outcome on s, each admitted
// first (a shedder may refuse: then the outcome is fed as if admitted, as
// the test scripts the metric, not the decisions).
func outcomes(s *Shed, n int, o admit.Outcome) {
	for range n {
		s.Done(&admit.Attempt{}, o)
	}
}

func lat(d time.Duration) admit.Outcome { return admit.Outcome{Latency: d, Status: 200} }

func TestShedBand(t *testing.T) {
	for _, c := range []struct{ v, lo, hi, p float64 }{
		{0, 0.6, 0.8, 0}, {0.6, 0.6, 0.8, 0}, {0.7, 0.6, 0.8, 0.5}, {0.8, 0.6, 0.8, 1}, {2, 0.6, 0.8, 1},
		{5, 5, 5, 0}, {5.01, 5, 5, 1}, {-1, 0, 1, 0},
	} {
		assert.InDelta(t, c.p, band(c.v, c.lo, c.hi), 1e-12, "%+v", c)
	}
	assert.Zero(t, dropThreshold(0))
	assert.Zero(t, dropThreshold(-1))
	assert.Equal(t, uint64(math.MaxUint64), dropThreshold(1))
	assert.Equal(t, uint64(1)<<63, dropThreshold(0.5))
}

// Every signal, scripted to the middle of its band or thereabouts: the drop
// probability is the band's, and n decisions refuse round(p × n) of them.
func TestShedProbabilityPerSignal(t *testing.T) {
	const n = 1000
	type signal struct {
		name   string
		policy func(t *testing.T) (admit.Policy, func() float64) // the policy, scripted; its Reject
		want   float64
	}
	var clock fakeNow
	common := ShedOptions{Interval: Manual, Clock: clock.now}
	shed := func(s *Shed, err error) *Shed {
		require.NoError(t, err)
		s.rnd = ladder(n)
		return s
	}
	p95 := band(histValue(histIndex(int64(700*time.Millisecond))), float64(DefaultShedLatencyLower), float64(DefaultShedLatencyUpper))
	signals := []signal{
		{"mean latency", func(t *testing.T) (admit.Policy, func() float64) {
			s := shed(NewLatencyShed(LatencyShedOptions{ShedOptions: common}))
			outcomes(s, 10, lat(400*time.Millisecond))
			outcomes(s, 10, lat(800*time.Millisecond))
			st := s.Refresh()
			assert.Equal(t, 600*time.Millisecond, st.Latency)
			assert.Equal(t, 20, st.Samples)
			return s, func() float64 { return st.Reject }
		}, 0.5},
		{"95th percentile latency", func(t *testing.T) (admit.Policy, func() float64) {
			s := shed(NewLatencyShed(LatencyShedOptions{Percentile: 0.95, ShedOptions: common}))
			outcomes(s, 90, lat(10*time.Millisecond))
			outcomes(s, 10, lat(700*time.Millisecond))
			st := s.Refresh()
			assert.InEpsilon(t, 700*time.Millisecond, st.Latency, 0.0625, "within a bin's precision")
			return s, func() float64 { return st.Reject }
		}, p95},
		{"error rate", func(t *testing.T) (admit.Policy, func() float64) {
			s := shed(NewErrorRateShed(ErrorRateShedOptions{ShedOptions: common}))
			outcomes(s, 30, admit.Outcome{Status: 200})
			outcomes(s, 10, admit.Outcome{Status: 404}) // a client's error: not the server's
			outcomes(s, 20, admit.Outcome{Status: 503})
			outcomes(s, 20, admit.Outcome{Status: 500})
			outcomes(s, 20, admit.Outcome{Err: errors.New("panic")})
			st := s.Refresh()
			assert.InDelta(t, 0.6, st.ErrorRate, 1e-12)
			return s, func() float64 { return st.Reject }
		}, 0.5},
		{"error rate, status list", func(t *testing.T) (admit.Policy, func() float64) {
			opts := ErrorRateShedOptions{Lower: 0.1, Upper: 0.5, ShedOptions: common,
				Failed: func(o admit.Outcome) bool { return o.Status == 429 || o.Status == 502 }}
			s := shed(NewErrorRateShed(opts))
			outcomes(s, 60, admit.Outcome{Status: 500})
			outcomes(s, 10, admit.Outcome{Status: 429})
			outcomes(s, 10, admit.Outcome{Status: 502})
			outcomes(s, 20, admit.Outcome{Status: 200})
			st := s.Refresh()
			return s, func() float64 { return st.Reject }
		}, 0.25},
		{"concurrency", func(t *testing.T) (admit.Policy, func() float64) {
			s := shed(NewConcurrencyShed(ConcurrencyShedOptions{Lower: 10, Upper: 20, ShedOptions: common}))
			s.inflight.Store(15)
			assert.Equal(t, 15, s.Stats().InFlight)
			return s, func() float64 { return s.Stats().Reject }
		}, 0.5},
		{"custom, a probability", func(t *testing.T) (admit.Policy, func() float64) {
			s := shed(NewCustomShed(CustomShedOptions{Value: func() float64 { return 0.25 }, ShedOptions: common}))
			st := s.Refresh()
			assert.Equal(t, 0.25, st.Value)
			return s, func() float64 { return st.Reject }
		}, 0.25},
		{"custom, a band", func(t *testing.T) (admit.Policy, func() float64) {
			s := shed(NewCustomShed(CustomShedOptions{Value: func() float64 { return 25 }, Lower: 10, Upper: 30, ShedOptions: common}))
			st := s.Refresh()
			return s, func() float64 { return st.Reject }
		}, 0.75},
		{"cpu", func(t *testing.T) (admit.Policy, func() float64) {
			stat := newFakeStat(t)
			c := newCPU(t, CPUConfig{Root: stat.root(), Interval: Manual, Window: 1, Rand: ladder(n)})
			stat.advance(0.7) // 70% busy: the middle of the default 60% to 80%
			st := c.Refresh()
			return c, func() float64 { return st.Reject }
		}, 0.5},
	}
	for _, sg := range signals {
		t.Run(sg.name, func(t *testing.T) {
			g, reject := sg.policy(t)
			assert.InDelta(t, sg.want, reject(), 1e-9)
			assert.Equal(t, int(math.Round(sg.want*n)), shedRefusals(g, n))
		})
	}
}

// Below, across and above the band, for a latency shedder: nothing, a
// linear share, everything.
func TestShedLatencyBand(t *testing.T) {
	var clock fakeNow
	s, err := NewLatencyShed(LatencyShedOptions{Lower: 100 * time.Millisecond, Upper: 300 * time.Millisecond,
		Window: ShedWindow{MinSamples: 1}, ShedOptions: ShedOptions{Interval: Manual, Clock: clock.now, Rand: ladder(100)}})
	require.NoError(t, err)
	for _, c := range []struct {
		latency time.Duration
		p       float64
	}{{50 * time.Millisecond, 0}, {100 * time.Millisecond, 0}, {150 * time.Millisecond, 0.25}, {250 * time.Millisecond, 0.75}, {300 * time.Millisecond, 1}, {time.Minute, 1}} {
		clock.advance(DefaultShedWindow) // the previous outcomes leave the window
		outcomes(s, 1, lat(c.latency))
		st := s.Refresh()
		assert.Equal(t, c.latency, st.Latency)
		assert.InDelta(t, c.p, st.Reject, 1e-12, "%v", c.latency)
		assert.Equal(t, int(math.Round(c.p*100)), shedRefusals(s, 100), "%v", c.latency)
	}
}

// The window rolls: outcomes count for Length, bucket by bucket, and too
// few of them count for nothing.
func TestShedWindowRolls(t *testing.T) {
	var clock fakeNow
	s, err := NewErrorRateShed(ErrorRateShedOptions{Lower: 0, Upper: 1,
		Window:      ShedWindow{Length: 4 * time.Second, Buckets: 4, MinSamples: 10},
		ShedOptions: ShedOptions{Interval: Manual, Clock: clock.now}})
	require.NoError(t, err)
	fail, ok := admit.Outcome{Status: 500}, admit.Outcome{Status: 200}

	outcomes(s, 9, fail)
	st := s.Refresh()
	assert.Equal(t, ShedStats{Samples: 9}, st, "9 < MinSamples: no reading, nothing shed")
	outcomes(s, 1, fail)
	st = s.Refresh()
	assert.True(t, st.Ready)
	assert.Equal(t, 1.0, st.ErrorRate)
	assert.Equal(t, 1.0, st.Reject)
	assert.False(t, acquire(s), "everything refused")

	clock.advance(time.Second) // second bucket
	outcomes(s, 10, ok)
	st = s.Refresh()
	assert.Equal(t, 20, st.Samples)
	assert.InDelta(t, 0.5, st.ErrorRate, 1e-12)

	clock.advance(2 * time.Second) // fourth bucket: the first is still in
	outcomes(s, 20, ok)
	assert.InDelta(t, 0.25, s.Refresh().ErrorRate, 1e-12)

	clock.advance(time.Second) // fifth: the first bucket, its failures, have left
	st = s.Refresh()
	assert.Equal(t, 30, st.Samples)
	assert.Zero(t, st.ErrorRate)
	assert.Zero(t, st.Reject)

	clock.advance(2 * time.Second) // only the fourth bucket's 20 remain
	assert.Equal(t, 20, s.Refresh().Samples)
	clock.advance(time.Second)
	assert.Equal(t, ShedStats{}, s.Refresh(), "all gone")
}

// A shedder that refuses everything gets no outcome, so its decisions move
// the window on: once the outcomes that closed it are out, it admits again.
// The probability is recomputed at most once per Interval, by a decision
// or an outcome, never in the background.
func TestShedReopensByItsDecisions(t *testing.T) {
	var clock fakeNow
	s, err := NewLatencyShed(LatencyShedOptions{
		Window:      ShedWindow{Length: 2 * time.Second, Buckets: 2, MinSamples: 1},
		ShedOptions: ShedOptions{Interval: 100 * time.Millisecond, Clock: clock.now},
	})
	require.NoError(t, err)
	assert.True(t, acquire(s))
	outcomes(s, 5, lat(3*time.Second)) // above Upper; the first Done, at 0, refreshed
	st := s.Stats()
	assert.Equal(t, 1, st.Samples, "the refresh came with the first outcome")
	assert.Equal(t, 1.0, st.Reject)
	assert.False(t, acquire(s))

	clock.advance(99 * time.Millisecond)
	outcomes(s, 5, lat(time.Millisecond))
	assert.Equal(t, 1, s.Stats().Samples, "not due yet: the last refresh stands")
	clock.advance(time.Millisecond)
	assert.False(t, acquire(s), "the decision refreshed: the mean is still above Upper")
	st = s.Stats()
	assert.Equal(t, 10, st.Samples)
	assert.Equal(t, 1.5*float64(time.Second)+0.5*float64(time.Millisecond), float64(st.Latency))
	assert.Equal(t, 1.0, st.Reject)

	clock.advance(2 * time.Second) // no outcome meanwhile: the window is empty
	assert.True(t, acquire(s), "the decision found the window empty")
	assert.Equal(t, ShedStats{}, s.Stats())
}

func TestShedCustomReadAtMostOncePerInterval(t *testing.T) {
	var clock fakeNow
	var calls atomic.Int64
	v := 0.0
	s, err := NewCustomShed(CustomShedOptions{
		Value:       func() float64 { calls.Add(1); return v },
		ShedOptions: ShedOptions{Interval: time.Second, Clock: clock.now},
	})
	require.NoError(t, err)
	for range 100 {
		assert.True(t, acquire(s))
	}
	assert.Equal(t, int64(1), calls.Load(), "the first decision read it; the others within the second did not")
	v = 1
	clock.advance(time.Second)
	assert.False(t, acquire(s))
	assert.Equal(t, int64(2), calls.Load())
	v = math.NaN()
	clock.advance(time.Second)
	assert.True(t, acquire(s), "NaN: no reading, nothing shed")
	assert.False(t, s.Stats().Ready)
}

func TestShedConcurrencyCounts(t *testing.T) {
	s, err := NewConcurrencyShed(ConcurrencyShedOptions{Lower: 1, Upper: 2})
	require.NoError(t, err)
	assert.Equal(t, "shed-concurrency", s.Name())
	assert.True(t, acquire(s), "none in flight")
	assert.True(t, acquire(s), "one, at Lower")
	assert.False(t, acquire(s), "two, at Upper: refused")
	undo(s) // a canceled admission gives its place back
	assert.Equal(t, 1, s.Stats().InFlight)
	assert.True(t, acquire(s))
	release(s, time.Millisecond)
	release(s, time.Millisecond)
	assert.Equal(t, 0, s.Stats().InFlight)
	assert.Panics(t, func() { release(s, 0) }, "Done without Admit")
	assert.Equal(t, 0, s.Stats().InFlight)
}

// Outcomes of admissions that never ran teach nothing.
func TestShedIgnoresCanceled(t *testing.T) {
	var clock fakeNow
	s, err := NewErrorRateShed(ErrorRateShedOptions{Window: ShedWindow{MinSamples: 1}, ShedOptions: ShedOptions{Interval: Manual, Clock: clock.now}})
	require.NoError(t, err)
	outcomes(s, 10, admit.Outcome{Canceled: true})
	assert.Equal(t, ShedStats{}, s.Refresh())
}

// The zero options work and take loadshed's example thresholds.
func TestShedDefaults(t *testing.T) {
	var clock fakeNow
	manual := ShedOptions{Interval: Manual, Clock: clock.now}
	l, err := NewLatencyShed(LatencyShedOptions{ShedOptions: manual})
	require.NoError(t, err)
	outcomes(l, DefaultShedMinSamples-1, lat(time.Second))
	assert.False(t, l.Refresh().Ready, "MinSamples defaults to 20")
	outcomes(l, 1, lat(time.Second))
	assert.Equal(t, 1.0, l.Refresh().Reject, "1 s is the default Upper")
	clock.advance(DefaultShedWindow - time.Nanosecond)
	assert.Equal(t, 1.0, l.Refresh().Reject, "still within the 10 s window")
	clock.advance(time.Nanosecond)
	assert.False(t, l.Refresh().Ready, "out of it")
	outcomes(l, 20, lat(600*time.Millisecond))
	assert.InDelta(t, 0.5, l.Refresh().Reject, 1e-12, "200 ms to 1 s")
	assert.Equal(t, "shed-latency", l.Name())

	e, err := NewErrorRateShed(ErrorRateShedOptions{ShedOptions: manual})
	require.NoError(t, err)
	outcomes(e, 20, admit.Outcome{Status: 500})
	outcomes(e, 20, admit.Outcome{Status: 200})
	assert.InDelta(t, (0.5-0.2)/0.8, e.Refresh().Reject, 1e-12, "20% to 100%")
	assert.Equal(t, "shed-errors", e.Name())

	c, err := NewConcurrencyShed(ConcurrencyShedOptions{})
	require.NoError(t, err)
	for range DefaultShedConcurrencyLower {
		require.True(t, acquire(c))
	}
	assert.Zero(t, c.Stats().Reject, "2500 in flight: the band starts above")
	require.True(t, acquire(c))
	assert.InDelta(t, 1.0/2500, c.Stats().Reject, 1e-12)

	u, err := NewCustomShed(CustomShedOptions{Value: func() float64 { return 0.3 }, ShedOptions: manual})
	require.NoError(t, err)
	assert.Equal(t, 0.3, u.Refresh().Reject, "the value is the probability")
	assert.Equal(t, "shed-custom", u.Name())
}

// A shedder's refusal names it and carries its Retry-After; zero leaves
// the pipeline's (1 s), which the rejection always has.
func TestShedRefusal(t *testing.T) {
	s, err := NewCustomShed(CustomShedOptions{Value: func() float64 { return 1 }})
	require.NoError(t, err)
	r := s.Admit(&admit.Attempt{})
	require.NotNil(t, r)
	assert.Equal(t, admit.Refusal{Reason: "shed-custom"}, *r)
	assert.Same(t, r, s.Admit(&admit.Attempt{}), "built once")

	s, err = NewCustomShed(CustomShedOptions{Value: func() float64 { return 1 }, ShedOptions: ShedOptions{Name: "overloaded", RetryAfter: 5 * time.Second}})
	require.NoError(t, err)
	assert.Equal(t, admit.Refusal{Reason: "overloaded", RetryAfter: 5 * time.Second}, *s.Admit(&admit.Attempt{}))
}

func TestShedRejectsBadOptions(t *testing.T) {
	one := func() float64 { return 0 }
	for _, c := range []struct {
		name string
		err  func() error
		want []string
	}{
		{"percentile as loadshed's", func() error { _, err := NewLatencyShed(LatencyShedOptions{Percentile: 95}); return err },
			[]string{"gate: NewLatencyShed: LatencyShedOptions.Percentile is 95", "such as 0.95", "(loadshed's 95 is 0.95)"}},
		{"percentile of 1", func() error { _, err := NewLatencyShed(LatencyShedOptions{Percentile: 1}); return err },
			[]string{"Percentile is 1: use a fraction in (0, 1)"}},
		{"negative latency", func() error {
			_, err := NewLatencyShed(LatencyShedOptions{Lower: -time.Second, Upper: time.Second})
			return err
		}, []string{"LatencyShedOptions.Lower is -1s"}},
		{"upper missing", func() error { _, err := NewLatencyShed(LatencyShedOptions{Lower: 300 * time.Millisecond}); return err },
			[]string{"LatencyShedOptions.Upper is 0s, below Lower 300ms", "or both to zero for 200ms and 1s"}},
		{"error rate in percent", func() error { _, err := NewErrorRateShed(ErrorRateShedOptions{Lower: 20, Upper: 100}); return err },
			[]string{"ErrorRateShedOptions.Lower is 20: use a fraction in [0, 1], not a percentage (20% is 0.2)", "ErrorRateShedOptions.Upper is 100", "(100% is 1)"}},
		{"error rate out of order", func() error { _, err := NewErrorRateShed(ErrorRateShedOptions{Lower: 0.5, Upper: 0.1}); return err },
			[]string{"ErrorRateShedOptions.Upper is 0.1, below Lower 0.5"}},
		{"error rate NaN", func() error { _, err := NewErrorRateShed(ErrorRateShedOptions{Lower: math.NaN()}); return err },
			[]string{"ErrorRateShedOptions.Lower is NaN"}},
		{"window", func() error {
			_, err := NewErrorRateShed(ErrorRateShedOptions{Window: ShedWindow{Length: -1, MinSamples: -2}})
			return err
		}, []string{"ErrorRateShedOptions.Window.Length is -1ns", "ErrorRateShedOptions.Window.MinSamples is -2: use 1 or more"}},
		{"buckets", func() error {
			_, err := NewLatencyShed(LatencyShedOptions{Window: ShedWindow{Buckets: MaxShedBuckets + 1}})
			return err
		},
			[]string{"Window.Buckets is 3601: use 1 to 3600"}},
		{"buckets below 1 ns", func() error {
			_, err := NewLatencyShed(LatencyShedOptions{Window: ShedWindow{Length: 5, Buckets: 10}})
			return err
		}, []string{"Window.Length 5ns is shorter than its 10 buckets"}},
		{"interval", func() error {
			_, err := NewLatencyShed(LatencyShedOptions{ShedOptions: ShedOptions{Interval: -5}})
			return err
		},
			[]string{"LatencyShedOptions.Interval is -5ns: use a positive duration, zero for 100ms, or gate.Manual"}},
		{"concurrency", func() error { _, err := NewConcurrencyShed(ConcurrencyShedOptions{Lower: 10, Upper: 5}); return err },
			[]string{"gate: NewConcurrencyShed: ConcurrencyShedOptions.Upper is 5, below Lower 10"}},
		{"concurrency negative", func() error { _, err := NewConcurrencyShed(ConcurrencyShedOptions{Lower: -1, Upper: 5}); return err },
			[]string{"ConcurrencyShedOptions.Lower is -1"}},
		{"custom without value", func() error { _, err := NewCustomShed(CustomShedOptions{}); return err },
			[]string{"gate: NewCustomShed: CustomShedOptions.Value is nil"}},
		{"custom band", func() error {
			_, err := NewCustomShed(CustomShedOptions{Value: one, Lower: 1, Upper: math.Inf(1)})
			return err
		}, []string{"CustomShedOptions.Lower and Upper are 1 and +Inf"}},
	} {
		err := c.err()
		require.Error(t, err, c.name)
		for _, w := range c.want {
			assert.Contains(t, err.Error(), w, c.name)
		}
	}
}

func TestHistogram(t *testing.T) {
	prev := -1
	for v := int64(0); v < 1<<42; v = v*9/8 + 1 {
		i := histIndex(v)
		require.GreaterOrEqual(t, i, prev, "monotonic at %d", v)
		require.Less(t, i, histBins)
		prev = i
		if v < 1<<(histMaxExp+1) {
			assert.InEpsilon(t, float64(max(v, 1)), max(histValue(i), 1), 0.0625, "%d in bin %d", v, i)
		}
	}
	assert.Equal(t, histBins-1, histIndex(math.MaxInt64))
	assert.Equal(t, 0, histIndex(-5))
	for i := 1; i < histBins; i++ {
		require.Greater(t, histValue(i), histValue(i-1))
		require.Equal(t, i, histIndex(int64(histValue(i))), "a bin's midpoint is in it")
	}
	bins := make([]uint64, histBins)
	bins[histIndex(10)] = 50
	bins[histIndex(1000)] = 49
	bins[histIndex(1e6)] = 1
	assert.Equal(t, histValue(histIndex(10)), quantile(bins, 100, 0.5))
	assert.Equal(t, histValue(histIndex(1000)), quantile(bins, 100, 0.51))
	assert.Equal(t, histValue(histIndex(1000)), quantile(bins, 100, 0.99))
	assert.Equal(t, histValue(histIndex(1e6)), quantile(bins, 100, 0.999))
	assert.True(t, math.IsNaN(quantile(bins, 0, 0.5)))
}

// A clock before its origin, and periods that wrap the ring.
func TestShedWindowNegativeClock(t *testing.T) {
	w := newShedWindow(10, 3, false)
	w.add(-25, 1, true)
	w.add(-21, 1, false)
	w.add(-1, 1, false)
	assert.Equal(t, shedTotals{n: 2, errs: 1, sum: 2}, w.totals(-21, nil), "period -3")
	assert.Equal(t, shedTotals{n: 3, errs: 1, sum: 3}, w.totals(-1, nil), "periods -3 to -1")
	assert.Equal(t, shedTotals{n: 1, sum: 1}, w.totals(0, nil), "periods -2 to 0")
	assert.Equal(t, shedTotals{}, w.totals(20, nil))
}

// Decisions and outcomes from many goroutines at once, on the real clock
// (for the race detector); the counts still add up.
func TestShedConcurrentUse(t *testing.T) {
	lat, err := NewLatencyShed(LatencyShedOptions{Percentile: 0.99, Window: ShedWindow{Length: 50 * time.Millisecond, Buckets: 5, MinSamples: 1},
		ShedOptions: ShedOptions{Interval: time.Millisecond}})
	require.NoError(t, err)
	errs, err := NewErrorRateShed(ErrorRateShedOptions{ShedOptions: ShedOptions{Interval: time.Millisecond}})
	require.NoError(t, err)
	conc, err := NewConcurrencyShed(ConcurrencyShedOptions{Lower: 4, Upper: 16})
	require.NoError(t, err)
	var v atomic.Int64
	custom, err := NewCustomShed(CustomShedOptions{Value: func() float64 { return float64(v.Add(1)%3) / 4 }, ShedOptions: ShedOptions{Interval: time.Microsecond}})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				for _, s := range []*Shed{lat, errs, conc, custom} {
					if s.Admit(&admit.Attempt{}) == nil {
						s.Done(&admit.Attempt{}, admit.Outcome{Latency: time.Duration(i%500) * time.Millisecond, Status: 200 + 300*((g+i)%2)})
					}
				}
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, conc.Stats().InFlight)
	for _, s := range []*Shed{lat, errs, custom} {
		st := s.Refresh()
		assert.GreaterOrEqual(t, st.Reject, 0.0)
		assert.LessOrEqual(t, st.Reject, 1.0)
	}
}

func TestShedAllocatesNothing(t *testing.T) {
	var clock fakeNow
	lat, _ := NewLatencyShed(LatencyShedOptions{Percentile: 0.9, ShedOptions: ShedOptions{Clock: clock.now, Interval: time.Nanosecond}})
	errs, _ := NewErrorRateShed(ErrorRateShedOptions{ShedOptions: ShedOptions{Clock: clock.now}})
	conc, _ := NewConcurrencyShed(ConcurrencyShedOptions{})
	custom, _ := NewCustomShed(CustomShedOptions{Value: func() float64 { return 0.5 }, ShedOptions: ShedOptions{Clock: clock.now}})
	a := &admit.Attempt{}
	for _, s := range []*Shed{lat, errs, conc, custom} {
		allocs := testing.AllocsPerRun(1000, func() {
			clock.advance(time.Millisecond)
			if s.Admit(a) == nil {
				s.Done(a, admit.Outcome{Latency: time.Millisecond, Status: 200})
			}
		})
		assert.Zero(t, allocs, s.Name())
	}
}

// Why the busy gate reacts faster than loadshed's CPU option, on scripted
// readings: a server at 35% of its CPU steps to 100% (every worker busy),
// then, ten seconds later, down to 10%. The busy count closes the gate at
// the next decision and opens it at the next one after the step down. The
// CPU gate with loadshed's settings (a reading a second, averaged over 10)
// sheds nothing for 3 s, not everything until 7 s, and goes on shedding,
// everything for 2 s more, for 4 s after the load has fallen.
func TestCPULagsAStep(t *testing.T) {
	ex := newFakeExecutor(4, 1)
	busy := newBusy(t, BusyConfig{}) // limit 2 of 4 workers
	attach(t, busy, ex)
	stat := newFakeStat(t)
	cpu := newCPU(t, CPUConfig{Root: stat.root(), Interval: Manual}) // 0.6 to 0.8, 10 readings
	for range 10 {
		stat.advance(0.35)
		require.Zero(t, cpu.Refresh().Reject)
	}
	assert.True(t, acquire(busy))
	release(busy, 0)

	ex.set(4) // the step up: every worker busy
	assert.False(t, acquire(busy), "the busy gate: at the next decision")
	var rejects []float64
	for range 10 { // ten seconds of overload, a reading a second
		stat.advance(1)
		rejects = append(rejects, math.Round(cpu.Refresh().Reject*100)/100)
	}
	assert.Equal(t, []float64{0, 0, 0, 0.05, 0.38, 0.7, 1, 1, 1, 1}, rejects,
		"the CPU gate: the 10 s average crosses 0.6 in the 4th second and 0.8 in the 7th")

	ex.set(1) // the step down
	assert.True(t, acquire(busy), "the busy gate: open at the next decision")
	release(busy, 0)
	rejects = rejects[:0]
	for range 6 {
		stat.advance(0.1)
		rejects = append(rejects, math.Round(cpu.Refresh().Reject*100)/100)
	}
	assert.Equal(t, []float64{1, 1, 0.65, 0.2, 0, 0}, rejects,
		"the CPU gate refuses all for 2 s more, and some for 4 s")
}
