package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDetectorScript follows one Detector through entering, holding and
// leaving the standing state, with the defaults: target 5 ms, interval
// 100 ms, exit 10 ms.
func TestDetectorScript(t *testing.T) {
	d := NewDetector(DetectorConfig{})
	assert.Equal(t, DefaultTarget, d.Target())
	assert.Equal(t, DefaultInterval, d.Interval())
	neg := NewDetector(DetectorConfig{Target: -time.Millisecond, Interval: -time.Second})
	assert.Equal(t, DefaultTarget, neg.Target(), "negative means the default")
	assert.Equal(t, DefaultInterval, neg.Interval())
	obs := func(now, sojourn int64) bool { return d.Observe(now*ms, sojourn*ms) }

	assert.False(t, obs(0, 1), "young")
	assert.False(t, obs(10, 20), "the first old one starts the interval")
	assert.False(t, obs(60, 30), "old for less than an interval")
	assert.False(t, obs(70, 2), "a young one restarts it")
	assert.False(t, obs(80, 20))
	assert.False(t, obs(170, 30), "old for less than an interval since the young one")
	assert.True(t, obs(180, 30), "old for an interval: standing")
	assert.True(t, d.Standing(180*ms))
	assert.True(t, obs(190, 8))
	// While standing, the requests served fresh are young: they do not end
	// the state while old ones keep coming.
	for now := int64(200); now < 400; now++ {
		sojourn := int64(3)
		if now%2 == 1 {
			sojourn = 40
		}
		require.True(t, obs(now, sojourn), "at %d ms", now)
	}
	assert.True(t, obs(400, 2), "young since 400 ms")
	assert.True(t, obs(409, 1), "young for less than the exit time")
	assert.False(t, obs(410, 2), "young for the exit time: the standing queue is gone")
	assert.False(t, d.Standing(410*ms))
	assert.False(t, obs(420, 30), "and a new interval must pass")
	assert.False(t, obs(519, 30))
	assert.True(t, obs(520, 30))

	// A sojourn of exactly the target is old; a clock reading of 0 counts
	// as 1 ns.
	d = NewDetector(DetectorConfig{Target: 5 * time.Millisecond, Interval: 10 * time.Millisecond})
	assert.False(t, d.Observe(0, 5*ms))
	assert.False(t, d.Observe(10*ms, 5*ms))
	assert.True(t, d.Observe(10*ms+1, 5*ms))
}

// TestCoDelScript follows one queue through adaptive LIFO with CoDel, with
// the defaults: Timeout 100 ms, Target 5 ms, Interval 100 ms. The queue's
// Detector observes what leaves it: starts and timeouts.
func TestCoDelScript(t *testing.T) {
	q, clk := newQueue(Config{Order: CoDel})
	var l log
	at := func(msec int64) { clk.set(msec * ms) }
	overloaded := func() bool { return q.Stats().Overloaded }

	// A queue whose entries have not waited long is not standing: FIFO,
	// full timeouts.
	at(0)
	l.push(q, "a", Default) // deadline 100
	at(50)
	l.push(q, "b", Default) // deadline 150
	at(60)
	assert.Equal(t, 1, q.Pump(budget(1)))
	assert.Equal(t, []string{"start a"}, l.take(), "FIFO: oldest first")
	assert.False(t, overloaded(), "a waited 60 ms: the first old sojourn starts the interval")

	// b waits out its timeout at 150 ms: old too, but only 90 ms since a.
	at(150)
	l.push(q, "c", Default) // full timeout: deadline 250
	q.Expire()
	assert.Equal(t, []string{"timeout b"}, l.take())
	assert.False(t, overloaded())

	// c starts at 160 ms after 10 ms: old for 100 ms: standing.
	at(160)
	assert.Equal(t, 1, q.Pump(budget(1)))
	assert.Equal(t, []string{"start c"}, l.take())
	assert.True(t, overloaded())

	l.push(q, "d", Default) // short timeout: deadline 165
	at(161)
	l.push(q, "e", Default) // deadline 166
	at(162)
	assert.Equal(t, 1, q.Pump(budget(1)))
	assert.Equal(t, []string{"start e"}, l.take(), "LIFO: newest first")

	// The short timeout is exact: d goes at 165 ms, not before.
	at(164)
	next, ok := q.Expire()
	assert.True(t, ok)
	assert.Equal(t, 165*ms, next)
	assert.Empty(t, l.take())
	at(165)
	_, ok = q.Expire()
	assert.Equal(t, []string{"timeout d"}, l.take())
	assert.False(t, ok)
	assert.True(t, overloaded(), "d's 5 ms count as old")

	// Young starts for the exit time (10 ms) end the standing state.
	for i, at0 := range []int64{170, 175, 180} {
		at(at0)
		l.push(q, string(rune('f'+i)), Default)
		assert.Equal(t, 1, q.Pump(always))
	}
	assert.Equal(t, []string{"start f", "start g", "start h"}, l.take())
	assert.False(t, overloaded(), "young since 170 ms, for 10 ms at 180 ms")
	at(200)
	l.push(q, "i", Default)
	l.push(q, "j", Default)
	at(201)
	assert.Equal(t, 2, q.Pump(always))
	assert.Equal(t, []string{"start i", "start j"}, l.take(), "back to FIFO")

	st := q.Stats()
	assert.Equal(t, uint64(2), st.Rejected[Timeout])
	assert.Equal(t, uint64(8), st.Started)
}

