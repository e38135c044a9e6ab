package client

import (
	"fmt"
	"sync"
	"time"
)

// State is a circuit breaker's state.
type State uint8

const (
	// Closed: requests pass, and their outcomes are counted.
	Closed State = iota
	// Open: requests fail fast (the balancer routes around the backend)
	// until BreakerConfig.OpenFor has passed.
	Open
	// HalfOpen: at most BreakerConfig.Probes requests pass, as probes;
	// as many successes close the breaker, one failure opens it again.
	HalfOpen
)

// String returns "closed", "open" or "half-open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Defaults of BreakerConfig's zero fields.
const (
	DefaultBreakerWindow            = 10 * time.Second
	DefaultBreakerMinRequests       = 20
	DefaultBreakerFailureRate       = 0.5
	DefaultBreakerConsecutiveErrors = 5
	DefaultBreakerOpenFor           = 5 * time.Second
	DefaultBreakerProbes            = 3
)

// BreakerConfig configures the circuit breaker each backend has. The zero
// value trips when, over the last 10 s and at least 20 requests, half of
// them failed, or when 5 requests in a row got no answer; stays open 5 s;
// then lets 3 probes through.
type BreakerConfig struct {
	// Window is the period the failure rate is computed over, counted in
	// ten buckets; zero means DefaultBreakerWindow.
	Window time.Duration
	// MinRequests is the least number of outcomes in the window for the
	// rate to count; zero means DefaultBreakerMinRequests.
	MinRequests int
	// FailureRate trips the breaker when reached, in (0, 1]; zero means
	// DefaultBreakerFailureRate.
	FailureRate float64
	// ConsecutiveErrors trips the breaker, whatever the window holds,
	// when that many requests in a row got an error instead of an answer
	// (a connection refused or reset, a dial timeout; not the caller's own
	// deadline): the mark of a backend that is down, which the rate over a
	// window full of its earlier successes would show only seconds later.
	// An answer, even a server error, and the caller's deadline start the
	// count again; a rejection leaves it as it is. Zero means
	// DefaultBreakerConsecutiveErrors,
	// negative means never (the rate alone).
	ConsecutiveErrors int
	// OpenFor is how long the breaker stays open before it lets probes
	// through (the probe interval); zero means DefaultBreakerOpenFor.
	OpenFor time.Duration
	// Probes is the number of requests let through in the half-open
	// state, and of successes that close it; zero means
	// DefaultBreakerProbes.
	Probes int
	// Disabled turns the breakers off: every backend is always closed.
	Disabled bool
}

// BreakerStats is a breaker's state and counters.
type BreakerStats struct {
	// State is the state now (an open breaker whose time is up reads
	// Open until a request asks it).
	State State
	// Since is when it entered State.
	Since time.Time
	// Requests and Failures are the outcomes counted in the window now.
	Requests, Failures int
	// Opened counts the times it opened, from closed or half-open.
	Opened int64
	// Rejected counts the requests it refused (failed fast).
	Rejected int64
}

// breaker is one backend's circuit breaker.
type breaker struct {
	cfg      BreakerConfig
	bucket   time.Duration
	onChange func(from, to State)

	mu       sync.Mutex
	state    State
	since    time.Time
	start    time.Time // start of the current bucket
	cur      int
	reqs     [budgetBuckets]int
	fails    [budgetBuckets]int
	probes   int // half-open: probes let through
	probesOK int // half-open: probes that succeeded
	errors   int // closed: requests in a row that got no answer
	opened   int64
	rejected int64
}

func (c *BreakerConfig) defaults() {
	if c.Window <= 0 {
		c.Window = DefaultBreakerWindow
	}
	if c.MinRequests <= 0 {
		c.MinRequests = DefaultBreakerMinRequests
	}
	if c.FailureRate <= 0 || c.FailureRate > 1 {
		c.FailureRate = DefaultBreakerFailureRate
	}
	if c.ConsecutiveErrors == 0 {
		c.ConsecutiveErrors = DefaultBreakerConsecutiveErrors
	}
	if c.OpenFor <= 0 {
		c.OpenFor = DefaultBreakerOpenFor
	}
	if c.Probes <= 0 {
		c.Probes = DefaultBreakerProbes
	}
}

// newBreaker returns a closed breaker; cfg has its defaults. onChange, if
// set, is called on each transition, outside the breaker's lock.
func newBreaker(cfg BreakerConfig, now time.Time, onChange func(from, to State)) *breaker {
	return &breaker{cfg: cfg, bucket: max(cfg.Window/budgetBuckets, time.Millisecond), since: now, start: now, onChange: onChange}
}

// transition is a state change to report once the lock is released.
type transition struct {
	from, to State
	ok       bool
}

func (b *breaker) report(t transition) {
	if t.ok && b.onChange != nil {
		b.onChange(t.from, t.to)
	}
}

