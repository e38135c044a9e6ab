package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/reject"
)

// A not-started rejection is retried at once on another backend, and never
// on the one that refused: with every backend refusing, each request tries
// each backend at most once, and sleeps not at all.
func TestNotStartedRetriedElsewhereNeverSame(t *testing.T) {
	a := newScripted(t, "a", rejectNotStarted)
	b := newScripted(t, "b", rejectNotStarted)
	c := newScripted(t, "c", rejectNotStarted)
	clk := newFakeClock(true)
	tr := newTransport(t, Config{Clock: clk, Rand: rand.NewPCG(1, 2), Retry: RetryConfig{MaxAttempts: 5, Budget: BudgetConfig{Unlimited: true}}}, a, b, c)
	for i := range 30 {
		code, err := get(t, tr, strconv.Itoa(i))
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, code, "the last rejection is returned")
	}
	seen := map[string]int{}
	for _, s := range []*scripted{a, b, c} {
		per := map[string]bool{}
		for _, id := range s.requests() {
			assert.False(t, per[id], "request %s sent twice to %s", id, s.name)
			per[id] = true
			seen[id]++
		}
	}
	for i := range 30 {
		assert.Equal(t, 3, seen[strconv.Itoa(i)], "request %d tried on every backend once", i)
	}
	assert.Empty(t, clk.Sleeps(), "not-started retries wait for nothing")

	// One backend refusing: its requests succeed elsewhere, in one retry.
	b.set(ok)
	c.set(ok)
	for i := range 30 {
		code, err := get(t, tr, "ok"+strconv.Itoa(i))
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, code)
	}
	st := tr.Stats()
	assert.Equal(t, int64(60), st.Requests)
}

// With RetrySameBackend (the naive client, to measure the storm) a
// rejection may be retried on the backend that refused it: attempts go on
// until MaxAttempts, alternating between the two backends, with no wait.
func TestRetrySameBackendStorms(t *testing.T) {
	a := newScripted(t, "a", rejectNotStarted)
	b := newScripted(t, "b", rejectNotStarted)
	clk := newFakeClock(true)
	tr := newTransport(t, Config{
		Clock: clk, Balancer: BalancerConfig{RoundRobin: true}, Breaker: BreakerConfig{Disabled: true},
		Retry: RetryConfig{MaxAttempts: 7, RetrySameBackend: true, Budget: BudgetConfig{Unlimited: true}},
	}, a, b)
	code, err := get(t, tr, "storm")
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, int64(7), a.hits.Load()+b.hits.Load(), "every attempt allowed is made")
	assert.Equal(t, []int64{4, 3}, []int64{max(a.hits.Load(), b.hits.Load()), min(a.hits.Load(), b.hits.Load())},
		"never twice in a row on the same backend while the other can take it")
	assert.Empty(t, clk.Sleeps())
	st := tr.Stats()
	assert.Equal(t, int64(1), st.Requests)
	assert.Equal(t, int64(7), st.Attempts)
	assert.Equal(t, int64(6), st.Retries)

	// The budget still applies: by default 10% of the requests, or 10 a
	// second over 10 s when that is more, so 20 requests that would retry
	// 6 times each (120) retry 100 times in all.
	capped := newTransport(t, Config{
		Clock: newFakeClock(true), Breaker: BreakerConfig{Disabled: true},
		Retry: RetryConfig{MaxAttempts: 7, RetrySameBackend: true},
	}, a, b)
	for i := range 20 {
		_, err := get(t, capped, strconv.Itoa(i))
		require.NoError(t, err)
	}
	assert.Equal(t, int64(100), capped.Stats().Retries)
}

// A connection refused is a request that never started: retried
// elsewhere, and counted by the dead backend's breaker.
func TestConnectionRefusedRetriedElsewhere(t *testing.T) {
	live := newScripted(t, "live", ok)
	dead := newScripted(t, "dead", ok)
	dead.srv.Close()
	tr := newTransport(t, Config{Clock: newFakeClock(true), Rand: rand.NewPCG(3, 4), Breaker: BreakerConfig{Disabled: true}}, live, dead)
	for i := range 20 {
		code, err := get(t, tr, strconv.Itoa(i))
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, code)
	}
	assert.Equal(t, int64(20), live.hits.Load())
}