// standingQueue returns a CoDel queue whose Detector is standing.
func standingQueue(t *testing.T, o Config) (*Queue, *fakeClock) {
	t.Helper()
	o.Order = CoDel
	q, clk := newQueue(o)
	clk.set(200 * ms)
	makeStanding(t, q.Detector(), 200*ms)
	return q, clk
}

// makeStanding makes d standing at now by observations from outside the
// queue, as the admission pipeline makes with the ages of the requests it
// parses: a young one, then old ones for an interval.
func makeStanding(t *testing.T, d *Detector, now int64) {
	t.Helper()
	iv := int64(d.Interval())
	d.Observe(now-iv-1, 0)
	d.Observe(now-iv, int64(time.Second))
	d.Observe(now, int64(time.Second))
	require.True(t, d.Standing(now))
}

// TestCoDelWithClasses: classes still come first in a standing queue; the
// order only changes within a class.
func TestCoDelWithClasses(t *testing.T) {
	q, clk := standingQueue(t, Config{Timeout: time.Second})
	var l log
	l.push(q, "s0", Sheddable)
	l.push(q, "d1", Default)
	l.push(q, "c1", Critical)
	clk.add(ms)
	l.push(q, "d2", Default)
	l.push(q, "c2", Critical)
	assert.True(t, q.Stats().Overloaded)
	q.Pump(always)
	assert.Equal(t, []string{"start c2", "start c1", "start d2", "start d1", "start s0"}, l.take())
}

// TestCoDelEviction: in a standing queue the oldest entry of the least
// important class is the one LIFO would start last, so it is evicted.
func TestCoDelEviction(t *testing.T) {
	q, clk := newQueue(Config{Order: CoDel, MaxLen: 3, Timeout: time.Second})
	var l log
	l.push(q, "s1", Sheddable) // full timeout, list 2*Sheddable
	clk.set(150 * ms)
	makeStanding(t, q.Detector(), 150*ms)
	l.push(q, "s2", Sheddable) // standing: short timeout, the other list
	l.push(q, "s3", Sheddable)
	l.push(q, "c", Critical)
	assert.Equal(t, []string{"evicted s1"}, l.take(), "the oldest, across both lists of the class")
	l.push(q, "d", Default)
	assert.Equal(t, []string{"evicted s2"}, l.take())
	q.Pump(always)
	assert.Equal(t, []string{"start c", "start d", "start s3"}, l.take())

	// Not standing: the newest goes, as under FIFO.
	q, _ = newQueue(Config{Order: CoDel, MaxLen: 3, Timeout: time.Second})
	l.push(q, "x1", Sheddable)
	l.push(q, "x2", Sheddable)
	l.push(q, "x3", Sheddable)
	l.push(q, "y", Default)
	assert.Equal(t, []string{"evicted x3"}, l.take())
	q.Close()
	l.take()
}

