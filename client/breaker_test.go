package client

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBreakerTransitions(t *testing.T) {
	clk := newFakeClock(false)
	var changes []string
	cfg := BreakerConfig{Window: 10 * time.Second, MinRequests: 10, FailureRate: 0.5, OpenFor: 2 * time.Second, Probes: 2}
	cfg.defaults()
	b := newBreaker(cfg, clk.Now(), func(from, to State) { changes = append(changes, fmt.Sprintf("%s→%s", from, to)) })
	run := func(v verdict) {
		t.Helper()
		require.True(t, b.allow(clk.Now()))
		b.done(v, clk.Now())
	}

	// Under MinRequests, failures do not trip it.
	for range 9 {
		run(failure)
	}
	assert.Equal(t, Closed, b.stats(clk.Now()).State)
	// Rejections (the backend is up but busy) do not count.
	for range 20 {
		run(neutral)
	}
	assert.Equal(t, Closed, b.stats(clk.Now()).State)
	// The window slides: the old failures leave it.
	clk.Advance(11 * time.Second)
	for range 9 {
		run(success)
	}
	run(failure)
	assert.Equal(t, Closed, b.stats(clk.Now()).State, "1 failure in 10")
	for range 7 {
		run(failure)
	}
	assert.Equal(t, Closed, b.stats(clk.Now()).State, "8 failures in 17")
	run(failure)
	st := b.stats(clk.Now())
	assert.Equal(t, Open, st.State, "9 failures in 18")
	assert.Equal(t, int64(1), st.Opened)

	// Open: fail fast until OpenFor.
	assert.False(t, b.allow(clk.Now()))
	clk.Advance(2*time.Second - time.Nanosecond)
	assert.False(t, b.ready(clk.Now()))
	assert.False(t, b.allow(clk.Now()))
	assert.Equal(t, int64(2), b.stats(clk.Now()).Rejected)

	// Half-open: two probes at most; a failure opens it again.
	clk.Advance(time.Nanosecond)
	assert.True(t, b.ready(clk.Now()))
	require.True(t, b.allow(clk.Now()))
	require.True(t, b.allow(clk.Now()))
	assert.False(t, b.allow(clk.Now()), "probes are bounded")
	assert.Equal(t, HalfOpen, b.stats(clk.Now()).State)
	b.done(success, clk.Now())
	b.done(failure, clk.Now())
	assert.Equal(t, Open, b.stats(clk.Now()).State)

	// Two successful probes close it.
	clk.Advance(2 * time.Second)
	run(success)
	assert.Equal(t, HalfOpen, b.stats(clk.Now()).State)
	run(neutral) // a rejection shows the backend is up
	st = b.stats(clk.Now())
	assert.Equal(t, Closed, st.State)
	assert.Equal(t, 0, st.Requests, "a fresh window")
	assert.Equal(t, []string{"closed→open", "open→half-open", "half-open→open", "open→half-open", "half-open→closed"}, changes)
}

// Requests that get no answer, in a row, trip the breaker at once, however
// many successes its window holds: a backend that died.
func TestBreakerConsecutiveErrors(t *testing.T) {
	clk := newFakeClock(false)
	cfg := BreakerConfig{}
	cfg.defaults()
	require.Equal(t, DefaultBreakerConsecutiveErrors, cfg.ConsecutiveErrors)
	b := newBreaker(cfg, clk.Now(), nil)
	run := func(v verdict) {
		t.Helper()
		require.True(t, b.allow(clk.Now()))
		b.done(v, clk.Now())
	}
	for range 1000 {
		run(success)
	}
	for range 4 {
		run(unanswered)
	}
	run(failure) // an answer (a server error): the count starts again
	for range 4 {
		run(unanswered)
	}
	run(neutral) // a rejection leaves it as it is
	st := b.stats(clk.Now())
	assert.Equal(t, Closed, st.State, "4 in a row")
	assert.Equal(t, 1009, st.Requests, "the rate is far from tripping it")
	assert.Equal(t, 9, st.Failures)
	run(unanswered)
	assert.Equal(t, Open, b.stats(clk.Now()).State, "5 in a row")

	// Back to closed through the probes: the count starts from zero.
	clk.Advance(cfg.OpenFor)
	for range cfg.Probes {
		run(success)
	}
	require.Equal(t, Closed, b.stats(clk.Now()).State)
	for range 4 {
		run(unanswered)
	}
	assert.Equal(t, Closed, b.stats(clk.Now()).State)

	// Negative: the rate alone.
	off := BreakerConfig{ConsecutiveErrors: -1}
	off.defaults()
	b = newBreaker(off, clk.Now(), nil)
	for range 100 {
		run(success)
	}
	for range 50 {
		run(unanswered)
	}
	assert.Equal(t, Closed, b.stats(clk.Now()).State, "50 errors in 150: under the rate")
}

func TestBreakerDisabled(t *testing.T) {
	clk := newFakeClock(false)
	b := newBreaker(BreakerConfig{Disabled: true}, clk.Now(), nil)
	for range 100 {
		require.True(t, b.allow(clk.Now()))
		b.done(failure, clk.Now())
	}
	assert.Equal(t, Closed, b.stats(clk.Now()).State)
}

func TestStateString(t *testing.T) {
	assert.Equal(t, "closed", Closed.String())
	assert.Equal(t, "open", Open.String())
	assert.Equal(t, "half-open", HalfOpen.String())
	assert.Equal(t, "state(9)", State(9).String())
}

// TestBreakerUnusedPermission: a half-open breaker's permission given back
// unused neither closes it nor counts as a probe; the slot is free again.
func TestBreakerUnusedPermission(t *testing.T) {
	now := time.Unix(0, 0)
	cfg := BreakerConfig{MinRequests: 1, FailureRate: 0.5, Probes: 1, OpenFor: time.Second}
	cfg.defaults()
	b := newBreaker(cfg, now, nil)
	require.True(t, b.allow(now))
	b.done(failure, now)
	require.Equal(t, Open, b.state)
	now = now.Add(2 * time.Second)
	require.True(t, b.allow(now), "half-open: one probe")
	require.False(t, b.allow(now), "the probe slot is taken")
	b.done(unused, now)
	assert.Equal(t, HalfOpen, b.state, "not closed by a probe never sent")
	require.True(t, b.allow(now), "the slot is free again")
	b.done(success, now)
	assert.Equal(t, Closed, b.state)
}