// A request that may have started is retried only when allowed and
// idempotent.
func TestMaybeStartedRetriedOnlyWhenAllowed(t *testing.T) {
	for _, c := range []struct {
		name    string
		allow   bool
		method  string
		retried bool
	}{
		{"not allowed", false, http.MethodGet, false},
		{"allowed, idempotent", true, http.MethodGet, true},
		{"allowed, not idempotent", true, http.MethodPost, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newScripted(t, "a", status(http.StatusBadGateway, ""))
			b := newScripted(t, "b", status(http.StatusBadGateway, ""))
			clk := newFakeClock(true)
			tr := newTransport(t, Config{Clock: clk, Rand: rand.NewPCG(5, 6), Retry: RetryConfig{RetryStarted: c.allow, MaxAttempts: 2}}, a, b)
			code, err := send(t, context.Background(), tr, c.method, "x")
			require.NoError(t, err)
			assert.Equal(t, http.StatusBadGateway, code)
			sent := a.hits.Load() + b.hits.Load()
			if c.retried {
				assert.Equal(t, int64(2), sent)
				require.Len(t, clk.Sleeps(), 1)
				assert.Less(t, clk.Sleeps()[0], DefaultBackoffInitial, "full jitter under the first ceiling")
				assert.Equal(t, int64(1), a.hits.Load(), "the retry prefers the other backend")
			} else {
				assert.Equal(t, int64(1), sent)
				assert.Empty(t, clk.Sleeps())
			}
		})
	}
}

// The backoff is exponential with full jitter: each wait lies under its
// ceiling, and the ceilings double up to the maximum.
func TestBackoffFullJitter(t *testing.T) {
	c := RetryConfig{BackoffInitial: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}
	c.defaults()
	r := newRNG(rand.NewPCG(7, 8))
	for n, ceil := range map[int]time.Duration{1: 10 * time.Millisecond, 2: 20 * time.Millisecond, 3: 40 * time.Millisecond, 4: 50 * time.Millisecond, 80: 50 * time.Millisecond} {
		var top time.Duration
		for range 200 {
			d := c.backoff(n, r)
			require.GreaterOrEqual(t, d, time.Duration(0))
			require.Less(t, d, ceil, "retry %d", n)
			top = max(top, d)
		}
		assert.Greater(t, top, ceil*3/4, "retry %d: the waits spread over the whole range", n)
	}
}

// Under a storm (every backend refusing every request), the budget caps
// the retries at its ratio of the requests.
// A retry the budget allowed but that was never made (the request's
// context ended while it waited for a quota's Retry-After) is given back
// to the budget: the retries it allows are those made.
func TestBudgetRefundsRetriesNotMade(t *testing.T) {
	quota := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Sluice-Not-Started", "1")
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(http.StatusTooManyRequests)
	}
	backends := []*scripted{newScripted(t, "a", quota), newScripted(t, "b", quota)}
	clk := newFakeClock(false)
	tr := newTransport(t, Config{Clock: clk, Rand: rand.NewPCG(3, 4), Retry: RetryConfig{MaxAttempts: 2, Budget: BudgetConfig{Ratio: -1, MinPerSecond: 1, Window: 10 * time.Second}}}, backends...)
	for i := range 10 { // the whole budget: 1 a second over 10 s
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := send(t, ctx, tr, http.MethodGet, strconv.Itoa(i))
			done <- err
		}()
		require.Eventually(t, func() bool { return len(clk.Sleeps()) == i+1 }, 10*time.Second, time.Millisecond, "waits for the Retry-After")
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	}
	st := tr.Stats()
	assert.Zero(t, st.Retries, "none made")
	assert.Zero(t, st.BudgetDenied)

	for _, b := range backends {
		b.set(rejectNotStarted)
	}
	code, err := get(t, tr, "after")
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	st = tr.Stats()
	assert.Equal(t, int64(1), st.Retries, "the budget still has its retries")
	assert.Zero(t, st.BudgetDenied)
}