// TestCoDelMixedListsOrder: one class holds entries of both timeouts; FIFO
// and LIFO picks compare arrival across the two lists.
func TestCoDelMixedListsOrder(t *testing.T) {
	q, clk := newQueue(Config{Order: CoDel, Timeout: time.Second})
	d := q.Detector()
	var l log
	l.push(q, "a", Default) // long list
	clk.set(150 * ms)
	makeStanding(t, d, 150*ms)
	l.push(q, "b", Default) // short list, deadline 155
	clk.set(160 * ms)       // b expired, a remains: still standing
	q.Expire()
	assert.Equal(t, []string{"timeout b"}, l.take())
	l.push(q, "c", Default) // short, deadline 165
	assert.Equal(t, 1, q.Pump(budget(1)))
	assert.Equal(t, []string{"start c"}, l.take(), "LIFO across both lists")
	l.push(q, "e", Default) // short, deadline 165
	// Starts are LIFO while standing, so test the FIFO comparison through
	// Expire's earliest deadline instead: e's (165) precedes a's (1000).
	next, ok := q.Expire()
	assert.True(t, ok)
	assert.Equal(t, 165*ms, next)
	q.Pump(always)
	assert.Equal(t, []string{"start e", "start a"}, l.take(), "newest first, across both lists")
}

// TestOverloadedUnderFIFO: the Detector is fed under every order, and only
// CoDel order acts on it.
func TestOverloadedUnderFIFO(t *testing.T) {
	q, clk := newQueue(Config{Timeout: time.Second})
	var l log
	l.push(q, "a", Default)
	l.push(q, "b", Default)
	clk.set(10 * ms)
	assert.Equal(t, 1, q.Pump(budget(1)))
	clk.set(110 * ms)
	l.push(q, "c", Default)
	assert.Equal(t, 1, q.Pump(budget(1)))
	assert.True(t, q.Stats().Overloaded, "sojourns of 10 and 110 ms, 100 ms apart")
	l.push(q, "d", Default)
	q.Pump(always)
	assert.Equal(t, []string{"start a", "start b", "start c", "start d"}, l.take(), "FIFO ignores the state")
}

// TestDetectorWithLimit: with a limit, a line that stands below it never
// counts as standing, however long it stands; only a line that reached the
// limit and stayed there (for a tenth of an interval) does. These are the cases of
// docs/design.md ("When a line is an overload"), with the defaults and the
// sluice pipeline's limit of 100 ms. Each script gives the sojourn observed
// at each millisecond (-1: nothing observed).
func TestDetectorWithLimit(t *testing.T) {
	const limit = 100
	for _, c := range []struct {
		name     string
		sojourn  func(now int64) int64 // ms, at now ms
		until    int64                 // ms
		standing int64                 // when it first stands, ms; -1: never
	}{
		{"a closed loop of 64 clients, 1 ms each: a line of 63 ms, for ever", func(int64) int64 { return 63 }, 2000, -1},
		{"a closed loop just under the limit", func(int64) int64 { return 99 }, 2000, -1},
		{"one request at the limit in a standing line (a stall)", func(now int64) int64 {
			if now == 500 {
				return 120
			}
			return 63
		}, 2000, -1},
		{"stalls to the limit, 5 ms each, more than an interval apart", func(now int64) int64 {
			if now%300 < 5 {
				return 110
			}
			return 63
		}, 2000, -1},
		{"stalls to the limit, 5 ms each, every 30 ms: the line keeps reaching it", func(now int64) int64 {
			if now%30 < 5 {
				return 110
			}
			return 63
		}, 2000, 30},
		{"an open-loop overload at 2x: the line grows by half a ms each ms", func(now int64) int64 { return min(now/2, limit) }, 2000, 210},
		{"an overload at 10x: the line reaches the limit at once", func(int64) int64 { return limit }, 2000, 11},
		{"a line at the limit broken by young requests every 8 ms", func(now int64) int64 {
			if now%8 == 0 {
				return 1
			}
			return limit
		}, 2000, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := NewDetector(DetectorConfig{})
			d.SetLimit(limit * time.Millisecond)
			first := int64(-1)
			for now := int64(1); now <= c.until; now++ {
				if d.Observe(now*ms, c.sojourn(now)*ms) && first < 0 {
					first = now
				}
			}
			assert.Equal(t, c.standing, first)
		})
	}
}

