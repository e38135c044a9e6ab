package tenant

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/redistest"
)

// TestAgentRedisKilledAndBack runs two servers' agents (one leading) over
// a real Redis, kills it, and starts it again: the servers keep the last
// table for StaleAfter, then fail open, and enforce again within two
// periods of Redis coming back.
func TestAgentRedisKilledAndBack(t *testing.T) {
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	store, err := NewRedisStore(rdb, RedisConfig{Fleet: "agenttest"})
	require.NoError(t, err)
	clock := &fakeClock{}
	ctx := context.Background()

	type member struct {
		tr    *Tracker
		agent *Agent
	}
	var fleet []member
	for _, id := range []string{"s1", "s2"} {
		tr := newTracker(t, Config{})
		ctrl, err := NewController(ControllerConfig{})
		require.NoError(t, err)
		a, err := NewAgent(AgentConfig{Store: store, Tracker: tr, Controller: ctrl, Clock: clock.now, ID: id, Timeout: time.Second})
		require.NoError(t, err)
		fleet = append(fleet, member{tr, a})
	}
	// A period of overload: heavy floods both servers, under closed gates.
	overload := func() {
		for _, m := range fleet {
			for range 50 {
				a := attempt("heavy")
				if m.tr.Admit(a) == nil {
					m.tr.Done(a, admitOutcome(20*time.Millisecond))
				}
				b := attempt("heavy")
				if m.tr.Admit(b) == nil {
					m.tr.Done(b, admitCanceled())
				}
			}
			for range 5 {
				a := attempt("light")
				if m.tr.Admit(a) == nil {
					m.tr.Done(a, admitOutcome(time.Millisecond))
				}
			}
		}
	}
	tick := func() (errs int) {
		for _, m := range fleet {
			m.tr.mu.Lock()
			m.tr.closedAt = 0
			m.tr.closed = func() time.Duration { return time.Duration(clock.now()) } // the gates closed all along
			m.tr.mu.Unlock()
			if m.agent.Tick(ctx) != nil {
				errs++
			}
		}
		clock.advance(time.Second)
		return errs
	}
	for range 3 {
		overload()
		require.Zero(t, tick())
	}
	for _, m := range fleet {
		require.Positive(t, m.tr.Stats().Drops["heavy"], "the heavy tenant is dropped")
		assert.Zero(t, m.tr.Stats().Drops["light"])
	}

	srv.Stop()
	for i := 1; i <= 6; i++ {
		overload()
		assert.Equal(t, len(fleet), tick(), "period %d: every agent fails", i)
		for _, m := range fleet {
			if i < 5 {
				assert.Positive(t, m.tr.Stats().Drops["heavy"], "period %d: the last table holds", i)
			} else {
				assert.Empty(t, m.tr.Stats().Drops, "period %d: failed open", i)
			}
		}
	}

	// Back: go-redis, after failing to dial, retries in the background
	// once a second before it dials for callers again; once it does,
	// within two periods every server enforces again.
	srv.Restart()
	require.Eventually(t, func() bool { return rdb.Ping(ctx).Err() == nil }, 10*time.Second, 50*time.Millisecond)
	for range 2 {
		overload()
		tick()
	}
	for _, m := range fleet {
		assert.Positive(t, m.tr.Stats().Drops["heavy"], "enforcing again within two periods of Redis's return")
		assert.False(t, m.agent.Stats().Stale)
	}
}

// admitOutcome is a request that ran under closed gates and took blame.
func admitOutcome(blame time.Duration) admit.Outcome {
	return admit.Outcome{Status: 200, Latency: blame, Blame: blame}
}

// admitCanceled is a request a later stage refused.
func admitCanceled() admit.Outcome { return admit.Outcome{Canceled: true} }
