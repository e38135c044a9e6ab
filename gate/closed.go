package gate

import (
	"sync/atomic"
	"time"
)

// ClosedTime adds up how long a gate stays closed as its caller sees it:
// from a refusal to the next admission. It is what tenant-blame accounting
// attributes to the requests that kept the gate closed. Each call is O(1)
// and lock-free, and reads the clock only when the state changes (a first
// refusal, or the admission that reopens), so an open gate costs one atomic
// load per decision. The zero value is ready; clock returns monotonic
// nanoseconds.
type ClosedTime struct {
	since atomic.Int64 // clock reading of the refusal that closed it; 0 while open
	total atomic.Int64 // closed time of the intervals that ended
}

// Refused records a refusal.
func (c *ClosedTime) Refused(clock func() int64) {
	if c.since.Load() == 0 {
		c.since.CompareAndSwap(0, max(clock(), 1))
	}
}

// Admitted records an admission.
func (c *ClosedTime) Admitted(clock func() int64) {
	if since := c.since.Load(); since != 0 {
		if now := clock(); c.since.CompareAndSwap(since, 0) {
			c.total.Add(max(now-since, 0))
		}
	}
}

// Total returns the closed time so far, counting a closed interval still
// open up to clock's reading.
func (c *ClosedTime) Total(clock func() int64) time.Duration {
	total := c.total.Load()
	if since := c.since.Load(); since != 0 {
		total += max(clock()-since, 0)
	}
	return time.Duration(total)
}
