package bench

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScheduleConstant(t *testing.T) {
	s := newSchedule(Constant, 200, 0)
	for i := range 1000 {
		want := time.Duration(float64(i) / 200 * 1e9)
		require.Equal(t, want, s.next(), "request %d", i)
	}
}

func TestSchedulePoissonMeanGap(t *testing.T) {
	const rate, n = 1000.0, 10000
	s := newSchedule(Poisson, rate, 42)
	var prev, last time.Duration
	var sq float64
	for range n {
		last = s.next()
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
	a, b, c := newSchedule(Poisson, 100, 7), newSchedule(Poisson, 100, 7), newSchedule(Poisson, 100, 8)
	same, differ := true, false
	for range 100 {
		x, y, z := a.next(), b.next(), c.next()
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
