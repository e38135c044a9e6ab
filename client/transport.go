package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/await"
)

// Errors of RoundTrip, wrapped with the request's method and URL.
var (
	// ErrNoBackend: no backend can take the request: none is known, or
	// every breaker is open. It comes at once (fail fast).
	ErrNoBackend = errors.New("client: no backend available")
)

// Config configures a Transport. The zero value of each part works; only
// the backends must be given (Balancer.Backends or Balancer.Resolve).
type Config struct {
	// Balancer says where the backends are and how one is chosen.
	Balancer BalancerConfig
	// Retry says which failures are retried, how often, and the budget.
	Retry RetryConfig
	// Breaker configures the circuit breaker of each backend.
	Breaker BreakerConfig
	// OnStateChange, if set, is called when a backend's breaker changes
	// state, with the backend's base URL, on the goroutine of the request
	// that caused it. It must not block.
	OnStateChange func(backend string, from, to State)
	// Base performs each attempt; nil means &await.Transport{}, over
	// http.DefaultTransport, so that inside a sluice handler an attempt
	// releases the worker while it waits. A Base of your own should be an
	// *await.Transport too, for the same reason.
	Base http.RoundTripper
	// NoDeadlineHeader stops the time left before the request's context
	// deadline from being sent to the backend in admit.TimeoutHeader.
	NoDeadlineHeader bool
	// Clock is the time of backoffs, windows and averages; nil means the
	// real clock, whose waits release the worker in a sluice handler.
	Clock Clock
	// Rand is the random source of the balancer's choices and of the
	// backoff's jitter; nil means math/rand/v2's.
	Rand rand.Source
}

// Transport is an http.RoundTripper that spreads requests over a set of
// backends, retries what is safe to retry within a budget, and cuts off
// backends that keep failing. Create it with New; it is safe for concurrent
// use. Close it when done if Balancer.Resolve is set.
//
// The policies apply in this order, outermost first, to each request:
//
//  1. retry: the whole request, all its attempts, under the request's
//     context and deadline, with the retry budget;
//  2. balancer: each attempt picks a backend, by the power of two choices,
//     among those its breaker lets through and that have not refused this
//     request unstarted;
//  3. breaker: the chosen backend's breaker admits the attempt (an open
//     one is skipped by the balancer: fail fast, or route elsewhere) and
//     counts its outcome;
//  4. deadline: the attempt carries the time left (admit.TimeoutHeader);
//  5. Base: the attempt itself, waiting off the worker.
type Transport struct {
	retry      RetryConfig
	base       http.RoundTripper
	noDeadline bool
	clock      Clock
	rand       *rng
	budget     *budget
	bal        *balancer

	requests, attempts, retries, denied, noBackend, resolveErrs atomic.Int64

	stop     context.CancelFunc
	resolved chan struct{} // closed when the resolver's goroutine ends
	once     sync.Once
}

// New returns a Transport configured by cfg. It fails when no backend is
// given, when a backend is not a base URL, or when the first call to
// Balancer.Resolve fails.
func New(cfg Config) (*Transport, error) {
	t := &Transport{retry: cfg.Retry, base: cfg.Base, noDeadline: cfg.NoDeadlineHeader, clock: cfg.Clock, rand: newRNG(cfg.Rand)}
	if t.base == nil {
		t.base = &await.Transport{}
	}
	if t.clock == nil {
		t.clock = realClock{}
	}
	t.retry.defaults()
	t.budget = newBudget(t.retry.Budget, t.clock.Now())
	bc := cfg.Balancer
	if bc.ResolveEvery <= 0 {
		bc.ResolveEvery = DefaultResolveEvery
	}
	if bc.Decay <= 0 {
		bc.Decay = DefaultDecay
	}
	brc := cfg.Breaker
	brc.defaults()
	t.bal = &balancer{cfg: bc, breaker: brc, clock: t.clock, rand: t.rand, change: cfg.OnStateChange}
	addrs := bc.Backends
	if bc.Resolve != nil {
		var err error
		if addrs, err = bc.Resolve(context.Background()); err != nil {
			return nil, fmt.Errorf("client: resolving the backends: %w", err)
		}
	}
	if len(addrs) == 0 {
		return nil, errors.New("client: no backends: set Balancer.Backends or Balancer.Resolve")
	}
	if err := t.bal.update(addrs); err != nil {
		return nil, err
	}
	if bc.Resolve != nil {
		ctx, stop := context.WithCancel(context.Background())
		t.stop, t.resolved = stop, make(chan struct{})
		resolve := bc.Resolve
		t.bal.cfg.Resolve = func(ctx context.Context) ([]string, error) {
			addrs, err := resolve(ctx)
			if err != nil {
				t.resolveErrs.Add(1)
			}
			return addrs, err
		}
		go t.bal.resolveLoop(ctx, t.resolved)
	}
	return t, nil
}

