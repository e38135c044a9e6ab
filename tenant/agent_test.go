package tenant

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock is a settable monotonic clock.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() int64              { return c.ns.Load() }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// flakyStore fails every call while down.
type flakyStore struct {
	Store
	down        atomic.Bool
	reportsDown atomic.Bool // only Reports fails
}

var errDown = errors.New("store down")

func (f *flakyStore) Push(ctx context.Context, r Report, ttl time.Duration) error {
	if f.down.Load() {
		return errDown
	}
	return f.Store.Push(ctx, r, ttl)
}

func (f *flakyStore) Reports(ctx context.Context) ([]Report, error) {
	if f.down.Load() || f.reportsDown.Load() {
		return nil, errDown
	}
	return f.Store.Reports(ctx)
}

func (f *flakyStore) SetTable(ctx context.Context, t Table) error {
	if f.down.Load() {
		return errDown
	}
	return f.Store.SetTable(ctx, t)
}

func (f *flakyStore) Table(ctx context.Context) (Table, error) {
	if f.down.Load() {
		return Table{}, errDown
	}
	return f.Store.Table(ctx)
}

func (f *flakyStore) Lead(ctx context.Context, id string, ttl time.Duration) (bool, error) {
	if f.down.Load() {
		return false, errDown
	}
	return f.Store.Lead(ctx, id, ttl)
}

func TestAgentFailsOpen(t *testing.T) {
	clock := &fakeClock{}
	store := &flakyStore{Store: NewMemoryStore(clock.now)}
	tr := newTracker(t, Config{})
	run(tr, "a", 10, 0)
	tr.Collect(time.Second)
	agent, err := NewAgent(AgentConfig{Store: store, Tracker: tr, Clock: clock.now, ID: "s1"})
	require.NoError(t, err)
	ctx := context.Background()

	require.NoError(t, store.SetTable(ctx, Table{Version: 7, Drops: map[string]float64{"a": 0.5}}))
	require.NoError(t, agent.Tick(ctx))
	assert.Equal(t, uint64(7), tr.Stats().Version)
	reports, err := store.Reports(ctx)
	require.NoError(t, err)
	require.Len(t, reports, 1)
	assert.Equal(t, "s1", reports[0].Server)

	// The store goes down: the last table is enforced for StaleAfter (5
	// periods), then the drops are cleared.
	store.down.Store(true)
	for i := 1; i <= 6; i++ {
		clock.advance(time.Second)
		require.ErrorIs(t, agent.Tick(ctx), errDown)
		st := agent.Stats()
		if i < 5 {
			assert.False(t, st.Stale, "period %d", i)
			assert.Equal(t, 0.5, tr.Stats().Drops["a"], "period %d: still enforcing", i)
		} else {
			assert.True(t, st.Stale, "period %d", i)
			assert.Empty(t, tr.Stats().Drops, "period %d: failed open", i)
		}
	}
	st := agent.Stats()
	assert.Equal(t, int64(6), st.PushFailures)
	assert.Equal(t, int64(12), st.ReadFailures, "the table is read twice a period")
	assert.ErrorIs(t, st.Err, errDown)

	// It comes back, and so does the controller's next table: the next
	// period enforces it.
	store.down.Store(false)
	require.NoError(t, store.SetTable(ctx, Table{Version: 8, Drops: map[string]float64{"a": 0.5}}))
	clock.advance(time.Second)
	require.NoError(t, agent.Tick(ctx))
	assert.Equal(t, 0.5, tr.Stats().Drops["a"])
	assert.False(t, agent.Stats().Stale)
}

// TestAgentControllerGone: the table stops changing (no controller
// leads): after StaleAfter the drops are cleared; a new version applies.
func TestAgentControllerGone(t *testing.T) {
	clock := &fakeClock{}
	store := NewMemoryStore(clock.now)
	tr := newTracker(t, Config{})
	agent, err := NewAgent(AgentConfig{Store: store, Tracker: tr, Clock: clock.now})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, store.SetTable(ctx, Table{Version: 3, Drops: map[string]float64{"a": 0.5}}))
	for i := range 6 {
		require.NoError(t, agent.Tick(ctx))
		if i < 5 {
			assert.Equal(t, 0.5, tr.Stats().Drops["a"], "period %d", i)
		} else {
			assert.Empty(t, tr.Stats().Drops, "period %d: the table is stale", i)
			assert.True(t, agent.Stats().Stale)
		}
		clock.advance(time.Second)
	}
	require.NoError(t, store.SetTable(ctx, Table{Version: 4, Drops: map[string]float64{"a": 0.25}}))
	require.NoError(t, agent.Tick(ctx))
	assert.Equal(t, 0.25, tr.Stats().Drops["a"])
	assert.False(t, agent.Stats().Stale)
}

