package gate

import (
	"fmt"
	"sync/atomic"

	"github.com/sluice-go/sluice/admit"
)

// Concurrency is a fixed concurrency limit: it admits a request while fewer
// than Limit requests are in flight. The limit can be changed live with
// SetLimit; lowering it below the in-flight count admits nothing until
// enough requests have ended to bring the count under the new limit (the
// excess is repaid as requests finish; nothing is revoked, the count never
// goes negative, and no request is admitted over the limit in force when it
// was decided).
//
// Admit is a compare-and-swap loop on the in-flight count, Done one atomic
// add.
type Concurrency struct {
	inflight atomic.Int64
	limit    atomic.Int64
	wake     wakers
	refusal  *admit.Refusal
}

// ConcurrencyConfig configures a Concurrency gate.
type ConcurrencyConfig struct {
	// Limit is how many requests may be in flight at a time. Zero refuses
	// everything; negative values are refused.
	Limit int
}

// NewConcurrency returns a gate that admits up to cfg.Limit requests at a
// time. It fails, naming the field, if the limit is negative.
func NewConcurrency(cfg ConcurrencyConfig) (*Concurrency, error) {
	if err := checkLimit("ConcurrencyConfig.Limit", cfg.Limit); err != nil {
		return nil, fmt.Errorf("gate: NewConcurrency: %w", err)
	}
	c := &Concurrency{refusal: &admit.Refusal{Reason: "concurrency"}}
	c.limit.Store(int64(cfg.Limit))
	return c, nil
}

func checkLimit(what string, n int) error {
	if n < 0 {
		return fmt.Errorf("%s is %d: use a count of requests, 0 or more (0 refuses everything)", what, n)
	}
	return nil
}

// SetLimit changes the limit live. Raising it tells the attached pipelines,
// which start as many waiting requests as it rose. A negative limit is
// refused with an error, and changes nothing.
func (c *Concurrency) SetLimit(n int) error {
	if err := checkLimit("limit", n); err != nil {
		return fmt.Errorf("gate: Concurrency.SetLimit: %w", err)
	}
	if raised := n - int(c.limit.Swap(int64(n))); raised > 0 {
		c.wake.fire(raised)
	}
	return nil
}

// Limit returns the current limit.
func (c *Concurrency) Limit() int { return int(c.limit.Load()) }

// InFlight returns the number of requests admitted and not yet released.
func (c *Concurrency) InFlight() int { return int(c.inflight.Load()) }

// Admit admits a request iff fewer than Limit are in flight.
func (c *Concurrency) Admit(*admit.Attempt) *admit.Refusal {
	if c.acquire() {
		return nil
	}
	return c.refusal
}

func (c *Concurrency) acquire() bool {
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

// Done ends an admitted request: its slot is free again (the pipeline then
// starts a waiting request in its place). It panics if nothing was in
// flight (a Done without its Admit).
func (c *Concurrency) Done(*admit.Attempt, admit.Outcome) { c.release() }

// release decrements the in-flight count and returns the new count.
func (c *Concurrency) release() int64 {
	n := c.inflight.Add(-1)
	if n < 0 {
		c.inflight.Add(1)
		panic("gate: Done without Admit")
	}
	return n
}

// Name returns "concurrency", the reason of its refusals.
func (c *Concurrency) Name() string { return c.refusal.Reason }

// Attach registers the pipeline to be told when SetLimit raises the limit.
func (c *Concurrency) Attach(env admit.Env) (detach func(), err error) { return c.wake.attach(env) }