// TestDetectorSilenceEndsTheLine: once nothing has been observed for an
// interval, there is no line: not standing, and a young request after the
// silence does not find it standing either.
func TestDetectorSilenceEndsTheLine(t *testing.T) {
	d := NewDetector(DetectorConfig{})
	for now := int64(1); now <= 200; now++ {
		d.Observe(now*ms, 30*ms)
	}
	require.True(t, d.Standing(200*ms))
	assert.True(t, d.Standing(299*ms), "silent for less than an interval")
	assert.False(t, d.Standing(300*ms), "silent for an interval: the line is gone")
	assert.False(t, d.Observe(400*ms, ms), "a young request after the silence")
	assert.False(t, d.Observe(401*ms, 30*ms), "an old one starts a new interval")
	assert.True(t, d.Observe(501*ms, 30*ms))
}

// TestDetectorEpisode: Episode counts the entries into the state, once
// each, whatever the observations in between.
func TestDetectorEpisode(t *testing.T) {
	d := NewDetector(DetectorConfig{})
	assert.Zero(t, d.Episode())
	for now := int64(1); now <= 200; now++ {
		d.Observe(now*ms, 30*ms)
	}
	require.True(t, d.Standing(200*ms))
	assert.Equal(t, uint64(1), d.Episode(), "one entry, however many old requests")
	for now := int64(201); now <= 211; now++ {
		d.Observe(now*ms, ms)
	}
	require.False(t, d.Standing(211*ms))
	assert.Equal(t, uint64(1), d.Episode(), "leaving does not count")
	for now := int64(212); now <= 400; now++ {
		d.Observe(now*ms, 30*ms)
	}
	require.True(t, d.Standing(400*ms))
	assert.Equal(t, uint64(2), d.Episode())
	d.Observe(600*ms, 30*ms) // after a silence: leaves and starts anew
	assert.Equal(t, uint64(2), d.Episode(), "not standing yet again")
}

// TestDetectorWithLimitReenters: a line that forms again within an
// interval of the state ending with young sojourns (an overload whose
// fresh requests were young for a while) enters by CoDel's rule, without
// reaching the limit again; one that forms later must reach it.
func TestDetectorWithLimitReenters(t *testing.T) {
	d := NewDetector(DetectorConfig{})
	d.SetLimit(100 * time.Millisecond)
	for now := int64(1); now <= 20; now++ {
		d.Observe(now*ms, 100*ms)
	}
	require.True(t, d.Standing(20*ms))
	for now := int64(21); now <= 31; now++ {
		d.Observe(now*ms, ms)
	}
	require.False(t, d.Standing(31*ms), "young for 10 ms: left at 31 ms")
	first := int64(-1)
	for now := int64(40); now <= 400; now++ {
		if d.Observe(now*ms, 30*ms) && first < 0 {
			first = now
		}
	}
	assert.Equal(t, int64(140), first, "old for an interval from 40 ms, 9 ms after the exit")

	d = NewDetector(DetectorConfig{})
	d.SetLimit(100 * time.Millisecond)
	for now := int64(1); now <= 20; now++ {
		d.Observe(now*ms, 100*ms)
	}
	for now := int64(21); now <= 31; now++ {
		d.Observe(now*ms, ms)
	}
	for now := int64(32); now <= 200; now++ {
		d.Observe(now*ms, ms)
	}
	for now := int64(201); now <= 1000; now++ {
		require.False(t, d.Observe(now*ms, 30*ms), "a line under the limit, formed more than an interval after the exit")
	}
}

// TestDetectorFull: with a limit, a line whose every request waits at
// least Target for an Interval is full, though it never stands; one young
// request, or an Interval of silence, ends it, and a standing line is
// full.
func TestDetectorFull(t *testing.T) {
	d := NewDetector(DetectorConfig{})
	d.SetLimit(100 * time.Millisecond)
	for now := int64(1); now <= 99; now++ {
		require.False(t, d.Observe(now*ms, 63*ms))
		require.False(t, d.Full(now*ms), "old for less than an interval (%d ms)", now)
	}
	assert.False(t, d.Observe(101*ms, 63*ms))
	assert.True(t, d.Full(101*ms), "a closed loop's line of 63 ms: full, not standing")
	assert.True(t, d.Full(200*ms))
	assert.False(t, d.Full(201*ms), "silent for an interval")
	d.Observe(202*ms, 63*ms)
	d.Observe(203*ms, ms)
	assert.False(t, d.Full(203*ms), "a young request")

	d = NewDetector(DetectorConfig{})
	for now := int64(1); now <= 101; now++ {
		d.Observe(now*ms, 30*ms)
	}
	require.True(t, d.Standing(101*ms))
	assert.True(t, d.Full(101*ms), "a standing line is full")
}
