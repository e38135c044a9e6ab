package queue

import (
	"sync/atomic"
	"time"
)

// ExitDivisor sets how long a standing queue must have been gone before a
// [Detector] leaves the standing state: Interval / ExitDivisor of young
// sojourns in a row (10 ms with the default interval).
const ExitDivisor = 10

// Detector tells a good queue, which fills and drains, from a bad, standing
// one, by the sojourn times of the requests that leave it: how long each
// waited from its arrival until it started, or until it was rejected for
// waiting too long. This is the state of CoDel (Nichols and Jacobson,
// "Controlling Queue Delay", 2012; see docs/background.md):
//
//   - the queue becomes standing once every sojourn observed for a whole
//     Interval has been at least Target (one young request restarts the
//     interval);
//   - it stops standing once every sojourn observed for Interval /
//     [ExitDivisor] has been under Target, or once nothing at all has been
//     observed for an Interval (no one waits: there is no line).
//
// A Detector with a limit ([Detector.SetLimit]: the longest a request may
// wait, after which it is refused) asks more to enter: a line that stands
// is not an overload as long as it fits in the limit. A closed loop of N
// clients always has a line of N less the workers, and every one of its
// requests is served in time; refusing them buys nothing, since each
// client sends again at once. With a limit, the queue becomes standing only
// once sojourns at the limit have kept coming for Interval / [ExitDivisor]
// (none of them more than an Interval apart, and every sojourn between
// them at least Target): the line reached the limit and stays there, so
// arrivals outrun what the server completes. The limit is asked of a line that
// forms from nothing; one that forms again within an Interval of the state
// ending with young sojourns enters by CoDel's rule alone: the fresh
// requests served under an overload can be young for a while without the
// overload having ended, and waiting for the line to reach the limit again
// would serve a whole limit's worth of old requests each time.
//
// The exit is not CoDel's first good sojourn: while the queue stands, the
// requests that do start are served fresh (newest first, or with a short
// timeout), so they are young by definition, and leaving at the first one
// would make the state swing in and out every few milliseconds under a
// steady overload. Requests that still come old (the ones rejected for their
// age) keep it standing for as long as the overload lasts.
//
// One Detector holds one such state. A [Queue] in [CoDel] order reads it to
// give entries the short timeout and to serve the newest first; the sluice
// admission pipeline (package admit) shares one Detector between its queue
// and its request-age limit, so that requests waiting in the kernel's socket
// buffers and in the queue are judged by one state.
//
// Observe and Standing are safe for concurrent use and take no lock: each
// is a few atomic loads, and Observe writes only when the state changes.
// Under concurrent observers a transition is taken by whichever observer
// sees it first; the state is exact for one observer at a time.
type Detector struct {
	target, interval, exit int64
	// limit is the sojourn at which the line has reached its limit
	// (SetLimit); 0: none, CoDel's entry.
	limit atomic.Int64

	standing atomic.Bool
	// above is, while not standing, since when every sojourn has been at
	// least target (0: the last one was not).
	above atomic.Int64
	// full is, while not standing and with a limit, since when sojourns
	// at the limit have kept coming (0: none since above began, or the
	// last was more than an interval ago); lastFull is the last of them.
	full, lastFull atomic.Int64
	// young is, while standing, since when every sojourn has been under
	// target (0: the last one was not).
	young atomic.Int64
	// last is when the last sojourn was observed (0: none yet).
	last atomic.Int64
	// left is when the state last ended with young sojourns (0: never).
	left atomic.Int64
	// entries counts the times the state was entered (Episode).
	entries atomic.Uint64
}

// DetectorConfig configures a [Detector]. The zero value is CoDel's
// defaults.
type DetectorConfig struct {
	// Target is the sojourn time at or above which a request counts as
	// old; zero or less means [DefaultTarget].
	Target time.Duration
	// Interval is how long every sojourn must have been old for the line
	// to count as standing; zero or less means [DefaultInterval].
	Interval time.Duration
}