func TestBudgetCapsRetriesUnderStorm(t *testing.T) {
	backends := []*scripted{newScripted(t, "a", rejectNotStarted), newScripted(t, "b", rejectNotStarted), newScripted(t, "c", rejectNotStarted)}
	clk := newFakeClock(true)
	tr := newTransport(t, Config{Clock: clk, Rand: rand.NewPCG(9, 10), Retry: RetryConfig{MaxAttempts: 3, Budget: BudgetConfig{Ratio: 0.1, MinPerSecond: -1}}}, backends...)
	const n = 500
	for i := range n {
		_, err := get(t, tr, strconv.Itoa(i))
		require.NoError(t, err)
	}
	st := tr.Stats()
	assert.Equal(t, int64(n), st.Requests)
	assert.LessOrEqual(t, st.Retries, int64(n/10), "at most 10%% of the requests")
	assert.GreaterOrEqual(t, st.Retries, int64(n/10-2), "the budget is used")
	assert.Equal(t, st.Requests+st.Retries, st.Attempts)
	assert.Positive(t, st.BudgetDenied)
	amplification := float64(st.Attempts) / float64(st.Requests)
	assert.LessOrEqual(t, amplification, 1.1)

	// The floor: a client that sends little may still retry.
	clk2 := newFakeClock(true)
	tr2 := newTransport(t, Config{Clock: clk2, Rand: rand.NewPCG(9, 10), Retry: RetryConfig{MaxAttempts: 2, Budget: BudgetConfig{Ratio: -1, MinPerSecond: 1, Window: 10 * time.Second}}}, backends...)
	for i := range 20 {
		_, err := get(t, tr2, strconv.Itoa(i))
		require.NoError(t, err)
	}
	assert.Equal(t, int64(10), tr2.Stats().Retries, "1 a second over 10 s")
	clk2.Advance(11 * time.Second)
	_, err := get(t, tr2, "later")
	require.NoError(t, err)
	assert.Equal(t, int64(11), tr2.Stats().Retries, "the window moved on")

	// Both: the floor is a floor, not added to the ratio, so that a storm
	// amplifies the load by 1+Ratio at most once the requests are many.
	clk3 := newFakeClock(true)
	tr3 := newTransport(t, Config{Clock: clk3, Rand: rand.NewPCG(9, 10), Retry: RetryConfig{MaxAttempts: 3, Budget: BudgetConfig{Ratio: 0.1, MinPerSecond: 1, Window: 10 * time.Second}}}, backends...)
	for i := range 20 {
		_, err := get(t, tr3, strconv.Itoa(i))
		require.NoError(t, err)
	}
	assert.Equal(t, int64(10), tr3.Stats().Retries, "few requests: the floor, 1 a second over 10 s")
	for i := range n - 20 {
		_, err := get(t, tr3, "more"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	st = tr3.Stats()
	assert.Equal(t, int64(n/10), st.Retries, "many: 10%, not 10% plus the floor")
	assert.LessOrEqual(t, float64(st.Attempts)/float64(st.Requests), 1.1)
}

// Retry-After is honoured on 503 and on 429: the retry waits at least
// that long, and is not made when that would pass the deadline.
func TestRetryAfterHonoured(t *testing.T) {
	for _, code := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			a := newScripted(t, "a", status(code, "2"))
			clk := newFakeClock(true)
			tr := newTransport(t, Config{Clock: clk, Rand: rand.NewPCG(11, 12), Retry: RetryConfig{RetryStarted: true, MaxAttempts: 2}}, a)
			got, err := get(t, tr, "x")
			require.NoError(t, err)
			assert.Equal(t, code, got)
			require.Len(t, clk.Sleeps(), 1)
			assert.Equal(t, 2*time.Second, clk.Sleeps()[0])
			assert.Equal(t, int64(2), a.hits.Load())

			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			got, err = send(t, ctx, tr, http.MethodGet, "short")
			require.NoError(t, err)
			assert.Equal(t, code, got, "no retry: 2 s would pass the deadline")
			assert.Equal(t, int64(3), a.hits.Load())
		})
	}

	// A quota's refusal, marked not started: the retry goes elsewhere, after
	// Retry-After (quotas are often shared by the backends).
	q := newScripted(t, "quota", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Sluice-Not-Started", "1")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	q2 := newScripted(t, "quota2", ok)
	clk := newFakeClock(true)
	tr := newTransport(t, Config{Clock: clk, Rand: rand.NewPCG(13, 14)}, q, q2)
	for i := range 10 {
		got, err := get(t, tr, strconv.Itoa(i))
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, got)
	}
	for _, d := range clk.Sleeps() {
		assert.Equal(t, time.Second, d)
	}
	assert.Equal(t, int(q.hits.Load()), len(clk.Sleeps()))
}