// set changes the state. Called with mu held.
func (b *breaker) set(to State, now time.Time) transition {
	t := transition{from: b.state, to: to, ok: b.state != to}
	b.state, b.since = to, now
	b.probes, b.probesOK, b.errors = 0, 0, 0
	b.clear(now)
	if to == Open {
		b.opened++
	}
	return t
}

// clear empties the window. Called with mu held.
func (b *breaker) clear(now time.Time) {
	b.reqs, b.fails = [budgetBuckets]int{}, [budgetBuckets]int{}
	b.start, b.cur = now, 0
}

// advance moves the window to now. Called with mu held.
func (b *breaker) advance(now time.Time) {
	for n := 0; now.Sub(b.start) >= b.bucket && n < budgetBuckets; n++ {
		b.start = b.start.Add(b.bucket)
		b.cur = (b.cur + 1) % budgetBuckets
		b.reqs[b.cur], b.fails[b.cur] = 0, 0
	}
	if now.Sub(b.start) >= b.bucket {
		b.start = now
	}
}

// ready reports, without changing anything, whether a request could pass
// now: closed, open past OpenFor, or half-open with a probe left.
func (b *breaker) ready(now time.Time) bool {
	if b.cfg.Disabled {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Open:
		return now.Sub(b.since) >= b.cfg.OpenFor
	case HalfOpen:
		return b.probes < b.cfg.Probes
	}
	return true
}

// allow lets a request through, or refuses it (fail fast). An open breaker
// past OpenFor turns half-open here, and a request it lets through then is
// a probe. Every request allowed must be ended with done.
func (b *breaker) allow(now time.Time) bool {
	if b.cfg.Disabled {
		return true
	}
	b.mu.Lock()
	var t transition
	if b.state == Open && now.Sub(b.since) >= b.cfg.OpenFor {
		t = b.set(HalfOpen, now)
	}
	ok := true
	switch b.state {
	case Open:
		ok = false
	case HalfOpen:
		ok = b.probes < b.cfg.Probes
		if ok {
			b.probes++
		}
	}
	if !ok {
		b.rejected++
	}
	b.mu.Unlock()
	b.report(t)
	return ok
}

// Outcomes of a request, as the breaker counts them.
type verdict uint8

const (
	// success: the backend answered.
	success verdict = iota
	// failure: a server error, or no answer within the caller's deadline.
	failure
	// unanswered: a failure without an answer: the connection refused or
	// broken, a dial timeout (BreakerConfig.ConsecutiveErrors).
	unanswered
	// neutral: the backend refused the request unstarted (it is up but
	// busy), or the caller gave up; not counted while closed, a success
	// for a probe (the backend is up).
	neutral
	// unused: the permission was given back without a request being
	// sent (the retry it was taken for did not happen): not counted, and
	// a half-open breaker's probe slot is free again.
	unused
)

// failed reports whether v counts as a failure.
func (v verdict) failed() bool { return v == failure || v == unanswered }

// done ends a request that allow let through, with its outcome.
func (b *breaker) done(v verdict, now time.Time) {
	if b.cfg.Disabled {
		return
	}
	b.mu.Lock()
	var t transition
	switch {
	case v == unused:
		if b.state == HalfOpen && b.probes > 0 {
			b.probes--
		}
		b.mu.Unlock()
		return
	}
	switch b.state {
	case Closed:
		if v == neutral {
			break
		}
		b.advance(now)
		b.reqs[b.cur]++
		if v.failed() {
			b.fails[b.cur]++
		}
		if v == unanswered {
			b.errors++
		} else {
			b.errors = 0
		}
		reqs, fails := b.counts()
		switch {
		case reqs >= b.cfg.MinRequests && float64(fails) >= b.cfg.FailureRate*float64(reqs),
			b.cfg.ConsecutiveErrors > 0 && b.errors >= b.cfg.ConsecutiveErrors:
			t = b.set(Open, now)
		}
	case HalfOpen:
		if v.failed() {
			t = b.set(Open, now)
			break
		}
		b.probesOK++
		if b.probesOK >= b.cfg.Probes {
			t = b.set(Closed, now)
		}
	case Open:
		// A request let through before the breaker opened: its outcome
		// no longer matters.
	}
	b.mu.Unlock()
	b.report(t)
}

// counts sums the window. Called with mu held.
func (b *breaker) counts() (reqs, fails int) {
	for i := range budgetBuckets {
		reqs += b.reqs[i]
		fails += b.fails[i]
	}
	return reqs, fails
}

// stats returns the breaker's state and counters.
func (b *breaker) stats(now time.Time) BreakerStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == Closed {
		b.advance(now)
	}
	reqs, fails := b.counts()
	return BreakerStats{State: b.state, Since: b.since, Requests: reqs, Failures: fails, Opened: b.opened, Rejected: b.rejected}
}
