package client

import (
	"sync"
	"time"
)

// Defaults of BudgetConfig's zero fields.
const (
	// DefaultBudgetRatio: retries may add at most 10% to the requests.
	DefaultBudgetRatio = 0.1
	// DefaultBudgetMinPerSecond is the floor: 10 retries a second, so
	// that a client that sends little can still retry.
	DefaultBudgetMinPerSecond = 10.0
	// DefaultBudgetWindow is the window the budget counts over.
	DefaultBudgetWindow = 10 * time.Second
)

// BudgetConfig configures the retry budget, shared by every request of a
// Transport: over the last Window, retries may number at most Ratio times
// the requests, or MinPerSecond times the window's seconds when that is
// more. This is the budget of Finagle's RetryBudget, Envoy's retry budgets
// and gRPC's retry throttling: a retry storm cannot multiply the load by
// more than 1+Ratio, whatever the attempts allowed per request, once the
// requests are more than MinPerSecond/Ratio a second. The floor is a
// floor, as Envoy's minimum (max(percent, minimum)), not a reserve added
// to the ratio as Finagle's: added, it would take the amplification above
// 1+Ratio at any rate.
type BudgetConfig struct {
	// Ratio is the retries allowed per request; zero means
	// DefaultBudgetRatio, negative means none.
	Ratio float64
	// MinPerSecond is the floor, in retries a second: the budget allows
	// at least that many, whatever the requests; zero means
	// DefaultBudgetMinPerSecond, negative means none.
	MinPerSecond float64
	// Window is the period counted; zero means DefaultBudgetWindow. It is
	// counted in ten buckets.
	Window time.Duration
	// Unlimited turns the budget off: every retry the policy allows is
	// made. This is the retry storm; use it only to measure one.
	Unlimited bool
}

// budgetBuckets is the number of buckets a window is counted in.
const budgetBuckets = 10

// budget counts requests and retries in a sliding window of buckets.
type budget struct {
	ratio, floor float64
	unlimited    bool
	bucket       time.Duration

	mu      sync.Mutex
	start   time.Time // start of the current bucket
	cur     int
	reqs    [budgetBuckets]float64
	retries [budgetBuckets]float64
}

func newBudget(c BudgetConfig, now time.Time) *budget {
	b := &budget{ratio: c.Ratio, floor: c.MinPerSecond, unlimited: c.Unlimited, start: now}
	if b.ratio == 0 {
		b.ratio = DefaultBudgetRatio
	}
	if b.floor == 0 {
		b.floor = DefaultBudgetMinPerSecond
	}
	b.ratio, b.floor = max(b.ratio, 0), max(b.floor, 0)
	w := c.Window
	if w <= 0 {
		w = DefaultBudgetWindow
	}
	b.bucket = max(w/budgetBuckets, time.Millisecond)
	return b
}

// advance moves the window to now. Called with mu held.
func (b *budget) advance(now time.Time) {
	for n := 0; now.Sub(b.start) >= b.bucket && n < budgetBuckets; n++ {
		b.start = b.start.Add(b.bucket)
		b.cur = (b.cur + 1) % budgetBuckets
		b.reqs[b.cur], b.retries[b.cur] = 0, 0
	}
	if now.Sub(b.start) >= b.bucket {
		// Idle for a whole window or more: everything is cleared.
		b.start = now
	}
}

// request counts a request (its first attempt).
func (b *budget) request(now time.Time) {
	b.mu.Lock()
	b.advance(now)
	b.reqs[b.cur]++
	b.mu.Unlock()
}

// withdraw takes one retry from the budget and reports whether there was
// one.
func (b *budget) withdraw(now time.Time) bool {
	if b.unlimited {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance(now)
	var reqs, retries float64
	for i := range budgetBuckets {
		reqs += b.reqs[i]
		retries += b.retries[i]
	}
	window := (b.bucket * budgetBuckets).Seconds()
	if retries+1 > max(b.ratio*reqs, b.floor*window) {
		return false
	}
	b.retries[b.cur]++
	return true
}

// refund gives back a retry withdrawn and not made (the request's context
// ended while it waited). It is taken from the current bucket: one that
// has since left the window keeps it, which errs on the side of fewer
// retries.
func (b *budget) refund() {
	if b.unlimited {
		return
	}
	b.mu.Lock()
	if b.retries[b.cur] > 0 {
		b.retries[b.cur]--
	}
	b.mu.Unlock()
}