// Close stops the resolver's goroutine, if any, and waits for it to end.
// Requests may still be made afterwards, on the backends last resolved.
func (t *Transport) Close() error {
	t.once.Do(func() {
		if t.stop != nil {
			t.stop()
			<-t.resolved
		}
	})
	return nil
}

// CloseIdleConnections closes Base's idle connections, if it can.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// RoundTrip implements http.RoundTripper (see Transport for the order of
// the policies). The request's scheme and host are replaced by each
// attempt's backend's. A request with a body is retried only if it has
// GetBody (http.NewRequest sets it for in-memory bodies). When a retry is
// not allowed or not possible, the last answer is returned as it is (a
// 503 with Sluice-Not-Started, say), or the last error, wrapped.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	t.requests.Add(1)
	t.budget.request(t.clock.Now())
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	var skip []*backend // refused this request unstarted: never again
	b := t.bal.pick(nil, nil)
	if b == nil {
		t.noBackend.Add(1)
		return nil, fmt.Errorf("client: %s %s: %w", req.Method, req.URL.Redacted(), ErrNoBackend)
	}
	for n := 1; ; n++ {
		resp, err := t.attempt(ctx, req, b, n)
		k, v := t.retry.classify(ctx, resp, err)
		b.breaker.done(v, t.clock.Now())
		switch {
		case v.failed():
			b.failed.Add(1)
		case k == notStarted && err == nil:
			b.rejected.Add(1)
			b.setHint(rejectedHint, t.clock.Now())
		}
		wait, ok := t.retryable(ctx, req, k, n, replayable, resp)
		if ok && k == notStarted && !t.retry.RetrySameBackend {
			skip = append(skip, b)
		}
		if ok && !t.fits(ctx, wait) {
			ok = false
		}
		// The next backend is chosen (and its breaker's permission taken)
		// before this answer is let go: with nowhere left to go, the
		// caller gets the answer rather than ErrNoBackend.
		var next *backend
		if ok {
			if next = t.bal.pick(skip, b); next == nil {
				ok = false
			}
		}
		if ok && !t.budget.withdraw(t.clock.Now()) {
			t.denied.Add(1)
			next.breaker.done(unused, t.clock.Now()) // give its permission back
			ok = false
		}
		if !ok {
			if err != nil {
				return nil, fmt.Errorf("client: %s %s: %w", req.Method, req.URL.Redacted(), err)
			}
			return resp, nil
		}
		discard(resp)
		if wait > 0 {
			if err := t.clock.Sleep(ctx, wait); err != nil {
				next.breaker.done(unused, t.clock.Now())
				t.budget.refund() // the retry is not made
				return nil, fmt.Errorf("client: %s %s: waiting to retry: %w", req.Method, req.URL.Redacted(), err)
			}
		}
		t.retries.Add(1) // counted when it is made: Attempts = Requests - NoBackend + Retries
		b = next
	}
}

// retryable says whether an attempt's outcome may be retried (the budget
// and the room left aside), and after what wait.
func (t *Transport) retryable(ctx context.Context, req *http.Request, k kind, n int, replayable bool, resp *http.Response) (time.Duration, bool) {
	if n >= t.retry.MaxAttempts || !replayable || ctx.Err() != nil {
		return 0, false
	}
	switch k {
	case notStarted:
		// At once, elsewhere: the Retry-After of an overload is the
		// refusing backend's, which this request will not see again. A
		// quota's (429) is waited, as quotas are often shared.
		if resp != nil && resp.StatusCode == http.StatusTooManyRequests {
			return retryAfter(resp, t.clock.Now()), true
		}
		return 0, true
	case maybeStarted:
		if !t.retry.RetryStarted || !t.retry.Idempotent(req) {
			return 0, false
		}
		return max(t.retry.backoff(n, t.rand), retryAfter(resp, t.clock.Now())), true
	}
	return 0, false
}