func TestAgentLeaderFailover(t *testing.T) {
	clock := &fakeClock{}
	store := NewMemoryStore(clock.now)
	ctx := context.Background()
	steps := map[string][]bool{} // per agent, OnStep's took
	newAgent := func(id string) (*Agent, *Tracker) {
		tr := newTracker(t, Config{})
		c, err := NewController(ControllerConfig{})
		require.NoError(t, err)
		onStep := func(_ Decision, took bool) { steps[id] = append(steps[id], took) }
		a, err := NewAgent(AgentConfig{Store: store, Tracker: tr, Controller: c, Clock: clock.now, ID: id, OnStep: onStep})
		require.NoError(t, err)
		return a, tr
	}
	a1, _ := newAgent("a1")
	a2, _ := newAgent("a2")
	require.NoError(t, a1.Tick(ctx))
	require.NoError(t, a2.Tick(ctx))
	assert.True(t, a1.Stats().Leader)
	assert.False(t, a2.Stats().Leader, "one leader at a time")
	v, err := store.Table(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), v.Version)

	// a1 dies (stops ticking): a2 takes over once the lease (3 periods)
	// has run out, and the table's versions go on.
	var took int
	for i := 1; i <= 5; i++ {
		clock.advance(time.Second)
		require.NoError(t, a2.Tick(ctx))
		if a2.Stats().Leader {
			took = i
			break
		}
	}
	assert.Equal(t, 3, took, "periods until the standby leads")
	assert.Equal(t, []bool{true}, steps["a1"], "a1 stepped once, having taken the lease")
	assert.Equal(t, []bool{true}, steps["a2"], "a2's first step, the takeover")
	assert.Equal(t, int64(1), a2.Stats().Leaderships)
	v2, err := store.Table(ctx)
	require.NoError(t, err)
	assert.Greater(t, v2.Version, v.Version)
}

// A leader whose first period fails after it took the lease still says
// it took it, at its first table.
func TestAgentTookIsReportedAtTheFirstTable(t *testing.T) {
	clock := &fakeClock{}
	store := &flakyStore{Store: NewMemoryStore(clock.now)}
	c, err := NewController(ControllerConfig{})
	require.NoError(t, err)
	var steps []bool
	a, err := NewAgent(AgentConfig{Store: store, Controller: c, Clock: clock.now, ID: "c1",
		OnStep: func(_ Decision, took bool) { steps = append(steps, took) }})
	require.NoError(t, err)
	ctx := context.Background()

	store.reportsDown.Store(true)
	require.ErrorIs(t, a.Control(ctx), errDown)
	assert.True(t, a.Stats().Leader, "the lease was taken")
	assert.Empty(t, steps, "no table written")

	store.reportsDown.Store(false)
	clock.advance(time.Second)
	require.NoError(t, a.Control(ctx))
	clock.advance(time.Second)
	require.NoError(t, a.Control(ctx))
	assert.Equal(t, []bool{true, false}, steps)

	// Losing the lease and taking it again is a new leadership.
	store.down.Store(true)
	require.Error(t, a.Control(ctx))
	store.down.Store(false)
	clock.advance(time.Second)
	require.NoError(t, a.Control(ctx))
	assert.Equal(t, []bool{true, false, true}, steps)
}

func TestAgentConfigErrors(t *testing.T) {
	_, err := NewAgent(AgentConfig{})
	require.ErrorContains(t, err, "Store is nil")
	_, err = NewAgent(AgentConfig{Store: NewMemoryStore(nil)})
	require.ErrorContains(t, err, "neither a Tracker nor a Controller")
	_, err = NewAgent(AgentConfig{Store: NewMemoryStore(nil), Controller: &Controller{}, Period: -time.Second})
	require.ErrorContains(t, err, "Period -1s")
}

// An agent whose context ends while it waits for the store has not failed
// to reach it: nothing is counted or reported.
func TestAgentStoppedIsNoStoreFailure(t *testing.T) {
	clock := &fakeClock{}
	store := &flakyStore{Store: NewMemoryStore(clock.now)}
	store.down.Store(true) // every call fails, as a cancelled one would
	tr := newTracker(t, Config{})
	var reported atomic.Int32
	ctrl, err := NewController(ControllerConfig{})
	require.NoError(t, err)
	agent, err := NewAgent(AgentConfig{Store: store, Tracker: tr, Controller: ctrl,
		Clock: clock.now, ID: "s1", OnError: func(error) { reported.Add(1) }})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, agent.Tick(ctx), context.Canceled)
	st := agent.Stats()
	assert.Zero(t, st.PushFailures+st.ReadFailures+st.LeadFailures)
	assert.Zero(t, reported.Load())

	// With a live context the same failures count.
	require.ErrorIs(t, agent.Tick(context.Background()), errDown)
	assert.NotZero(t, agent.Stats().ReadFailures)
	assert.NotZero(t, reported.Load())
}