// The time left before the context's deadline goes with each attempt.
func TestDeadlineHeaderSent(t *testing.T) {
	a := newScripted(t, "a", ok)
	tr := newTransport(t, Config{}, a)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := send(t, ctx, tr, http.MethodGet, "x")
	require.NoError(t, err)
	_, err = get(t, tr, "none")
	require.NoError(t, err)
	h := a.headers()
	require.Len(t, h, 2)
	left, ok := admit.ParseTimeout(h[0].Get(admit.TimeoutHeader))
	require.True(t, ok, "sent: %q", h[0].Get(admit.TimeoutHeader))
	assert.LessOrEqual(t, left, 300*time.Millisecond)
	assert.Greater(t, left, 0*time.Millisecond)
	assert.Empty(t, h[1].Get(admit.TimeoutHeader), "no deadline, no field")
}

// The power of two choices avoids a backend whose server says it is
// loaded, and a backend that refused recently.
func TestBalancerFollowsLoadHint(t *testing.T) {
	hint := func(load string) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(admit.LoadHeader, load)
			ok(w, r)
		}
	}
	a := newScripted(t, "a", hint("0.10"))
	b := newScripted(t, "b", hint("0.10"))
	busy := newScripted(t, "busy", hint("9.00"))
	clk := newFakeClock(true)
	tr := newTransport(t, Config{Clock: clk, Rand: rand.NewPCG(15, 16)}, a, b, busy)
	for i := range 300 {
		_, err := get(t, tr, strconv.Itoa(i))
		require.NoError(t, err)
	}
	// Real latencies differ by noise; the hint's factor of 10 dominates.
	assert.Less(t, busy.hits.Load(), int64(30), "the loaded backend gets little")
	assert.Greater(t, a.hits.Load(), int64(100))
	assert.Greater(t, b.hits.Load(), int64(100))
}

// Round robin rotates, whatever the load.
func TestRoundRobin(t *testing.T) {
	a, b, c := newScripted(t, "a", ok), newScripted(t, "b", ok), newScripted(t, "c", ok)
	tr := newTransport(t, Config{Balancer: BalancerConfig{RoundRobin: true}}, a, b, c)
	for i := range 30 {
		_, err := get(t, tr, strconv.Itoa(i))
		require.NoError(t, err)
	}
	for _, s := range []*scripted{a, b, c} {
		assert.Equal(t, int64(10), s.hits.Load(), s.name)
	}
}

