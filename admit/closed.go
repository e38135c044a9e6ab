package admit

import (
	"sync/atomic"
	"time"
)

// closedTime adds up how long the gates stay closed as the pipeline sees
// them: from a refusal to the next admission. It is what tenant-blame
// accounting attributes to the requests that kept the gates closed. Each
// call is O(1) and lock-free and is given the clock reading the caller
// already has, so an open gate costs one atomic load per decision.
type closedTime struct {
	since atomic.Int64 // clock reading of the refusal that closed it; 0 while open
	total atomic.Int64 // closed time of the intervals that ended
}

// refused records a refusal at now.
func (c *closedTime) refused(now int64) {
	if c.since.Load() == 0 {
		c.since.CompareAndSwap(0, max(now, 1))
	}
}

// admitted records an admission at now.
func (c *closedTime) admitted(now int64) {
	if since := c.since.Load(); since != 0 {
		if c.since.CompareAndSwap(since, 0) {
			c.total.Add(max(now-since, 0))
		}
	}
}

// at returns the closed time up to now, counting a closed interval still
// open.
func (c *closedTime) at(now int64) time.Duration {
	total := c.total.Load()
	if since := c.since.Load(); since != 0 {
		total += max(now-since, 0)
	}
	return time.Duration(total)
}
