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
// queue behind them. While the line is full (queue.Detector.Full: it
// stands, and the age limit refuses the old, or every request has waited
// at least the target for an interval), they are closed even as requests
// start, and a request admitted from such a line closes them though no one
// was refused: the server is at its capacity.
//
// Blame follows its definition: each nanosecond the gates are closed is
// shared equally among the requests running during it. The running
// integral I(t) = ∫ closed(s)/running(s) ds makes it O(1): a request's
// blame is I at its end minus I at its start. I changes slope only at
// events (a refusal, a start, an end), so it is kept as its value at the
// last event plus the slope since.
//
// While the gates are open, I does not move and the number running is not
// needed: it is kept only in the pipeline's counter shards (runners, one
// per worker, which the pipeline keeps anyway for its in-flight count), so
// that a start or an end then adds to its own shard's cache line and only
// reads the shared words. While the gates are closed, every event is one
// compare-and-swap on a word that packs the last event's time, the closed
// flag, the number running and the closing's epoch, so that the interval
// since the last event is charged exactly once, with the slope that held
// during it, and the event's own change takes effect in the same step. The
// event that closes the gates hands the count over (handOver): it moves
// every shard to the new epoch, summing the shards' counts as it goes, and
// adds the sum to the word. A start or an end learns, from the epoch its
// own shard had when it counted itself in or out, whether that sum saw it:
// a start counted after its shard moved was not in the sum and adds itself
// to the word; an end counted after its shard moved was (or had added
// itself) and takes itself out. So the number in the word is exact, however
// the hand-over interleaves with starts and ends on other workers. No lock
// is taken.
//
// The integral itself is a second word, added to by the event that charged
// an interval just after its compare-and-swap: a reading taken by another
// goroutine between the two can miss that one increment. The intervals
// charged while a hand-over is under way (between the closing and the sum's
// arrival in the word, the time to visit the shards) count as closed time
// but are shared by no one. The blame of a request that starts or ends at
// the very nanoseconds another event is being recorded is then off by that
// event's share; the sums are exact whenever events do not overlap (as in
// the tests, on a fake clock).
//
// The gates count as closed for at most stale (the standing state's
// Interval) after the last event or refusal while no request waits in the
// queue: a server that nothing reaches refuses no one, so a closing
// followed by silence (the end of an overload) stops counting once that
// much time has passed with no refusal, start or end. Under an overload,
// refusals come far more often than that; a request that waits is refused
// nothing yet, and keeps the whole interval closed. A refusal while closed
// is no event (it changes no count): it only stores its time.
//
// Limits of the packing: the times of events are kept modulo 2^41 ns
// (36 minutes), so a closed interval of more than half of that with no
// event at all (no start, no end) counts as zero; at most maxRunning
// requests may run at once while the gates are closed (beyond, the count
// wraps and the shares are wrong); the epoch has 4 bits, so a start or an
// end is misjudged only if 16 closings pass between its shard's count and
// its reading of the word.
type closedTime struct {
	// word packs, from the top: the last event's time (timeBits, ns modulo
	// 2^timeBits; kept while open, unused), the epoch of the last closing,
	// the settling flag (the closing's hand-over has not added its sum
	// yet), the closed flag, and while closed the number running (modulo
	// 2^runningBits: it may pass below zero while settling).
	word atomic.Uint64
	// integral is I at the last event, in units of 2^-fracBits ns per
	// request, modulo 2^64 (differences of two readings are exact as long
	// as one request's blame is under 2^(64-fracBits) ns, 78 hours).
	integral atomic.Uint64
	// total is the closed time of the intervals charged so far.
	total atomic.Int64
	// blame says whether requests are counted (set before use): without
	// it, a start is its shard's count and one load, and a closing visits
	// no shard.
	blame bool
	// shards are the running counts that a closing sums (with blame).
	shards []*runners
	// stale is the longest interval between two events that counts as
	// closed while waiting reports none (both set before use); 0: no
	// bound.
	stale   int64
	waiting func() bool
	// refusal is the time of the last refusal.
	refusal atomic.Int64
}

const (
	runningBits = 17
	maxRunning  = 1<<runningBits - 1
	closedBit   = 1 << runningBits
	settlingBit = closedBit << 1
	epochShift  = runningBits + 2
	epochBits   = 4
	epochMask   = 1<<epochBits - 1
	timeShift   = epochShift + epochBits
	timeBits    = 64 - timeShift
	timeMask    = 1<<timeBits - 1
	fracBits    = 16
)

// runners counts the requests running on one counter shard, and holds the
// epoch of the last closing whose hand-over counted the shard: the count
// above runnerShift, the epoch below. The pipeline's in-flight count is
// this count.
type runners struct {
	v atomic.Uint64
}

const runnerShift = 16

// in counts a request in and returns the shard's epoch when it did.
func (r *runners) in() uint64 { return r.v.Add(1<<runnerShift) & epochMask }

// out counts a request out and returns the shard's epoch when it did.
func (r *runners) out() uint64 { return r.v.Add(^uint64(1<<runnerShift-1)) & epochMask }

// count returns the number running on the shard.
func (r *runners) count() int64 { return int64(r.v.Load()) >> runnerShift }