// NewDetector returns a Detector configured by cfg (zero fields take the
// defaults; every value is accepted). It has no limit: see SetLimit.
func NewDetector(cfg DetectorConfig) *Detector {
	target, interval := cfg.Target, cfg.Interval
	if target <= 0 {
		target = DefaultTarget
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Detector{target: int64(target), interval: int64(interval), exit: int64(interval) / ExitDivisor}
}

// SetLimit sets the longest a request may wait before it is refused (the
// sluice pipeline's age limit, a queue's timeout); zero or less removes
// it. With a limit, the state is entered only when the line reaches the
// limit and stays there (see [Detector]). It may be called at any time.
func (d *Detector) SetLimit(limit time.Duration) { d.limit.Store(max(int64(limit), 0)) }

// Target returns the sojourn time above which a request counts as old.
func (d *Detector) Target() time.Duration { return time.Duration(d.target) }

// Interval returns how long every sojourn must have been old for the queue
// to count as standing.
func (d *Detector) Interval() time.Duration { return time.Duration(d.interval) }

// Standing reports whether the queue is standing at now (on the clock of
// Observe): it is not once nothing has been observed for an Interval.
func (d *Detector) Standing(now int64) bool {
	return d.standing.Load() && now-d.last.Load() < d.interval
}

// Full reports whether the line is full at now: it stands, or every
// sojourn observed for an Interval has been at least Target (CoDel's own
// rule, whatever the limit) and one was observed within the last
// Interval. A full line that does not stand is a server at its capacity
// that keeps up: a closed loop, or arrivals just under what it completes,
// whose requests all wait, though none reach the limit. The sluice
// admission pipeline counts its gates closed while the line is full, so
// that a tenant controller sees the server saturated when drops are what
// keep it from refusing.
func (d *Detector) Full(now int64) bool {
	if now-d.last.Load() >= d.interval {
		return false
	}
	if d.standing.Load() {
		return true
	}
	a := d.above.Load()
	return a != 0 && now-a >= d.interval
}

// Episode returns how many times the state has been entered: a caller that
// decides something for one standing period (the sluice pipeline, when
// refusing does not shorten the line) tells it from the next by this
// number.
func (d *Detector) Episode() uint64 { return d.entries.Load() }

// Observe records that a request leaves the queue at now (monotonic
// nanoseconds, on the caller's clock; every observer of one Detector must
// use the same clock) after waiting sojourn nanoseconds, and returns
// whether the queue is standing after it.
func (d *Detector) Observe(now, sojourn int64) bool {
	now = max(now, 1) // 0 means "none" in above, full and young
	last := d.last.Swap(now)
	if d.standing.Load() {
		if now-last >= d.interval {
			// Nothing waited for an interval: the line is gone, and this
			// request starts a new one.
			d.leave()
			return d.enter(now, sojourn)
		}
		if sojourn >= d.target {
			if d.young.Load() != 0 {
				d.young.Store(0)
			}
			return true
		}
		y := d.young.Load()
		switch {
		case y == 0:
			d.young.CompareAndSwap(0, now)
		case now-y >= d.exit:
			d.leave()
			d.left.Store(now)
			return false
		}
		return true
	}
	return d.enter(now, sojourn)
}

// leave ends the standing state.
func (d *Detector) leave() {
	d.above.Store(0)
	d.full.Store(0)
	d.young.Store(0)
	d.standing.Store(false)
}

// enter observes a sojourn while not standing, and enters the state when
// its rule is met.
func (d *Detector) enter(now, sojourn int64) bool {
	if sojourn < d.target {
		if d.above.Load() != 0 {
			d.above.Store(0)
		}
		if d.full.Load() != 0 {
			d.full.Store(0)
		}
		return false
	}
	a := d.above.Load()
	if a == 0 {
		d.above.CompareAndSwap(0, now)
		a = now
	}
	since, window := a, d.interval
	if limit, l := d.limit.Load(), d.left.Load(); limit > 0 && (l == 0 || a-l > d.interval) {
		// The line must have reached the limit and stood there.
		if sojourn < limit {
			return false
		}
		lf := d.lastFull.Swap(now)
		f := d.full.Load()
		if f == 0 || now-lf > d.interval {
			d.full.Store(now)
			return false
		}
		since, window = f, d.exit
	}
	if now-since < window {
		return false
	}
	d.young.Store(0)
	if !d.standing.Swap(true) {
		d.entries.Add(1)
	}
	return true
}
