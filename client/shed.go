package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/await"
	"github.com/sluice-go/sluice/reject"
)

// ErrShed is the error of a call that a ShedTransport shed: refused
// locally, before anything was sent. errors.Is(err, ErrShed) tells it, also
// through the *url.Error of an http.Client.
var ErrShed = errors.New("client: call shed before it was sent")

// ShedError is the error a ShedTransport returns for a call it shed
// without a Fallback. It matches ErrShed.
type ShedError struct {
	// Reason is the reason of the policy that refused: "shed-latency",
	// "shed-errors", "cpu", ...
	Reason string
	// RetryAfter is how long the refusal asks callers to wait before
	// calling again: its own, else admit.DefaultRetryAfter (1 s); zero
	// when it asks for none.
	RetryAfter time.Duration
}

// Error says that the call was shed, and why.
func (e *ShedError) Error() string {
	return fmt.Sprintf("%v (%s)", ErrShed, e.Reason)
}

// Is reports whether target is ErrShed.
func (e *ShedError) Is(target error) bool { return target == ErrShed }

// ShedConfig configures a ShedTransport.
type ShedConfig struct {
	// Policies decide, in order, whether a call is sent: the shedders of
	// package shed (shed.NewLatency, NewErrorRate, NewConcurrency,
	// NewCustom), gate.NewCPU for the CPU, or any admit.Policy. The first
	// refusal sheds the call; the policies that admitted it before are
	// given it back unrun (Done with Canceled). Each admitted call ends
	// with Done and its outcome: its latency to the response's header,
	// its status, its error. Nil or empty sheds nothing (loadshed's
	// pass-through).
	Policies []admit.Policy
	// Base sends the calls that are not shed; nil means &await.Transport{},
	// over http.DefaultTransport, so that inside a sluice handler a call
	// releases the worker while it waits. A client.Transport (retries,
	// balancing, breakers) goes here: shedding then comes before its
	// retries, and a shed call is not retried.
	Base http.RoundTripper
	// Fallback, if set, answers a shed call in place of the error
	// (loadshed's Callback): ShedResponse answers with a synthetic 503.
	// It is given the refusal and must not send the call.
	Fallback func(req *http.Request, refusal *admit.Refusal) (*http.Response, error)
	// Clock measures the calls' latencies; nil means the real clock.
	Clock Clock
}

// ShedTransport is an http.RoundTripper that sheds outgoing calls the way
// loadshed's transport wrapper does: before each call, its policies
// decide, as the admission pipeline's do for a server's requests, whether
// the call is sent; a shed call costs nothing downstream and returns at
// once, with an error matching ErrShed or what Fallback answers. The
// policies learn from the calls that were sent: their latency, status and
// error. With the shedders of package shed this is proportional shedding
// on the calls' latency, error rate or number in flight: a dependency
// that slows down or fails gets fewer calls, in proportion, until it
// recovers.
//
// A call ends, for the policies, when Base returns its response (its
// header) or its error, not when its body has been read. A call that its
// caller gave up on (its context canceled) teaches nothing about the
// dependency: its policies are given it back as canceled.
//
// It is safe for concurrent use. Close it to detach the policies that
// implement admit.Attacher.
type ShedTransport struct {
	base     http.RoundTripper
	policies []admit.Policy
	fallback func(*http.Request, *admit.Refusal) (*http.Response, error)
	clock    Clock
	detach   []func()
	once     sync.Once

	sent, shed atomic.Int64
}

