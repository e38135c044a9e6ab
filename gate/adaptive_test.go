package gate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loadDriver keeps an Adaptive gate saturated: before each sample it fills
// every free slot, so the in-flight count is at the limit, as under
// overload. Time is only the latencies it reports.
type loadDriver struct {
	a    *Adaptive
	held int
}

// saturate reports samples latencies of lat with the gate kept full.
func (d *loadDriver) saturate(lat time.Duration, samples int) {
	for range samples {
		for acquire(d.a) {
			d.held++
		}
		release(d.a, lat)
		d.held--
	}
}

// trickle reports samples latencies of lat with one request in flight at a
// time: the gate is never what limits the load.
func (d *loadDriver) trickle(lat time.Duration, samples int) {
	for range samples {
		if acquire(d.a) {
			release(d.a, lat)
		}
	}
}

// drain releases what saturate holds, without teaching anything.
func (d *loadDriver) drain() {
	for ; d.held > 0; d.held-- {
		undo(d.a)
	}
}

func TestAdaptiveDefaults(t *testing.T) {
	a := newAdaptive(t, AdaptiveConfig{})
	assert.Equal(t, DefaultAdaptiveInitialLimit, a.Limit())
	assert.Equal(t, "adaptive", a.Name())
	assert.Equal(t, DefaultAdaptiveMinLimit, a.opts.MinLimit)
	assert.Equal(t, DefaultAdaptiveMaxLimit, a.opts.MaxLimit)
	assert.Equal(t, DefaultAdaptiveWindow, a.opts.Window)

	small := newAdaptive(t, AdaptiveConfig{MaxLimit: 2})
	assert.Equal(t, 2, small.Limit(), "the initial limit is clamped")
	assert.Equal(t, 2, small.opts.MinLimit)

}

// Steady latency under saturation grows the limit to its maximum; latency
// that doubles shrinks it; latency back to normal grows it back.
func TestAdaptiveSteadyDoubleRecover(t *testing.T) {
	const w = 10
	a := newAdaptive(t, AdaptiveConfig{InitialLimit: 10, MinLimit: 2, MaxLimit: 60, Window: w})
	d := &loadDriver{a: a}
	base := 10 * time.Millisecond

	d.saturate(base, 40*w)
	grown := a.Limit()
	assert.Greater(t, grown, 10, "flat latency grows the limit")
	d.saturate(base, 400*w)
	assert.Equal(t, 60, a.Limit(), "up to the maximum")
	st := a.Stats()
	assert.Equal(t, base, st.Short)
	assert.InDelta(t, float64(base), float64(st.Long), float64(time.Microsecond))
	assert.Equal(t, int64(440), st.Windows)

	d.saturate(2*base, 20*w)
	shrunk := a.Limit()
	assert.Less(t, shrunk, 30, "doubled latency shrinks the limit")
	t.Logf("limit after 20 windows at 2x latency: %d", shrunk)
	// Every window shrinks it, by at most Smoothing/2 of itself, plus the
	// queue allowance.
	before := a.Limit()
	d.saturate(2*base, w)
	assert.Less(t, a.Limit(), before)
	assert.GreaterOrEqual(t, float64(a.Limit()), 0.9*float64(before)-1)

	d.saturate(base, 30*w)
	assert.Greater(t, a.Limit(), shrunk, "recovering")
	d.saturate(base, 300*w)
	assert.Equal(t, 60, a.Limit(), "recovered")
	d.drain()
	assert.Equal(t, 0, a.InFlight())
}

// A long overload raises the long-term average; when latency falls back the
// baseline follows it down by 10% a window instead of its slow average.
func TestAdaptiveBaselineFollowsRecovery(t *testing.T) {
	const w = 5
	a := newAdaptive(t, AdaptiveConfig{InitialLimit: 10, MinLimit: 2, MaxLimit: 50, Window: w, LongWindow: 10})
	d := &loadDriver{a: a}
	d.saturate(100*time.Millisecond, 50*w)
	require.InDelta(t, float64(100*time.Millisecond), float64(a.Stats().Long), float64(time.Millisecond))
	d.saturate(10*time.Millisecond, 30*w)
	assert.Less(t, a.Stats().Long, 25*time.Millisecond)
	d.drain()
}

