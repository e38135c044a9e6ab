//go:build linux

package load

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScheduleConstant(t *testing.T) {
	s := newSchedule(Constant, []Phase{{Rate: 200, Duration: 5 * time.Second}}, 0)
	for i := range 1000 {
		want := time.Duration(float64(i) / 200 * 1e9)
		off, ok := s.next()
		require.True(t, ok, "request %d", i)
		require.Equal(t, want, off, "request %d", i)
	}
	_, ok := s.next()
	assert.False(t, ok, "i/200 < 5 s for i in [0, 1000)")
	_, ok = s.next()
	assert.False(t, ok, "the end is final")
}

// offsets runs s to its end.
func offsets(s *schedule) []time.Duration {
	var out []time.Duration
	for {
		off, ok := s.next()
		if !ok {
			return out
		}
		out = append(out, off)
	}
}

func TestScheduleConstantPhases(t *testing.T) {
	ms := time.Millisecond
	s := newSchedule(Constant, []Phase{
		{Rate: 10, Duration: time.Second},
		{Rate: 100, Duration: 100 * ms},
		{Rate: 3, Duration: time.Second},
		{Rate: 1, Duration: 2 * time.Second},
	}, 0)
	var want []time.Duration
	for i := range 10 {
		want = append(want, time.Duration(i)*100*ms)
	}
	for i := range 10 {
		want = append(want, time.Second+time.Duration(i)*10*ms)
	}
	// Each phase starts with a send at its boundary, at the exact sum of
	// the durations before it.
	third, rate := 1100*ms, 3.0
	want = append(want, third, third+time.Duration(1/rate*1e9), third+time.Duration(2/rate*1e9))
	want = append(want, 2100*ms, 3100*ms)
	assert.Equal(t, want, offsets(s))
}

// A gap drawn at a low rate that would cross into a high-rate phase is
// dropped, and the draw starts over at the boundary: the first send comes
// right after it, not a mean low-rate gap later.
func TestSchedulePoissonRestartsAtBoundary(t *testing.T) {
	for seed := range uint64(20) {
		s := newSchedule(Poisson, []Phase{
			{Rate: 1e-3, Duration: time.Second},
			{Rate: 1000, Duration: time.Second},
		}, seed)
		first, ok := s.next()
		require.True(t, ok)
		// P(gap > 100 ms at 1000/s) = e^-100; P(a send in the first
		// second at 0.001/s) = 1e-3 per seed.
		assert.GreaterOrEqual(t, first, time.Second, "seed %d", seed)
		assert.Less(t, first, 1100*time.Millisecond, "seed %d", seed)
	}
}

func TestSchedulePoissonPhases(t *testing.T) {
	phases := []Phase{
		{Rate: 1000, Duration: 2 * time.Second},
		{Rate: 100, Duration: 2 * time.Second},
		{Rate: 5000, Duration: time.Second},
	}
	offs := offsets(newSchedule(Poisson, phases, 3))
	var counts [3]float64
	for i, off := range offs {
		if i > 0 {
			require.Greater(t, off, offs[i-1], "offsets increase")
		}
		switch {
		case off < 2*time.Second:
			counts[0]++
		case off < 4*time.Second:
			counts[1]++
		case off < 5*time.Second:
			counts[2]++
		default:
			t.Fatalf("send at %v, after the profile", off)
		}
	}
	// Five standard deviations (sqrt of the mean) around each mean.
	for i, want := range []float64{2000, 200, 5000} {
		assert.InDelta(t, want, counts[i], 5*math.Sqrt(want), "phase %d", i)
	}
}

func TestSchedulePoissonMeanGap(t *testing.T) {
	const rate, n = 1000.0, 10000
	s := newSchedule(Poisson, []Phase{{Rate: rate, Duration: time.Hour}}, 42)
	var prev, last time.Duration
	var sq float64
	for range n {
		last, _ = s.next()
		gap := (last - prev).Seconds()
		require.Greater(t, gap, 0.0, "gaps are positive and offsets increase")
		sq += gap * gap
		prev = last
	}
	mean := last.Seconds() / n
	assert.InEpsilon(t, 1/rate, mean, 0.10, "mean gap")
	// Exponential gaps: standard deviation equals the mean.
	sd := math.Sqrt(sq/n - mean*mean)
	assert.InEpsilon(t, 1/rate, sd, 0.10, "standard deviation of the gaps")
}

func TestSchedulePoissonSeeded(t *testing.T) {
	ph := []Phase{{Rate: 100, Duration: time.Hour}, {Rate: 50, Duration: time.Hour}}
	a, b, c := newSchedule(Poisson, ph, 7), newSchedule(Poisson, ph, 7), newSchedule(Poisson, ph, 8)
	same, differ := true, false
	for range 100 {
		x, _ := a.next()
		y, _ := b.next()
		z, _ := c.next()
		same = same && x == y
		differ = differ || x != z
	}
	assert.True(t, same, "same seed, same schedule")
	assert.True(t, differ, "another seed, another schedule")
}

func TestLagTracker(t *testing.T) {
	l := lagTracker{limit: 10 * time.Millisecond}
	for _, d := range []time.Duration{0, time.Millisecond, 10 * time.Millisecond, -time.Millisecond} {
		l.observe(d)
	}
	assert.Equal(t, int64(0), l.late, "at the limit is not late")
	assert.Equal(t, 10*time.Millisecond, l.max)
	l.observe(11 * time.Millisecond)
	l.observe(30 * time.Millisecond)
	l.observe(2 * time.Millisecond)
	assert.Equal(t, int64(2), l.late)
	assert.Equal(t, 30*time.Millisecond, l.max)
}
