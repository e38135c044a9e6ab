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
//     [ExitDivisor] has been under Target.
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

	standing atomic.Bool
	// above is, while not standing, since when every sojourn has been at
	// least target (0: the last one was not).
	above atomic.Int64
	// young is, while standing, since when every sojourn has been under
	// target (0: the last one was not).
	young atomic.Int64
}

// NewDetector returns a Detector with the given target and interval; zero
// or less means [DefaultTarget] and [DefaultInterval].
func NewDetector(target, interval time.Duration) *Detector {
	if target <= 0 {
		target = DefaultTarget
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Detector{target: int64(target), interval: int64(interval), exit: int64(interval) / ExitDivisor}
}

// Target returns the sojourn time above which a request counts as old.
func (d *Detector) Target() time.Duration { return time.Duration(d.target) }

// Interval returns how long every sojourn must have been old for the queue
// to count as standing.
func (d *Detector) Interval() time.Duration { return time.Duration(d.interval) }

// Standing reports whether the queue is standing now.
func (d *Detector) Standing() bool { return d.standing.Load() }

// Observe records that a request leaves the queue at now (monotonic
// nanoseconds, on the caller's clock; every observer of one Detector must
// use the same clock) after waiting sojourn nanoseconds, and returns
// whether the queue is standing after it.
func (d *Detector) Observe(now, sojourn int64) bool {
	now = max(now, 1) // 0 means "none" in above and young
	if d.standing.Load() {
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
			d.above.Store(0)
			d.young.Store(0)
			d.standing.Store(false)
			return false
		}
		return true
	}
	if sojourn < d.target {
		if d.above.Load() != 0 {
			d.above.Store(0)
		}
		return false
	}
	a := d.above.Load()
	switch {
	case a == 0:
		d.above.CompareAndSwap(0, now)
	case now-a >= d.interval:
		d.young.Store(0)
		d.standing.Store(true)
		return true
	}
	return false
}
