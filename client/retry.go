package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/sluice-go/sluice/reject"
)

// Defaults of RetryConfig's zero fields.
const (
	DefaultMaxAttempts    = 3
	DefaultBackoffInitial = 25 * time.Millisecond
	DefaultBackoffMax     = time.Second
	// DefaultMinLeft is the least time a request must have left before
	// its deadline for another attempt to be made.
	DefaultMinLeft = time.Millisecond
)

// RetryConfig configures retries. The zero value makes up to 3 attempts:
// a request that a backend refused unstarted (Sluice-Not-Started: 1, or a
// connection refused) is retried at once on another backend; a request
// that may have started is not retried (set RetryStarted).
type RetryConfig struct {
	// MaxAttempts bounds the attempts per request, the first included;
	// zero means DefaultMaxAttempts, 1 means no retries.
	MaxAttempts int
	// RetryStarted allows the retry of a request that may have started
	// (a connection broken after the request was sent, a timeout, one of
	// Statuses without the not-started marker), when Idempotent says it
	// is idempotent. Such a retry waits a backoff first, and prefers
	// another backend.
	RetryStarted bool
	// Idempotent says whether a request may be repeated; nil means its
	// method is idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) or it
	// has an Idempotency-Key field.
	Idempotent func(r *http.Request) bool
	// Statuses are the statuses that may be retried under RetryStarted;
	// nil means 429, 502, 503 and 504. A response with the not-started
	// marker is retried whatever its status.
	Statuses []int
	// BackoffInitial and BackoffMax shape the backoff before retrying a
	// request that may have started: exponential, with full jitter (a
	// random wait in [0, min(BackoffMax, BackoffInitial·2^(n-1))) before
	// retry n). Zero means DefaultBackoffInitial and DefaultBackoffMax. A
	// Retry-After on a 429 or 503 is the least wait; a retry that would
	// have to wait past the request's deadline is not made.
	BackoffInitial, BackoffMax time.Duration
	// MinLeft is the least time before the request's deadline for
	// another attempt; zero means DefaultMinLeft.
	MinLeft time.Duration
	// Budget caps the retries of all requests together.
	Budget BudgetConfig
	// RetrySameBackend lets a not-started rejection be retried on any
	// backend, the one that refused it included (it is only avoided on the
	// next attempt when another backend can take it), as a client that
	// retries through a round-robin load balancer does. With
	// Budget.Unlimited and a large MaxAttempts it makes the retry storm
	// that a request is never retried on the backend that refused it
	// prevents: it is there to measure one, never set it otherwise.
	RetrySameBackend bool
}

func (c *RetryConfig) defaults() {
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.Idempotent == nil {
		c.Idempotent = Idempotent
	}
	if c.Statuses == nil {
		c.Statuses = []int{http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout}
	}
	if c.BackoffInitial <= 0 {
		c.BackoffInitial = DefaultBackoffInitial
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	c.BackoffMax = max(c.BackoffMax, c.BackoffInitial)
	if c.MinLeft <= 0 {
		c.MinLeft = DefaultMinLeft
	}
}

// Idempotent reports whether r may be repeated: its method is idempotent
// by RFC 9110 (GET, HEAD, OPTIONS, TRACE, PUT, DELETE), or it carries an
// Idempotency-Key field. It is RetryConfig.Idempotent's default.
func Idempotent(r *http.Request) bool {
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return r.Header.Get("Idempotency-Key") != ""
}

// kind is what an attempt's outcome means for a retry.
type kind uint8

const (
	// final: return it (a success, or an answer that is no reason to
	// retry).
	final kind = iota
	// notStarted: refused before any work began: retry at once,
	// elsewhere.
	notStarted
	// maybeStarted: failed, perhaps after work began: retry only if
	// allowed, after a backoff.
	maybeStarted
	// gaveUp: the caller's context ended.
	gaveUp
)

// classify says what an attempt's outcome means, for the retry and for the
// breaker.
func (c *RetryConfig) classify(ctx context.Context, resp *http.Response, err error) (kind, verdict) {
	if err != nil {
		if ctx.Err() != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return gaveUp, failure // the backend was too slow for it
			}
			return gaveUp, neutral
		}
		if refused(err) {
			return notStarted, unanswered
		}
		return maybeStarted, unanswered
	}
	if resp.Header.Get(reject.NotStartedHeader) == "1" {
		return notStarted, neutral
	}
	v := success
	if resp.StatusCode >= 500 {
		v = failure
	}
	if slices.Contains(c.Statuses, resp.StatusCode) {
		return maybeStarted, v
	}
	return final, v
}

// refused reports whether err says that the connection was never made, so
// that the request was not sent.
func refused(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// backoff returns the wait before retry n (1 for the first retry): full
// jitter over an exponential ceiling.
func (c *RetryConfig) backoff(n int, r *rng) time.Duration {
	ceil := c.BackoffMax
	if n-1 < 62 {
		if d := c.BackoffInitial << (n - 1); d > 0 && d < ceil {
			ceil = d
		}
	}
	return time.Duration(r.int64N(int64(ceil)))
}

// retryAfter returns a 429 or 503 answer's Retry-After as a wait from now
// (seconds, or an HTTP date), or zero.
func retryAfter(resp *http.Response, now time.Time) time.Duration {
	if resp == nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
		return 0
	}
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(min(s, 1<<31)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}
