package gate

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
)

func TestConcurrencyFixed(t *testing.T) {
	c := newConcurrency(t, 2)
	assert.Equal(t, "concurrency", c.Name())
	assert.True(t, acquire(c))
	assert.True(t, acquire(c))
	assert.False(t, acquire(c))
	assert.Equal(t, 2, c.InFlight())
	release(c, time.Millisecond)
	assert.True(t, acquire(c))
	assert.False(t, acquire(c))
	release(c, 0)
	release(c, 0)
	assert.Equal(t, 0, c.InFlight())

	zero := newConcurrency(t, 0)
	assert.False(t, acquire(zero), "a limit of 0 refuses everything")
}

// Lowering the limit below the in-flight count revokes nothing: the excess
// is repaid as requests end, and nothing is admitted until the count is
// under the new limit.
func TestConcurrencyLowerBelowInFlight(t *testing.T) {
	c := newConcurrency(t, 5)
	for range 5 {
		require.True(t, acquire(c))
	}
	require.NoError(t, c.SetLimit(2))
	assert.Equal(t, 2, c.Limit())
	assert.Equal(t, 5, c.InFlight())
	for _, want := range []int{4, 3, 2} {
		assert.False(t, acquire(c))
		release(c, time.Millisecond)
		assert.Equal(t, want, c.InFlight())
	}
	assert.False(t, acquire(c), "2 in flight at limit 2")
	release(c, time.Millisecond)
	assert.True(t, acquire(c))
	assert.False(t, acquire(c))
	release(c, time.Millisecond)
	release(c, time.Millisecond)
	assert.Equal(t, 0, c.InFlight())
	assert.PanicsWithValue(t, "gate: Done without Admit", func() { release(c, 0) })
	assert.Equal(t, 0, c.InFlight(), "the count never goes negative")
}

// Raising the limit wakes the pipeline for as many requests as it rose; a
// slot freed by Done does not (the pipeline starts a waiting request after
// every Done by itself).
func TestConcurrencyWakes(t *testing.T) {
	c := newConcurrency(t, 1)
	w := attach(t, c, nil)
	require.True(t, acquire(c))
	undo(c)
	require.True(t, acquire(c))
	release(c, time.Millisecond)
	assert.Empty(t, w.take(), "Done wakes nobody")

	require.NoError(t, c.SetLimit(3))
	assert.Equal(t, []int{2}, w.take(), "raised by 2")
	for range 3 {
		require.True(t, acquire(c))
	}
	require.NoError(t, c.SetLimit(1))
	assert.Empty(t, w.take(), "lowering opens nothing")
	require.NoError(t, c.SetLimit(1))
	assert.Empty(t, w.take(), "an unchanged limit opens nothing")
	for range 3 {
		release(c, time.Millisecond)
	}
	assert.Equal(t, 0, c.InFlight())
}

// hammer runs workers goroutines that acquire and release g iterations
// times each, and returns the highest number of requests seen in flight
// together.
func hammer(g admit.Policy, workers, iterations int) (peak int64) {
	var cur, top atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range iterations {
				if !acquire(g) {
					continue
				}
				n := cur.Add(1)
				for p := top.Load(); n > p && !top.CompareAndSwap(p, n); p = top.Load() {
				}
				if i%7 == 0 {
					time.Sleep(time.Microsecond)
				}
				cur.Add(-1)
				release(g, time.Duration(1000+i%5000))
			}
		})
	}
	wg.Wait()
	return top.Load()
}

func TestConcurrencyHammer(t *testing.T) {
	c := newConcurrency(t, 3)
	peak := hammer(c, 8, 3000)
	assert.LessOrEqual(t, peak, int64(3))
	assert.Positive(t, peak)
	assert.Equal(t, 0, c.InFlight())
}

func TestConcurrencyHammerWhileLimitChanges(t *testing.T) {
	c := newConcurrency(t, 4)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			assert.NoError(t, c.SetLimit(1+i%4))
			time.Sleep(50 * time.Microsecond)
		}
	})
	peak := hammer(c, 8, 3000)
	close(stop)
	wg.Wait()
	assert.LessOrEqual(t, peak, int64(4), "never above the highest limit in force")
	assert.Equal(t, 0, c.InFlight(), "every acquisition repaid")
}