// NewShedTransport returns a ShedTransport configured by cfg. Policies
// that implement admit.Attacher are attached as to a pipeline outside the
// sluice executor (no Executor, no Wake); it fails, naming the policy, when
// one is nil or its Attach fails (gate.Busy, which needs the executor).
func NewShedTransport(cfg ShedConfig) (*ShedTransport, error) {
	t := &ShedTransport{base: cfg.Base, fallback: cfg.Fallback, clock: cfg.Clock}
	if t.base == nil {
		t.base = &await.Transport{}
	}
	if t.clock == nil {
		t.clock = realClock{}
	}
	env := admit.Env{
		Now:         func() int64 { return t.clock.Now().UnixNano() },
		GatesClosed: func() time.Duration { return 0 },
	}
	for i, p := range cfg.Policies {
		if p == nil {
			_ = t.Close()
			return nil, fmt.Errorf("client: NewShedTransport: ShedConfig.Policies[%d] is nil: remove it or give a policy (see package gate)", i)
		}
		if at, ok := p.(admit.Attacher); ok {
			detach, err := at.Attach(env)
			if err != nil {
				_ = t.Close()
				return nil, fmt.Errorf("client: NewShedTransport: ShedConfig.Policies[%d] (%T): %w", i, p, err)
			}
			t.detach = append(t.detach, detach)
		}
		t.policies = append(t.policies, p)
	}
	return t, nil
}

// RoundTrip implements http.RoundTripper: it sheds req, or sends it with
// Base and tells the policies how it went.
func (t *ShedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	a := &admit.Attempt{Method: req.Method, Path: req.URL.Path, Header: req.Header, Request: req}
	for i, p := range t.policies {
		r := p.Admit(a)
		if r == nil {
			continue
		}
		for _, q := range t.policies[:i] {
			q.Done(a, admit.Outcome{Canceled: true})
		}
		t.shed.Add(1)
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, sent or not
		}
		if t.fallback != nil {
			return t.fallback(req, r)
		}
		return nil, &ShedError{Reason: r.Reason, RetryAfter: retryAfterOf(r)}
	}
	t.sent.Add(1)
	start := t.clock.Now()
	resp, err := t.base.RoundTrip(req)
	o := admit.Outcome{Latency: t.clock.Now().Sub(start), Err: err}
	switch {
	case err != nil && errors.Is(err, context.Canceled) && req.Context().Err() != nil:
		o = admit.Outcome{Canceled: true}
	case resp != nil:
		o.Status = resp.StatusCode
	}
	for _, p := range t.policies {
		p.Done(a, o)
	}
	return resp, err
}

// retryAfterOf is the wait a refusal asks for: its own, else the
// pipeline's default; zero when it asks for none.
func retryAfterOf(r *admit.Refusal) time.Duration {
	switch {
	case r.RetryAfter < 0:
		return 0
	case r.RetryAfter == 0:
		return admit.DefaultRetryAfter
	}
	return r.RetryAfter
}

// ShedResponse is a ShedConfig.Fallback that answers a shed call as a
// sluice server answers a request it refused, without sending anything:
// the refusal's status (503 by default), Retry-After (1 s by default),
// Sluice-Not-Started: 1, Sluice-Reject-Reason and the one-line body
// "request not started: <reason>". Callers that read status codes see an
// overload; the marker says the call never reached the dependency.
func ShedResponse(req *http.Request, r *admit.Refusal) (*http.Response, error) {
	status := r.Status
	if status == 0 {
		status = admit.DefaultStatus
	}
	ra := r.RetryAfter
	if ra == 0 {
		ra = admit.DefaultRetryAfter
	}
	ans := reject.NewAnswer(r.Reason, status, ra, r.Header)
	h := make(http.Header)
	ans.SetHeader(h, true, nil)
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", status, http.StatusText(status)),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(ans.Body)),
		ContentLength: int64(len(ans.Body)),
		Request:       req,
	}, nil
}

// ShedStats are a ShedTransport's counters since NewShedTransport.
type ShedStats struct {
	// Sent counts the calls passed to Base, Shed those refused.
	Sent, Shed int64
}

// Stats returns the counters.
func (t *ShedTransport) Stats() ShedStats {
	return ShedStats{Sent: t.sent.Load(), Shed: t.shed.Load()}
}

// CloseIdleConnections closes Base's idle connections, if it can.
func (t *ShedTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Close detaches the policies it attached. Calls may still be made
// afterwards. Close may be called more than once.
func (t *ShedTransport) Close() error {
	t.once.Do(func() {
		for _, d := range t.detach {
			d()
		}
	})
	return nil
}