// The resolver is re-read every ResolveEvery: requests move to the new
// backends, and a failed resolution keeps the old ones.
func TestResolverReRead(t *testing.T) {
	old, fresh := newScripted(t, "old", ok), newScripted(t, "new", ok)
	var mu sync.Mutex
	list, fail := []string{old.srv.URL}, error(nil)
	calls := make(chan struct{}, 10)
	resolve := func(context.Context) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		calls <- struct{}{}
		return list, fail
	}
	clk := newFakeClock(false)
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	tr, err := New(Config{Clock: clk, Base: base, Balancer: BalancerConfig{Resolve: resolve, ResolveEvery: time.Second}})
	require.NoError(t, err)
	defer tr.Close()
	<-calls
	_, err = get(t, tr, "1")
	require.NoError(t, err)
	assert.Equal(t, int64(1), old.hits.Load())

	mu.Lock()
	list = []string{fresh.srv.URL}
	mu.Unlock()
	waitSleeping(t, clk)
	clk.Advance(time.Second)
	<-calls
	waitSleeping(t, clk) // the update is done once it sleeps again
	_, err = get(t, tr, "2")
	require.NoError(t, err)
	assert.Equal(t, int64(1), fresh.hits.Load())

	mu.Lock()
	fail = errors.New("dns down")
	mu.Unlock()
	clk.Advance(time.Second)
	<-calls
	waitSleeping(t, clk)
	_, err = get(t, tr, "3")
	require.NoError(t, err)
	assert.Equal(t, int64(2), fresh.hits.Load(), "a failed resolution keeps the backends")
	assert.Equal(t, int64(1), tr.Stats().ResolveErrors)
	require.NoError(t, tr.Close())
}

// waitSleeping waits until the resolver sleeps on the fake clock.
func waitSleeping(t *testing.T, clk *fakeClock) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for clk.Waiting() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the resolver never slept")
		}
		time.Sleep(time.Millisecond)
	}
}

