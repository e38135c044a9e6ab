package admit

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClosedTime(t *testing.T) {
	for _, blame := range []bool{false, true} {
		c := closedTime{blame: blame}
		c.start(1000, true) // open: nothing to close
		assert.Equal(t, time.Duration(0), c.at(1000))

		c.refused(1000) // closes at 1000
		c.refused(1500) // still closed
		assert.Equal(t, time.Duration(500), c.at(1500), "an open interval counts up to now")
		c.start(1700, false) // a waiting request starts, others still wait: still closed
		c.start(1800, true)  // reopens: 800 closed
		assert.Equal(t, time.Duration(800), c.at(5000))
		c.refused(5000)
		c.start(5100, true)
		assert.Equal(t, time.Duration(900), c.at(6000))

		// A clock that starts at 0 still closes.
		z := closedTime{blame: blame}
		z.refused(0)
		assert.Equal(t, time.Duration(10), z.at(10))
	}
}

// TestBlameByHand follows a short history by hand: A runs 0-100, B 20-60,
// C 50-100; the gates are closed 10-70 and 90-100.
func TestBlameByHand(t *testing.T) {
	c := closedTime{blame: true}
	a, _ := c.start(0, true)
	c.refused(10)
	b, _ := c.start(20, false)
	cc, _ := c.start(50, false)
	blameB := c.end(60, b)
	c.start(70, true) // D starts and reopens; it is never ended here
	c.refused(90)
	blameA := c.end(100, a)
	blameC := c.end(100, cc)
	// 10-20: A alone (10). 20-50: A, B (15 each). 50-60: A, B, C (10/3
	// each). 60-70: A, C (5 each). 90-100: A, C, D (10/3 each).
	assert.Equal(t, time.Duration(37), blameA) // 10+15+10/3+5+10/3 = 36.67
	assert.Equal(t, time.Duration(18), blameB) // 15+10/3 = 18.33
	assert.Equal(t, time.Duration(12), blameC) // 10/3+5+10/3 = 11.67
	assert.Equal(t, time.Duration(70), c.at(100))
}

// TestBlameMatchesDefinition runs random histories on a fake clock and
// compares every request's blame with the definition: each nanosecond the
// gates are closed is shared equally among the requests running in it.
func TestBlameMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		c := closedTime{blame: true}
		type req struct {
			reading uint64
			want    float64
		}
		var running []*req
		closed := false
		var closedTotal int64
		now := int64(1_000_000) * int64(round+1)
		for range 400 {
			d := int64(rng.IntN(1000))
			// The definition: this interval's closed time, split equally.
			if closed {
				closedTotal += d
				for _, r := range running {
					r.want += float64(d) / float64(len(running))
				}
			}
			now += d
			switch op := rng.IntN(4); {
			case op == 0:
				c.refused(now)
				closed = true
			case op == 1 || len(running) == 0:
				open := rng.IntN(2) == 0
				reading, ok := c.start(now, open)
				require.True(t, ok)
				running = append(running, &req{reading: reading})
				if open {
					closed = false
				}
			default:
				i := rng.IntN(len(running))
				r := running[i]
				running = append(running[:i], running[i+1:]...)
				got := c.end(now, r.reading)
				assert.InDelta(t, r.want, float64(got), 0.51, "round %d: blame (rounded to the ns)", round)
			}
		}
		assert.Equal(t, time.Duration(closedTotal), c.at(now), "round %d: closed time", round)
	}
}

// TestBlameConcurrent records events from many goroutines at once (for the
// race detector): the blame handed out never exceeds the closed time.
func TestBlameConcurrent(t *testing.T) {
	c := closedTime{blame: true}
	var clock sync.Mutex
	var now int64
	tick := func() int64 {
		clock.Lock()
		defer clock.Unlock()
		now += 7
		return now
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total time.Duration
	for g := range 8 {
		wg.Go(func() {
			var mine time.Duration
			for i := range 2000 {
				if (i+g)%5 == 0 {
					c.refused(tick())
				}
				reading, _ := c.start(tick(), i%3 == 0)
				mine += c.end(tick(), reading)
			}
			mu.Lock()
			total += mine
			mu.Unlock()
		})
	}
	wg.Wait()
	assert.Equal(t, uint64(0), c.word.Load()&maxRunning, "every start ended")
	assert.LessOrEqual(t, total, c.at(tick())+time.Duration(8*2000), "blame handed out, within rounding of the closed time")
}

func TestBlameRunningLimit(t *testing.T) {
	c := closedTime{blame: true}
	c.word.Store(maxRunning) // as if maxRunning requests ran
	_, ok := c.start(10, true)
	assert.False(t, ok, "a request beyond the limit is not counted")
	assert.Equal(t, uint64(maxRunning), c.word.Load()&maxRunning)
}
