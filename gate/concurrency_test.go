package gate

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConcurrencyFixed(t *testing.T) {
	c := NewConcurrency(2)
	assert.Equal(t, "concurrency", c.Name())
	assert.True(t, c.Acquire())
	assert.True(t, c.Acquire())
	assert.False(t, c.Acquire())
	assert.Equal(t, 2, c.InFlight())
	c.Release(time.Millisecond)
	assert.True(t, c.Acquire())
	assert.False(t, c.Acquire())
	c.Release(0)
	c.Release(0)
	assert.Equal(t, 0, c.InFlight())

	zero := NewConcurrency(0)
	assert.False(t, zero.Acquire(), "a limit of 0 refuses everything")
	assert.Panics(t, func() { NewConcurrency(-1) })
}

// Lowering the limit below the in-flight count revokes nothing: the excess
// is repaid as requests end, and nothing is admitted until the count is
// under the new limit.
func TestConcurrencyLowerBelowInFlight(t *testing.T) {
	c := NewConcurrency(5)
	for range 5 {
		require.True(t, c.Acquire())
	}
	c.SetLimit(2)
	assert.Equal(t, 2, c.Limit())
	assert.Equal(t, 5, c.InFlight())
	for _, want := range []int{4, 3, 2} {
		assert.False(t, c.Acquire())
		c.Release(time.Millisecond)
		assert.Equal(t, want, c.InFlight())
	}
	assert.False(t, c.Acquire(), "2 in flight at limit 2")
	c.Release(time.Millisecond)
	assert.True(t, c.Acquire())
	assert.False(t, c.Acquire())
	c.Release(time.Millisecond)
	c.Release(time.Millisecond)
	assert.Equal(t, 0, c.InFlight())
	assert.PanicsWithValue(t, "gate: Release without Acquire", func() { c.Release(0) })
	assert.Equal(t, 0, c.InFlight(), "the count never goes negative")
}

func TestConcurrencyWakes(t *testing.T) {
	c := NewConcurrency(1)
	fn, n := counter()
	c.OnOpen(fn)
	require.True(t, c.Acquire())
	c.Release(Undo)
	assert.Equal(t, int64(0), n.Load(), "Undo calls nobody")
	require.True(t, c.Acquire())
	c.Release(time.Millisecond)
	assert.Equal(t, int64(1), n.Load(), "a slot freed")

	c.SetLimit(3)
	assert.Equal(t, int64(2), n.Load(), "raised")
	for range 3 {
		require.True(t, c.Acquire())
	}
	c.SetLimit(1)
	assert.Equal(t, int64(2), n.Load(), "lowering opens nothing")
	c.Release(time.Millisecond)
	c.Release(time.Millisecond)
	assert.Equal(t, int64(2), n.Load(), "still at or over the limit")
	c.Release(time.Millisecond)
	assert.Equal(t, int64(3), n.Load(), "under the limit again")
	c.SetLimit(1)
	assert.Equal(t, int64(3), n.Load(), "an unchanged limit opens nothing")
}

// hammer runs workers goroutines that acquire and release g iterations
// times each, and returns the highest number of requests seen in flight
// together.
func hammer(g Gate, workers, iterations int) (peak int64) {
	var cur, top atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range iterations {
				if !g.Acquire() {
					continue
				}
				n := cur.Add(1)
				for p := top.Load(); n > p && !top.CompareAndSwap(p, n); p = top.Load() {
				}
				if i%7 == 0 {
					time.Sleep(time.Microsecond)
				}
				cur.Add(-1)
				g.Release(time.Duration(1000 + i%5000))
			}
		})
	}
	wg.Wait()
	return top.Load()
}

func TestConcurrencyHammer(t *testing.T) {
	c := NewConcurrency(3)
	fn, _ := counter()
	c.OnOpen(fn)
	peak := hammer(c, 8, 3000)
	assert.LessOrEqual(t, peak, int64(3))
	assert.Positive(t, peak)
	assert.Equal(t, 0, c.InFlight())
}

func TestConcurrencyHammerWhileLimitChanges(t *testing.T) {
	c := NewConcurrency(4)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c.SetLimit(1 + i%4)
			time.Sleep(50 * time.Microsecond)
		}
	})
	peak := hammer(c, 8, 3000)
	close(stop)
	wg.Wait()
	assert.LessOrEqual(t, peak, int64(4), "never above the highest limit in force")
	assert.Equal(t, 0, c.InFlight(), "every acquisition repaid")
}