// event records, at now, a change of the number running by dn (-1, 0, +1)
// of a request whose shard had epoch ep when it counted itself in or out,
// and of the closed flag (close, open; neither leaves it), charging the
// interval since the last event first. It returns the integral just after
// the charge: the reading of a request that starts or ends at now.
func (c *closedTime) event(now int64, dn int, ep uint64, close, open bool) uint64 {
	for {
		old := c.word.Load()
		wasClosed := old&closedBit != 0
		if !wasClosed && !close {
			// Open before and after: no interval is charged, I does not
			// move, and the number running is the shards'.
			return c.integral.Load()
		}
		last := old >> timeShift
		t := uint64(now) & timeMask
		d := (t - last) & timeMask
		switch {
		case !wasClosed:
			// Closing: nothing is charged for the open interval, whose
			// start may be older than the packing keeps.
			d = 0
		case d >= 1<<(timeBits-1):
			// Another goroutine recorded a later event first (its clock
			// reading came after ours): this one happens at that time.
			d, t = 0, last
		default:
			d = c.bound(d, now)
		}
		epoch := old >> epochShift & epochMask
		w := t<<timeShift | epoch<<epochShift
		switch {
		case !wasClosed:
			// A new closing: the next epoch, settling until the hand-over
			// has summed the shards (without blame, nothing to sum).
			epoch = (epoch + 1) & epochMask
			w = t<<timeShift | epoch<<epochShift | closedBit
			if c.blame {
				w |= settlingBit
			}
		case open:
			// Open from now: the count stays in the shards alone.
		default:
			w |= old & (closedBit | settlingBit)
			n := old & maxRunning
			if ep == epoch {
				// Counted in or out after the hand-over moved its shard:
				// the hand-over's sum did not see this change.
				n = (n + uint64(int64(dn))) & maxRunning
			}
			w |= n
		}
		if w == old {
			return c.integral.Load()
		}
		if !c.word.CompareAndSwap(old, w) {
			continue
		}
		if !wasClosed {
			if c.blame {
				c.handOver(epoch)
			}
			return c.integral.Load()
		}
		if d == 0 {
			return c.integral.Load()
		}
		c.total.Add(int64(d))
		n := old & maxRunning
		if n == 0 || old&settlingBit != 0 {
			return c.integral.Load()
		}
		return c.integral.Add((d/n)<<fracBits + (d%n)<<fracBits/n)
	}
}

// handOver is the second half of the closing of epoch ep: it moves every
// shard to ep, summing their counts as it goes (a count in or out after
// the move is the word's own: see event), and adds the sum to the word's
// number running.
func (c *closedTime) handOver(ep uint64) {
	if sum, ok := c.move(ep, c.shards); ok {
		c.settle(ep, sum)
	}
}

// move moves the shards to epoch ep and returns the sum of their counts at
// their moves. It fails for a closing that finds a shard moved by a later
// one: its gates have opened again meanwhile, and its number is no longer
// used.
func (c *closedTime) move(ep uint64, shards []*runners) (sum uint64, ok bool) {
	for _, r := range shards {
		for {
			v := r.v.Load()
			if ahead := (v - ep) & epochMask; ahead != 0 && ahead < 1<<(epochBits-1) {
				return 0, false
			}
			if r.v.CompareAndSwap(v, v&^(1<<runnerShift-1)|ep) {
				sum += uint64(int64(v) >> runnerShift)
				break
			}
		}
	}
	return sum, true
}

// settle adds sum to the number running of the closing of epoch ep, unless
// its gates have opened since.
func (c *closedTime) settle(ep, sum uint64) {
	for {
		old := c.word.Load()
		if old&settlingBit == 0 || old>>epochShift&epochMask != ep {
			return
		}
		w := old&^(settlingBit|maxRunning) | (old+sum)&maxRunning
		if c.word.CompareAndSwap(old, w) {
			return
		}
	}
}

// refused records a refusal at now: the gates close, if open.
func (c *closedTime) refused(now int64) {
	if c.stale > 0 && c.refusal.Load() < now {
		c.refusal.Store(now)
	}
	if c.word.Load()&closedBit == 0 {
		c.event(now, 0, 0, true, false)
	}
}

// start counts a request in on its shard r and records it as starting at
// now; open says whether the gates are open again from now (no one is left
// waiting). It returns the request's reading of the integral and whether
// it counts for blame (blame on): then end records its end, else the
// caller counts it out of r itself.
func (c *closedTime) start(now int64, open bool, r *runners) (reading uint64, counted bool) {
	ep := r.in()
	if !c.blame {
		if open && c.word.Load()&closedBit != 0 {
			c.event(now, 0, ep, false, true)
		}
		return 0, false
	}
	// The integral before the word: read open, no interval of a later
	// closing is in it.
	i := c.integral.Load()
	if c.word.Load()&closedBit == 0 {
		return i, true
	}
	return c.event(now, 1, ep, false, open), true
}

// end counts out of its shard r, at now, a request that start counted, and
// returns its blame: its share of the closed time since its reading,
// rounded to the nanosecond.
func (c *closedTime) end(now int64, reading uint64, r *runners) time.Duration {
	ep := r.out()
	i := c.integral.Load()
	if c.word.Load()&closedBit != 0 {
		i = c.event(now, -1, ep, false, false)
	}
	return time.Duration((i - reading + 1<<(fracBits-1)) >> fracBits)
}

// at returns the closed time up to now, counting the interval since the
// last event if the gates are still closed.
func (c *closedTime) at(now int64) time.Duration {
	total := c.total.Load()
	if w := c.word.Load(); w&closedBit != 0 {
		d := (uint64(now) - w>>timeShift) & timeMask
		if d < 1<<(timeBits-1) {
			total += int64(c.bound(d, now))
		}
	}
	return time.Duration(total)
}

// bound returns the part of an interval of d ending at now with no event
// that counts as closed: up to stale after the later of its start and the
// last refusal.
func (c *closedTime) bound(d uint64, now int64) uint64 {
	if c.stale <= 0 || d <= uint64(c.stale) || (c.waiting != nil && c.waiting()) {
		return d
	}
	since := min(uint64(max(now-c.refusal.Load(), 0)), d)
	if since <= uint64(c.stale) {
		return d
	}
	return d - (since - uint64(c.stale))
}
