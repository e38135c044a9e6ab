package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a Clock whose time moves only when told: Advance, or, when
// auto is set, each Sleep, which then returns at once having moved the
// time by its duration. Sleeps are recorded.
type fakeClock struct {
	auto bool

	mu      sync.Mutex
	now     time.Time
	sleeps  []time.Duration
	waiters []waiter
}

type waiter struct {
	at time.Time
	ch chan struct{}
}

func newFakeClock(auto bool) *fakeClock {
	return &fakeClock{auto: auto, now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	if c.auto {
		c.now = c.now.Add(d)
		c.mu.Unlock()
		return ctx.Err()
	}
	w := waiter{at: c.now.Add(d), ch: make(chan struct{})}
	c.waiters = append(c.waiters, w)
	c.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		c.waiters = slices.DeleteFunc(c.waiters, func(x waiter) bool { return x.ch == w.ch })
		c.mu.Unlock()
		return ctx.Err()
	}
}

// Advance moves the time by d and wakes the sleeps that are due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

// Sleeps returns the sleeps so far.
func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// Waiting returns the number of sleeps in progress.
func (c *fakeClock) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// scripted is a backend whose answers a test scripts, and which logs
// each request it receives by its X-Req field.
type scripted struct {
	name   string
	srv    *httptest.Server
	answer atomic.Pointer[func(w http.ResponseWriter, r *http.Request)]
	hits   atomic.Int64

	mu  sync.Mutex
	log []string // X-Req of each request
	hdr []http.Header
}

func newScripted(t *testing.T, name string, answer func(w http.ResponseWriter, r *http.Request)) *scripted {
	t.Helper()
	s := &scripted{name: name}
	s.answer.Store(&answer)
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		s.log = append(s.log, r.Header.Get("X-Req"))
		s.hdr = append(s.hdr, r.Header.Clone())
		s.mu.Unlock()
		(*s.answer.Load())(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scripted) set(answer func(w http.ResponseWriter, r *http.Request)) { s.answer.Store(&answer) }

func (s *scripted) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

func (s *scripted) headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.hdr...)
}

// Answers of scripted backends.
func ok(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }

func rejectNotStarted(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Sluice-Not-Started", "1")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
}

func status(code int, retryAfter string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(code)
	}
}

// newTransport builds a Transport over backends, with a fake clock and a
// seeded random source, closed (with its idle connections) at the end.
func newTransport(t *testing.T, cfg Config, backends ...*scripted) *Transport {
	t.Helper()
	for _, b := range backends {
		cfg.Balancer.Backends = append(cfg.Balancer.Backends, b.srv.URL)
	}
	if cfg.Base == nil {
		base := &http.Transport{}
		t.Cleanup(base.CloseIdleConnections)
		cfg.Base = base
	}
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// get sends one GET through tr, tagged id, and returns its status (0 on an
// error) with the error.
func get(t *testing.T, tr http.RoundTripper, id string) (int, error) {
	return send(t, context.Background(), tr, http.MethodGet, id)
}

func send(t *testing.T, ctx context.Context, tr http.RoundTripper, method, id string) (int, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, "http://service/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Req", id)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	discard(resp)
	return resp.StatusCode, nil
}