// While in-flight requests stay under half the limit the limit does not
// move, whatever the latency says: the gate is not what bounds the load.
func TestAdaptiveAppLimited(t *testing.T) {
	const w = 10
	a := newAdaptive(t, AdaptiveConfig{InitialLimit: 10, MinLimit: 2, MaxLimit: 60, Window: w})
	d := &loadDriver{a: a}
	d.trickle(time.Millisecond, 100*w)
	assert.Equal(t, 10, a.Limit())
	d.trickle(50*time.Millisecond, 100*w)
	assert.Equal(t, 10, a.Limit())
	assert.Equal(t, int64(200), a.Stats().Windows)
}

// Latency that keeps rising drives the limit to its minimum and no lower.
func TestAdaptiveMinLimit(t *testing.T) {
	const w = 4
	a := newAdaptive(t, AdaptiveConfig{InitialLimit: 40, MinLimit: 3, MaxLimit: 60, Window: w, QueueSize: 1})
	d := &loadDriver{a: a}
	lat := time.Millisecond
	for range 200 {
		d.saturate(lat, w)
		lat = lat * 11 / 10
	}
	assert.Equal(t, 3, a.Limit())
	d.drain()
}

func TestAdaptiveSamples(t *testing.T) {
	const w = 4
	a := newAdaptive(t, AdaptiveConfig{Window: w})
	for range 3 * w {
		require.True(t, acquire(a))
		release(a, 0)
		require.True(t, acquire(a))
		undo(a)
	}
	assert.Equal(t, int64(0), a.Stats().Windows, "zero latencies and canceled admissions are not samples")
	for i := range w {
		require.True(t, acquire(a))
		release(a, time.Duration(i+1)*time.Millisecond)
	}
	st := a.Stats()
	assert.Equal(t, int64(1), st.Windows)
	assert.Equal(t, 2500*time.Microsecond, st.Short, "the window's mean")
	// A huge latency counts as MaxAdaptiveSample and does not overflow
	// the packed window.
	for range w {
		require.True(t, acquire(a))
		release(a, time.Hour)
	}
	assert.Equal(t, MaxAdaptiveSample, a.Stats().Short)
	assert.PanicsWithValue(t, "gate: Done without Admit", func() { release(a, time.Millisecond) })
}

func TestAdaptiveWakes(t *testing.T) {
	const w = 2
	a := newAdaptive(t, AdaptiveConfig{InitialLimit: 2, MinLimit: 1, MaxLimit: 10, Window: w, QueueSize: 5})
	wk := attach(t, a, nil)
	require.True(t, acquire(a))
	require.True(t, acquire(a))
	require.False(t, acquire(a))
	undo(a)
	require.True(t, acquire(a))
	// The second Done completes a window with the gate full: the limit
	// rises (gradient 1, queue 5), which wakes the pipeline for the
	// difference.
	release(a, time.Millisecond)
	assert.Empty(t, wk.take())
	release(a, time.Millisecond)
	require.Greater(t, a.Limit(), 2)
	assert.Equal(t, []int{a.Limit() - 2}, wk.take())
}

func TestAdaptiveHammer(t *testing.T) {
	a := newAdaptive(t, AdaptiveConfig{InitialLimit: 4, MinLimit: 2, MaxLimit: 6, Window: 16})
	peak := hammer(a, 8, 3000)
	assert.LessOrEqual(t, peak, int64(6))
	assert.Equal(t, 0, a.InFlight())
	st := a.Stats()
	assert.Positive(t, st.Windows)
	assert.GreaterOrEqual(t, st.Limit, 2)
	assert.LessOrEqual(t, st.Limit, 6)
}