// fits reports whether a retry after wait still leaves MinLeft before the
// request's deadline.
func (t *Transport) fits(ctx context.Context, wait time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl)-wait >= t.retry.MinLeft
}

// attempt sends req to b.
func (t *Transport) attempt(ctx context.Context, req *http.Request, b *backend, n int) (*http.Response, error) {
	r := req.Clone(ctx)
	r.URL.Scheme, r.URL.Host = b.url.Scheme, b.url.Host
	if n > 1 && req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			b.breaker.done(neutral, t.clock.Now())
			return nil, fmt.Errorf("client: GetBody: %w", err)
		}
		r.Body = body
	}
	if dl, ok := ctx.Deadline(); ok && !t.noDeadline {
		r.Header.Set(admit.TimeoutHeader, admit.FormatTimeout(time.Until(dl)))
	}
	t.attempts.Add(1)
	b.sent.Add(1)
	b.inFlight.Add(1)
	start := t.clock.Now()
	resp, err := t.base.RoundTrip(r)
	b.inFlight.Add(-1)
	now := t.clock.Now()
	lat := now.Sub(start)
	switch {
	case err != nil:
		b.raise(lat, now) // no reward for failing fast: a peak only
	case resp.Header.Get(admit.LoadHeader) != "":
		if h, perr := strconv.ParseFloat(resp.Header.Get(admit.LoadHeader), 64); perr == nil && h >= 0 {
			b.setHint(h, now)
		}
		fallthrough
	default:
		b.observe(lat, now, t.bal.cfg.Decay)
	}
	return resp, err
}

// discard reads a little of a response that will not be returned, so that
// its connection can be reused, and closes it.
func discard(resp *http.Response) {
	if resp == nil || resp.Body == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	_ = resp.Body.Close()
}

// Stats are a Transport's counters since New, and the state of each
// backend now.
type Stats struct {
	// Requests counts RoundTrip calls; Attempts the attempts sent (first
	// ones and retries); Retries the retries.
	Requests, Attempts, Retries int64
	// BudgetDenied counts retries the budget refused.
	BudgetDenied int64
	// NoBackend counts requests failed fast with ErrNoBackend.
	NoBackend int64
	// ResolveErrors counts failed calls to Balancer.Resolve.
	ResolveErrors int64
	// Backends are the backends known now.
	Backends []BackendStats
}

// BackendStats is what the Transport knows of one backend.
type BackendStats struct {
	// URL is the backend's base URL.
	URL string
	// InFlight is the number of attempts waiting for its answer now.
	InFlight int64
	// Sent counts attempts sent to it; Rejected those it refused
	// unstarted; Failed those that failed (errors, server errors).
	Sent, Rejected, Failed int64
	// Latency is its latency average (peak EWMA); Load its last load
	// hint (admit.LoadHeader), as received.
	Latency time.Duration
	Load    float64
	// Breaker is its breaker's state and counters.
	Breaker BreakerStats
}

// Stats returns the counters.
func (t *Transport) Stats() Stats {
	st := Stats{
		Requests: t.requests.Load(), Attempts: t.attempts.Load(), Retries: t.retries.Load(),
		BudgetDenied: t.denied.Load(), NoBackend: t.noBackend.Load(), ResolveErrors: t.resolveErrs.Load(),
	}
	now := t.clock.Now()
	if s := t.bal.cur.Load(); s != nil {
		for _, b := range s.backends {
			b.mu.Lock()
			lat, hint := b.latency, b.hint
			b.mu.Unlock()
			st.Backends = append(st.Backends, BackendStats{
				URL: b.addr, InFlight: b.inFlight.Load(),
				Sent: b.sent.Load(), Rejected: b.rejected.Load(), Failed: b.failed.Load(),
				Latency: time.Duration(lat * float64(time.Second)), Load: hint,
				Breaker: b.breaker.stats(now),
			})
		}
	}
	return st
}
