package gate

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Concurrency is a fixed concurrency limit: it admits a request while fewer
// than Limit requests are in flight. The limit can be changed live with
// SetLimit; lowering it below the in-flight count admits nothing until
// enough requests have ended to bring the count under the new limit (the
// excess is repaid as requests finish; nothing is revoked, the count never
// goes negative, and no request is admitted over the limit in force when it
// was decided).
//
// Acquire is a compare-and-swap loop on the in-flight count, Release one
// atomic add.
type Concurrency struct {
	inflight atomic.Int64
	limit    atomic.Int64
	wake     wakers
}

// NewConcurrency returns a gate that admits up to limit requests at a time.
// A limit of zero refuses everything; a negative limit panics.
func NewConcurrency(limit int) *Concurrency {
	c := &Concurrency{}
	c.setLimit(limit)
	return c
}

func (c *Concurrency) setLimit(n int) (raised bool) {
	if n < 0 {
		panic(fmt.Sprintf("gate: negative concurrency limit %d", n))
	}
	return c.limit.Swap(int64(n)) < int64(n)
}

// SetLimit changes the limit live. Raising it calls the OnOpen callbacks.
func (c *Concurrency) SetLimit(n int) {
	if c.setLimit(n) {
		c.wake.fire()
	}
}

// Limit returns the current limit.
func (c *Concurrency) Limit() int { return int(c.limit.Load()) }

// InFlight returns the number of requests admitted and not yet released.
func (c *Concurrency) InFlight() int { return int(c.inflight.Load()) }

// Acquire admits a request iff fewer than Limit are in flight.
func (c *Concurrency) Acquire() bool {
	for {
		n := c.inflight.Load()
		if n >= c.limit.Load() {
			return false
		}
		if c.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release ends an admitted request. When it leaves the count under the limit
// it calls the OnOpen callbacks, unless latency is Undo. It panics if
// nothing was in flight (a Release without its Acquire).
func (c *Concurrency) Release(latency time.Duration) {
	if c.release() < c.limit.Load() && latency != Undo {
		c.wake.fire()
	}
}

// release decrements the in-flight count and returns the new count.
func (c *Concurrency) release() int64 {
	n := c.inflight.Add(-1)
	if n < 0 {
		c.inflight.Add(1)
		panic("gate: Release without Acquire")
	}
	return n
}

// Name returns "concurrency".
func (c *Concurrency) Name() string { return "concurrency" }

// Reserves reports true: each Acquire takes a slot of the limit.
func (c *Concurrency) Reserves() bool { return true }

// OnOpen registers fn to be called when a Release leaves the in-flight count
// under the limit, and when SetLimit raises the limit. fn runs on the
// goroutine that called Release or SetLimit.
func (c *Concurrency) OnOpen(fn func()) { c.wake.add(fn) }
