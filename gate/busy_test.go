package gate

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBusyLimits(t *testing.T) {
	cases := []struct {
		workers int
		opts    BusyOptions
		limit   int
	}{
		{2, BusyOptions{}, 1},
		{2, BusyOptions{Fraction: 0.5}, 1},
		{2, BusyOptions{Fraction: 1}, 2},
		{2, BusyOptions{Isolated: true}, 2},
		{16, BusyOptions{}, 8},
		{16, BusyOptions{Fraction: 1}, 16},
		{16, BusyOptions{Isolated: true}, 16},
		{16, BusyOptions{Fraction: 0.25}, 4},
		{16, BusyOptions{Fraction: 0.01}, 1}, // at least 1
		{16, BusyOptions{Fraction: 3}, 16},   // above 1 means 1
		{1, BusyOptions{}, 1},
		{1, BusyOptions{Isolated: true}, 1},
		{3, BusyOptions{}, 1},
		{100, BusyOptions{Fraction: 0.29}, 29}, // no floating-point loss
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d workers %+v", c.workers, c.opts), func(t *testing.T) {
			src := newFakeSource(c.workers, 0)
			g := NewBusy(src, c.opts)
			require.Equal(t, c.limit, g.Limit())
			assert.Equal(t, c.workers, g.NumWorkers())
			for busy := 0; busy <= c.workers; busy++ {
				src.set(busy)
				assert.Equal(t, busy <= c.limit, g.Acquire(), "Acquire at busy %d", busy)
				assert.Equal(t, busy+1 <= c.limit, g.AcquireIdle(), "AcquireIdle at busy %d", busy)
			}
		})
	}
}

// On 2 workers at 0.5 the deciding worker counts itself: a request is
// admitted while the other worker is idle, refused while both are busy.
func TestBusyTwoWorkersHalf(t *testing.T) {
	src := newFakeSource(2, 1) // the deciding worker alone
	g := NewBusy(src, BusyOptions{})
	assert.True(t, g.Acquire(), "the other worker is idle")
	g.Release(0) // a no-op
	src.set(2)
	assert.False(t, g.Acquire(), "both workers busy")
	// From an idle hook nothing counts the caller: one busy worker is
	// already the limit.
	src.set(1)
	assert.False(t, g.AcquireIdle())
	src.set(0)
	assert.True(t, g.AcquireIdle())
	assert.Equal(t, "busy", g.Name())
}

func TestBusySixteenWorkers(t *testing.T) {
	src := newFakeSource(16, 0)
	half := NewBusy(src, BusyOptions{Fraction: 0.5})
	iso := NewBusyIsolated(src)
	src.set(8)
	assert.True(t, half.Acquire())
	assert.True(t, iso.Acquire())
	src.set(9)
	assert.False(t, half.Acquire())
	assert.True(t, iso.Acquire())
	src.set(16)
	assert.True(t, iso.Acquire(), "the deciding worker runs no request")
	assert.False(t, iso.AcquireIdle(), "off the workers: no worker idle")
	src.set(15)
	assert.True(t, iso.AcquireIdle(), "one worker idle")
	full := NewBusy(src, BusyOptions{Fraction: 1})
	src.set(16)
	assert.True(t, full.Acquire(), "fraction 1 never refuses a caller on a worker")
	assert.False(t, full.AcquireIdle())
}

func TestBusySetOptionsLive(t *testing.T) {
	src := newFakeSource(16, 10)
	g := NewBusy(src, BusyOptions{})
	assert.False(t, g.Acquire())
	g.SetOptions(BusyOptions{Fraction: 0.75})
	assert.Equal(t, 12, g.Limit())
	assert.True(t, g.Acquire())
	g.SetOptions(BusyOptions{Isolated: true})
	assert.Equal(t, 16, g.Limit())
}

func TestBusyBadFraction(t *testing.T) {
	src := newFakeSource(2, 0)
	assert.Panics(t, func() { NewBusy(src, BusyOptions{Fraction: -0.1}) })
	assert.Panics(t, func() { NewBusy(src, BusyOptions{Fraction: math.NaN()}) })
}

func TestBusyWakesThroughIdleHook(t *testing.T) {
	src := newFakeSource(2, 2)
	g := NewBusy(src, BusyOptions{})
	require.True(t, g.CanWake())
	fn, n := counter()
	g.OnOpen(fn)
	g.OnOpen(nil) // ignored
	assert.False(t, g.Acquire())
	src.goIdle()
	assert.Equal(t, int64(1), n.Load())
	assert.True(t, g.Acquire())

	plain := NewBusy(plainSource{busy: 0, workers: 4}, BusyOptions{})
	assert.False(t, plain.CanWake())
	plain.OnOpen(fn) // does nothing
	assert.True(t, plain.Acquire())
}