// A backend that dies is cut off by its breaker: requests go to the
// others, and with every breaker open they fail fast with ErrNoBackend.
func TestBreakerCutsOffDeadBackend(t *testing.T) {
	live, dying := newScripted(t, "live", ok), newScripted(t, "dying", status(http.StatusInternalServerError, ""))
	clk := newFakeClock(true)
	var mu sync.Mutex
	var changes []string
	tr := newTransport(t, Config{
		Clock: clk, Rand: rand.NewPCG(17, 18),
		Breaker: BreakerConfig{MinRequests: 5, OpenFor: time.Second, Probes: 2},
		OnStateChange: func(backend string, from, to State) {
			mu.Lock()
			defer mu.Unlock()
			changes = append(changes, fmt.Sprintf("%s→%s", from, to))
		},
	}, live, dying)
	for i := range 100 {
		_, err := get(t, tr, strconv.Itoa(i))
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, dying.hits.Load(), int64(5), "open after 5 failures")
	st := tr.Stats()
	for _, b := range st.Backends {
		if b.URL == dying.srv.URL {
			assert.Equal(t, Open, b.Breaker.State)
			assert.Positive(t, b.Failed)
		}
	}

	// Back up: after OpenFor, two probes close it again.
	dying.set(ok)
	clk.Advance(time.Second)
	for i := range 100 {
		_, err := get(t, tr, "back"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	assert.Greater(t, dying.hits.Load(), int64(7), "traffic again")
	mu.Lock()
	assert.Equal(t, []string{"closed→open", "open→half-open", "half-open→closed"}, changes)
	mu.Unlock()

	// Everything failing: every breaker opens, then requests fail fast.
	live.set(status(http.StatusInternalServerError, ""))
	dying.set(status(http.StatusInternalServerError, ""))
	clk.Advance(11 * time.Second) // past the window of successes
	var fast error
	for i := range 100 {
		if _, err := get(t, tr, "down"+strconv.Itoa(i)); err != nil {
			fast = err
			break
		}
	}
	require.ErrorIs(t, fast, ErrNoBackend)
	assert.Positive(t, tr.Stats().NoBackend)
}

// A backend that dies after a full window of successes is cut off within
// a few attempts (ConsecutiveErrors), the requests it refuses going
// elsewhere meanwhile, and its fast failures do not lower its latency
// average.
func TestBreakerOpensAtOnceOnDeath(t *testing.T) {
	live, dying := newScripted(t, "live", ok), newScripted(t, "dying", ok)
	clk := newFakeClock(true)
	opened := make(chan string, 1)
	tr := newTransport(t, Config{
		Clock: clk, Rand: rand.NewPCG(19, 20),
		OnStateChange: func(backend string, _, to State) {
			if to == Open {
				opened <- backend
			}
		},
	}, live, dying)
	for i := range 200 {
		_, err := get(t, tr, strconv.Itoa(i))
		require.NoError(t, err)
	}
	require.Positive(t, dying.hits.Load())
	before := tr.Stats().Backends[1]
	require.Equal(t, dying.srv.URL, before.URL)
	dying.srv.Close()
	for i := range 50 {
		code, err := get(t, tr, "dead"+strconv.Itoa(i))
		require.NoError(t, err, "refused, retried on the live one")
		assert.Equal(t, http.StatusOK, code)
	}
	select {
	case b := <-opened:
		assert.Equal(t, dying.srv.URL, b)
	default:
		t.Fatal("the breaker did not open")
	}
	after := tr.Stats().Backends[1]
	assert.Equal(t, Open, after.Breaker.State)
	assert.Equal(t, int64(DefaultBreakerConsecutiveErrors), after.Failed, "open after 5 refusals, whatever the window held")
	assert.GreaterOrEqual(t, after.Latency, before.Latency, "failing fast does not make it look fast")
}

func TestFailureOnlyRaisesLatency(t *testing.T) {
	now := time.Now()
	var b backend
	b.observe(10*time.Millisecond, now, time.Second)
	b.raise(100*time.Microsecond, now.Add(time.Millisecond))
	assert.InDelta(t, 0.010, b.latency, 1e-9, "a fast failure leaves it")
	b.raise(50*time.Millisecond, now.Add(2*time.Millisecond))
	assert.InDelta(t, 0.050, b.latency, 1e-9, "a slow one raises it")
	b.observe(time.Millisecond, now.Add(time.Second), time.Second)
	assert.Less(t, b.latency, 0.050, "answers bring it down")
}

// New refuses a configuration without backends, or with a bad one.
func TestNewErrors(t *testing.T) {
	_, err := New(Config{})
	assert.ErrorContains(t, err, "no backends")
	_, err = New(Config{Balancer: BalancerConfig{Backends: []string{"10.0.0.1:80"}}})
	assert.ErrorContains(t, err, "base URL")
	_, err = New(Config{Balancer: BalancerConfig{Resolve: func(context.Context) ([]string, error) { return nil, errors.New("boom") }}})
	assert.ErrorContains(t, err, "boom")
}

// A request whose body cannot be replayed is not retried.
func TestBodyWithoutGetBodyNotRetried(t *testing.T) {
	a, b := newScripted(t, "a", rejectNotStarted), newScripted(t, "b", rejectNotStarted)
	tr := newTransport(t, Config{Clock: newFakeClock(true)}, a, b)
	req, err := http.NewRequest(http.MethodPut, "http://service/x", struct{ io.Reader }{strings.NewReader("abc")})
	require.NoError(t, err)
	require.Nil(t, req.GetBody)
	req.ContentLength = 3
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	discard(resp)
	assert.Equal(t, int64(1), a.hits.Load()+b.hits.Load())
}

// A gRPC call a sluice server refuses is answered in gRPC's terms (status
// 200, grpc-status 14, a Trailers-Only response) with the not-started
// marker among its headers: the client retries it at once on another
// backend, as an HTTP rejection, and never on the one that refused.
func TestGRPCRejectionRetriedElsewhere(t *testing.T) {
	refuseGRPC := func(w http.ResponseWriter, _ *http.Request) {
		reject.NewAnswer("busy", http.StatusServiceUnavailable, time.Second, nil).SetGRPCHeader(w.Header(), nil)
		w.WriteHeader(http.StatusOK)
	}
	a := newScripted(t, "a", refuseGRPC)
	b := newScripted(t, "b", ok)
	clk := newFakeClock(true)
	tr := newTransport(t, Config{Clock: clk, Rand: rand.NewPCG(1, 2), Retry: RetryConfig{MaxAttempts: 3, Budget: BudgetConfig{Unlimited: true}}}, a, b)
	for i := range 20 {
		code, err := get(t, tr, strconv.Itoa(i))
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, code)
	}
	require.NotEmpty(t, a.requests(), "premise: some calls went to the refusing backend first")
	assert.Len(t, b.requests(), 20, "every call answered by the backend that did not refuse")
	assert.Empty(t, clk.Sleeps(), "not-started retries wait for nothing")
}
