package gate

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
)

func TestBusyLimits(t *testing.T) {
	cases := []struct {
		workers int
		opts    BusyConfig
		limit   int
	}{
		{2, BusyConfig{}, 1},
		{2, BusyConfig{Fraction: 0.5}, 1},
		{2, BusyConfig{Fraction: 1}, 2},
		{16, BusyConfig{}, 8},
		{16, BusyConfig{Fraction: 1}, 16},
		{16, BusyConfig{Fraction: 0.25}, 4},
		{16, BusyConfig{Fraction: 0.01}, 1}, // at least 1
		{16, BusyConfig{Fraction: 3}, 16},   // above 1 means 1
		{1, BusyConfig{}, 1},
		{3, BusyConfig{}, 1},
		{100, BusyConfig{Fraction: 0.29}, 29}, // no floating-point loss
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d workers %+v", c.workers, c.opts), func(t *testing.T) {
			ex := newFakeExecutor(c.workers, 0)
			g := newBusy(t, c.opts)
			assert.Equal(t, 0, g.Limit(), "not attached yet")
			attach(t, g, ex)
			require.Equal(t, c.limit, g.Limit())
			for busy := 0; busy <= c.workers; busy++ {
				ex.set(busy)
				assert.Equal(t, busy <= c.limit, acquire(g), "own at busy %d", busy)
				assert.Equal(t, busy+1 <= c.limit, acquireSpare(g), "spare at busy %d", busy)
			}
		})
	}
}

// On 2 workers at 0.5 the deciding worker counts itself: a request is
// admitted while the other worker is idle, refused while both are busy.
func TestBusyTwoWorkersHalf(t *testing.T) {
	ex := newFakeExecutor(2, 1) // the deciding worker alone
	g := newBusy(t, BusyConfig{})
	attach(t, g, ex)
	assert.True(t, acquire(g), "the other worker is idle")
	release(g, 0) // a no-op
	ex.set(2)
	assert.False(t, acquire(g), "both workers busy")
	assert.Equal(t, "busy", g.Admit(&admit.Attempt{}).Reason)
	// From an idle hook nothing counts the caller: one busy worker is
	// already the limit.
	ex.set(1)
	assert.False(t, acquireSpare(g))
	ex.set(0)
	assert.True(t, acquireSpare(g))
	assert.Equal(t, "busy", g.Name())
}

func TestBusySixteenWorkers(t *testing.T) {
	ex := newFakeExecutor(16, 0)
	half := newBusy(t, BusyConfig{Fraction: 0.5})
	attach(t, half, ex)
	ex.set(8)
	assert.True(t, acquire(half))
	ex.set(9)
	assert.False(t, acquire(half))
	full := newBusy(t, BusyConfig{Fraction: 1})
	attach(t, full, ex)
	ex.set(16)
	assert.True(t, acquire(full), "fraction 1 never refuses a caller on a worker")
	assert.False(t, acquireSpare(full), "no worker idle to start a waiting request")
	ex.set(15)
	assert.True(t, acquireSpare(full), "one worker idle")
}

func TestBusySetConfigLive(t *testing.T) {
	ex := newFakeExecutor(16, 10)
	g := newBusy(t, BusyConfig{})
	attach(t, g, ex)
	assert.False(t, acquire(g))
	require.NoError(t, g.SetConfig(BusyConfig{Fraction: 0.75}))
	assert.Equal(t, 12, g.Limit())
	assert.True(t, acquire(g))
	require.NoError(t, g.SetConfig(BusyConfig{Fraction: 1}))
	assert.Equal(t, 16, g.Limit())
}

// A worker going idle wakes the pipeline for one request; detaching removes
// the idle hook from the executor.
func TestBusyWakesThroughIdleHook(t *testing.T) {
	ex := newFakeExecutor(2, 2)
	g := newBusy(t, BusyConfig{})
	w := &wakes{}
	detach, err := g.Attach(admit.Env{Executor: ex, Wake: w.wake})
	require.NoError(t, err)
	assert.Equal(t, 1, ex.numHooks())
	assert.False(t, acquire(g))
	ex.goIdle()
	assert.Equal(t, []int{1}, w.take())
	assert.True(t, acquire(g))
	detach()
	detach()
	assert.Equal(t, 0, ex.numHooks(), "the executor no longer reaches the pipeline")
	ex.goIdle()
	assert.Empty(t, w.take())
	assert.True(t, acquire(g), "an unattached gate admits")
}

// The busy gate needs the executor, and one executor.
func TestBusyAttachErrors(t *testing.T) {
	g := newBusy(t, BusyConfig{})
	_, err := g.Attach(admit.Env{Wake: func(int) {}})
	assert.ErrorContains(t, err, "outside it")

	a, b := newFakeExecutor(2, 0), newFakeExecutor(4, 0)
	attach(t, g, a)
	attach(t, g, a) // a second server on the same runtime may share it
	_, err = g.Attach(admit.Env{Executor: b, Wake: func(int) {}})
	assert.ErrorContains(t, err, "another executor")
	assert.Equal(t, 1, g.Limit(), "still a's")
}
