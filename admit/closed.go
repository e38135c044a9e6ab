package admit

import (
	"sync/atomic"
	"time"
)

// closedTime adds up how long the gates stay closed, as the pipeline sees
// them, and attributes that time to the requests running meanwhile: their
// blame.
//
// The gates are closed from a refusal (by a gate, or by the age limit: the
// server is behind its arrivals) until a request is admitted with no one
// left waiting (a new request that the gates admitted at once, or a
// waiting one that emptied the queue by starting). While requests wait, the
// gates are closed even as waiting requests start one by one: new ones
// queue behind them.
//
// Blame follows its definition: each nanosecond the gates are closed is
// shared equally among the requests running during it. The running
// integral I(t) = ∫ closed(s)/running(s) ds makes it O(1): a request's
// blame is I at its end minus I at its start. I changes slope only at
// events (a refusal, a start, an end), so it is kept as its value at the
// last event plus the slope since; every event is one compare-and-swap on
// a word that packs the last event's time, the closed flag and the number
// running, so that the interval since the last event is charged exactly
// once, with the slope that held during it, and the event's own change
// takes effect in the same step. No lock is taken. While the gates are
// open, I does not move and the last event's time is not needed (no
// interval is charged from it; the event that closes the gates sets it), so
// a start or an end then only counts itself in or out: no clock
// arithmetic, no division.
//
// The integral itself is a second word, added to by the event that charged
// an interval just after its compare-and-swap: a reading taken by another
// goroutine between the two can miss that one increment. The blame of a
// request that starts or ends at the very nanoseconds another event is
// being recorded is then off by that event's share; the sums are exact
// whenever events do not overlap (as in the tests, on a fake clock).
//
// Limits of the packing: the times of events are kept modulo 2^47 ns
// (39 hours), so a closed interval of more than half of that with no event
// at all counts as zero; at most maxRunning requests are counted as running,
// and one admitted beyond that takes no blame and changes no share.
type closedTime struct {
	// word packs, from the top: the last event's time (timeBits, ns modulo
	// 2^timeBits), the closed flag, the number of requests running.
	word atomic.Uint64
	// integral is I at the last event, in units of 2^-fracBits ns per
	// request, modulo 2^64 (differences of two readings are exact as long
	// as one request's blame is under 2^(64-fracBits) ns, 78 hours).
	integral atomic.Uint64
	// total is the closed time of the intervals charged so far.
	total atomic.Int64
	// blame says whether requests are counted (set before use): without
	// it, a start is one load while the gates are open.
	blame bool
}

const (
	runningBits = 16
	maxRunning  = 1<<runningBits - 1
	closedBit   = 1 << runningBits
	timeShift   = runningBits + 1
	timeBits    = 64 - timeShift
	timeMask    = 1<<timeBits - 1
	fracBits    = 16
)

// event records, at now, a change of the number running by dn (-1, 0, +1)
// and of the closed flag (close, open; neither leaves it), charging the
// interval since the last event first. It returns the integral just after
// the charge: the reading of a request that starts or ends at now.
func (c *closedTime) event(now int64, dn int, close, open bool) uint64 {
	for {
		old := c.word.Load()
		running := old & maxRunning
		if old&closedBit == 0 && !close {
			// Open before and after: no interval is charged and I does not
			// move, so only the number running changes; the last event's
			// time is not read again until the gates close, which sets it.
			w := old
			switch {
			case dn > 0 && running < maxRunning:
				w++
			case dn < 0 && running > 0:
				w--
			}
			if w == old || c.word.CompareAndSwap(old, w) {
				return c.integral.Load()
			}
			continue
		}
		last := old >> timeShift
		t := uint64(now) & timeMask
		d := (t - last) & timeMask
		switch {
		case old&closedBit == 0:
			// Closing: nothing is charged for the open interval, whose
			// start may be older than the packing keeps.
			d = 0
		case d >= 1<<(timeBits-1):
			// Another goroutine recorded a later event first (its clock
			// reading came after ours): this one happens at that time.
			d, t = 0, last
		}
		w := t << timeShift
		switch {
		case close:
			w |= closedBit
		case !open:
			w |= old & closedBit
		}
		switch {
		case dn > 0 && running < maxRunning:
			running++
		case dn < 0 && running > 0:
			running--
		}
		w |= running
		if w == old {
			return c.integral.Load()
		}
		if !c.word.CompareAndSwap(old, w) {
			continue
		}
		if old&closedBit == 0 || d == 0 {
			return c.integral.Load()
		}
		c.total.Add(int64(d))
		n := old & maxRunning
		if n == 0 {
			return c.integral.Load()
		}
		return c.integral.Add((d/n)<<fracBits + (d%n)<<fracBits/n)
	}
}

// refused records a refusal at now: the gates close, if open.
func (c *closedTime) refused(now int64) {
	if c.word.Load()&closedBit == 0 {
		c.event(now, 0, true, false)
	}
}

// start records a request starting at now; open says whether the gates are
// open again from now (no one is left waiting). It returns the request's
// reading of the integral and whether it counts (blame on, and fewer than
// maxRunning running).
func (c *closedTime) start(now int64, open bool) (reading uint64, counted bool) {
	if !c.blame {
		if open && c.word.Load()&closedBit != 0 {
			c.event(now, 0, false, true)
		}
		return 0, false
	}
	if c.word.Load()&maxRunning == maxRunning {
		c.event(now, 0, false, open)
		return 0, false
	}
	return c.event(now, 1, false, open), true
}

// end records the end at now of a request that start counted, and returns
// its blame: its share of the closed time since its reading, rounded to
// the nanosecond.
func (c *closedTime) end(now int64, reading uint64) time.Duration {
	i := c.event(now, -1, false, false)
	return time.Duration((i - reading + 1<<(fracBits-1)) >> fracBits)
}

// at returns the closed time up to now, counting the interval since the
// last event if the gates are still closed.
func (c *closedTime) at(now int64) time.Duration {
	total := c.total.Load()
	if w := c.word.Load(); w&closedBit != 0 {
		d := (uint64(now) - w>>timeShift) & timeMask
		if d < 1<<(timeBits-1) {
			total += int64(d)
		}
	}
	return time.Duration(total)
}
