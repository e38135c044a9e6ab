package admit

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newClosed returns a closedTime over n counter shards of its own, as the
// pipeline's.
func newClosed(blame bool, n int) *closedTime {
	c := &closedTime{blame: blame}
	for range n {
		c.shards = append(c.shards, &runners{})
	}
	return c
}

// running returns the number running that the word holds (while closed).
func (c *closedTime) running() uint64 { return c.word.Load() & maxRunning }

func TestClosedTime(t *testing.T) {
	for _, blame := range []bool{false, true} {
		c := newClosed(blame, 2)
		r := c.shards[1]
		c.start(1000, true, r) // open: nothing to close
		assert.Equal(t, time.Duration(0), c.at(1000))

		c.refused(1000) // closes at 1000
		c.refused(1500) // still closed
		assert.Equal(t, time.Duration(500), c.at(1500), "an open interval counts up to now")
		c.start(1700, false, r) // a waiting request starts, others still wait: still closed
		c.start(1800, true, r)  // reopens: 800 closed
		assert.Equal(t, time.Duration(800), c.at(5000))
		c.refused(5000)
		c.start(5100, true, r)
		assert.Equal(t, time.Duration(900), c.at(6000))
		assert.Equal(t, int64(4), r.count(), "every start counted in its shard")

		// A clock that starts at 0 still closes.
		z := newClosed(blame, 1)
		z.refused(0)
		assert.Equal(t, time.Duration(10), z.at(10))
	}
}

// TestBlameByHand follows a short history by hand: A runs 0-100, B 20-60,
// C 50-100; the gates are closed 10-70 and 90-100. A and D run on one
// shard, B on another, C on a third.
func TestBlameByHand(t *testing.T) {
	c := newClosed(true, 3)
	s0, s1, s2 := c.shards[0], c.shards[1], c.shards[2]
	a, _ := c.start(0, true, s0)
	c.refused(10)
	assert.Equal(t, uint64(1), c.running(), "the closing counted A in the shards")
	b, _ := c.start(20, false, s1)
	cc, _ := c.start(50, false, s2)
	assert.Equal(t, uint64(3), c.running())
	blameB := c.end(60, b, s1)
	c.start(70, true, s0) // D starts and reopens; it is never ended here
	c.refused(90)
	assert.Equal(t, uint64(3), c.running(), "the closing counted A, C and D in the shards")
	blameA := c.end(100, a, s0)
	blameC := c.end(100, cc, s2)
	assert.Equal(t, uint64(1), c.running())
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
		c := newClosed(true, 4)
		type req struct {
			reading uint64
			shard   *runners
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
				shard := c.shards[rng.IntN(len(c.shards))]
				reading, ok := c.start(now, open, shard)
				require.True(t, ok)
				running = append(running, &req{reading: reading, shard: shard})
				if open {
					closed = false
				}
			default:
				i := rng.IntN(len(running))
				r := running[i]
				running = append(running[:i], running[i+1:]...)
				got := c.end(now, r.reading, r.shard)
				assert.InDelta(t, r.want, float64(got), 0.51, "round %d: blame (rounded to the ns)", round)
			}
			if closed {
				require.Equal(t, uint64(len(running)), c.running(), "round %d: the number running, while closed", round)
			}
		}
		assert.Equal(t, time.Duration(closedTotal), c.at(now), "round %d: closed time", round)
	}
}

// TestBlameConcurrent records events from many goroutines at once (for the
// race detector), two to a shard as when the queue starts a request on
// another worker's behalf: the closings' hand-overs count every request
// once, and the blame handed out never exceeds the closed time.
func TestBlameConcurrent(t *testing.T) {
	c := newClosed(true, 4)
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
				shard := c.shards[g%len(c.shards)]
				reading, _ := c.start(tick(), i%3 == 0, shard)
				mine += c.end(tick(), reading, shard)
			}
			mu.Lock()
			total += mine
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, r := range c.shards {
		assert.Zero(t, r.count(), "every start ended")
	}
	assert.Zero(t, c.running(), "every start ended, and the word counts none")
	assert.Zero(t, c.word.Load()&settlingBit, "every hand-over done")
	assert.LessOrEqual(t, total, c.at(tick())+time.Duration(8*2000), "blame handed out, within rounding of the closed time")
}

// TestBlameHandOver interleaves a closing's hand-over with starts and ends
// on the shards by hand: a start or an end counted in or out before the
// hand-over moved its shard is in the hand-over's sum, one counted after
// changes the word's number itself, and so the number running is exact
// either way, even when the word's number passes below zero meanwhile.
func TestBlameHandOver(t *testing.T) {
	c := newClosed(true, 2)
	s0, s1 := c.shards[0], c.shards[1]
	a, _ := c.start(0, true, s0) // A and B run while open
	b, _ := c.start(0, true, s1)
	// A closing at 10, as event makes it, before its hand-over runs.
	c.word.Store(10<<timeShift | 1<<epochShift | closedBit | settlingBit)
	cc, _ := c.start(20, false, s0) // C counts in before the hand-over: in its sum
	assert.Zero(t, c.end(30, b, s1), "B ends before it: not in its sum; the settling time is shared by no one")
	assert.Equal(t, uint64(0), c.running(), "nothing changed the word's number yet")
	assert.Equal(t, time.Duration(20), c.at(30), "the closed time counts while settling")

	c.handOver(1)
	assert.Equal(t, uint64(2), c.running(), "A and C")
	assert.Zero(t, c.word.Load()&settlingBit)

	d, _ := c.start(40, false, s1) // after the hand-over: counts itself in the word
	assert.Equal(t, uint64(3), c.running())
	// 30-40: A and C share 10; 40-50: A, C and D share 10; 50-60: D alone.
	assert.Equal(t, time.Duration(8), c.end(50, a, s0))
	assert.Equal(t, time.Duration(8), c.end(50, cc, s0))
	assert.Equal(t, uint64(1), c.running(), "D")
	assert.Equal(t, time.Duration(13), c.end(60, d, s1))
	assert.Equal(t, time.Duration(50), c.at(60))

	// A second closing, whose hand-over moves shard 0, then sees E (on
	// it) count itself out of the word before it has added anything (the
	// word's number passes below zero) and F count itself in on shard 1,
	// not moved yet.
	e, _ := c.start(100, true, s0) // reopens; E runs
	c.word.Store(110<<timeShift | 2<<epochShift | closedBit | settlingBit)
	sum0, ok := c.move(2, []*runners{s0})
	require.True(t, ok)
	assert.Equal(t, uint64(1), sum0, "E")
	c.end(120, e, s0)
	assert.Equal(t, uint64(maxRunning), c.running(), "minus one, modulo")
	f, _ := c.start(120, false, s1)
	sum1, ok := c.move(2, []*runners{s1})
	require.True(t, ok)
	assert.Equal(t, uint64(1), sum1, "F")
	c.settle(2, sum0+sum1)
	assert.Equal(t, uint64(1), c.running(), "F alone")
	c.end(130, f, s1)
	assert.Zero(t, c.running())

	// A closing that finds a shard moved by a later one stops.
	_, ok = c.move(1, []*runners{s0})
	assert.False(t, ok)
}
