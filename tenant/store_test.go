package tenant

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// storeUnderTest is a Store for the conformance suite, with its own sense
// of time.
type storeUnderTest struct {
	store Store
	// ttl is the short ttl the suite gives reports and leases that are to
	// age out: a few hundred milliseconds where time is real, so that the
	// steps between two calls (microseconds, or much more on a loaded
	// machine) stay well within it.
	ttl time.Duration
	// wait lets d pass on the store's clock: a sleep, or a fake clock's
	// step.
	wait func(d time.Duration)
}

// storeMaker makes a fresh, empty store for one test of the suite.
type storeMaker func(t *testing.T) storeUnderTest

// memoryStoreUnderTest is a MemoryStore on a fake clock, where waiting
// costs nothing.
func memoryStoreUnderTest(t *testing.T) storeUnderTest {
	var now atomic.Int64
	return storeUnderTest{
		store: NewMemoryStore(now.Load),
		ttl:   time.Second,
		wait:  func(d time.Duration) { now.Add(int64(d)) },
	}
}

func TestMemoryStoreConformance(t *testing.T) {
	testStoreConformance(t, memoryStoreUnderTest)
}

// testStoreConformance runs the suite that every Store passes: each
// subtest gets a fresh store from mk, and they run in parallel (most of
// their time is waiting for ttls to pass).
func testStoreConformance(t *testing.T, mk storeMaker) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, s storeUnderTest)
	}{
		{"Empty", testStoreEmpty},
		{"PushReplaces", testStorePushReplaces},
		{"ReportsAgeOut", testStoreReportsAgeOut},
		{"ReportsAreCopies", testStoreReportsAreCopies},
		{"TableRoundTrip", testStoreTableRoundTrip},
		{"Lead", testStoreLead},
		{"LeadRenewal", testStoreLeadRenewal},
		{"Canceled", testStoreCanceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, mk(t))
		})
	}
}

// testReport is a report of server with two tenants.
func testReport(server string, seq uint64) Report {
	return Report{
		Server: server,
		Seq:    seq,
		Period: time.Second,
		Closed: 250 * time.Millisecond,
		Tenants: []Usage{
			{Tenant: "alice", Requests: 100 * int64(seq), Admitted: 90, Rejected: 5, Dropped: 5, Blame: 10 * time.Millisecond, Busy: 900 * time.Millisecond},
			{Tenant: Other, Requests: 3, Admitted: 3, Busy: 30 * time.Millisecond},
		},
	}
}

// A new store has no reports and a zero table.
func testStoreEmpty(t *testing.T, s storeUnderTest) {
	ctx := context.Background()
	reports, err := s.store.Reports(ctx)
	require.NoError(t, err)
	assert.Empty(t, reports)
	table, err := s.store.Table(ctx)
	require.NoError(t, err)
	assert.Equal(t, Table{}, table)
}

// A server's report replaces its previous one; other servers' stay.
func testStorePushReplaces(t *testing.T, s storeUnderTest) {
	ctx := context.Background()
	require.NoError(t, s.store.Push(ctx, testReport("a", 1), time.Hour))
	require.NoError(t, s.store.Push(ctx, testReport("b", 1), time.Hour))
	require.NoError(t, s.store.Push(ctx, testReport("a", 2), time.Hour))
	reports, err := s.store.Reports(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []Report{testReport("a", 2), testReport("b", 1)}, reports)

	// A report without tenants comes back as it went.
	empty := Report{Server: "c", Seq: 7, Period: time.Second}
	require.NoError(t, s.store.Push(ctx, empty, time.Hour))
	reports, err = s.store.Reports(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []Report{testReport("a", 2), testReport("b", 1), empty}, reports)
}

// A report not replaced within its ttl is no longer read; one pushed again
// is.
func testStoreReportsAgeOut(t *testing.T, s storeUnderTest) {
	ctx := context.Background()
	require.NoError(t, s.store.Push(ctx, testReport("dead", 1), s.ttl))
	require.NoError(t, s.store.Push(ctx, testReport("alive", 1), time.Hour))
	s.wait(2 * s.ttl)
	reports, err := s.store.Reports(ctx)
	require.NoError(t, err)
	assert.Equal(t, []Report{testReport("alive", 1)}, reports, "the dead server's report aged out")

	require.NoError(t, s.store.Push(ctx, testReport("dead", 2), time.Hour))
	reports, err = s.store.Reports(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []Report{testReport("alive", 1), testReport("dead", 2)}, reports, "back")

	// A report replaced before its ttl with a longer one stays.
	require.NoError(t, s.store.Push(ctx, testReport("renewed", 1), s.ttl))
	require.NoError(t, s.store.Push(ctx, testReport("renewed", 2), time.Hour))
	s.wait(2 * s.ttl)
	reports, err = s.store.Reports(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []Report{testReport("alive", 1), testReport("dead", 2), testReport("renewed", 2)}, reports)
}

// The store keeps its own copies: changing a pushed report or a table
// read or written afterwards changes nothing in it.
func testStoreReportsAreCopies(t *testing.T, s storeUnderTest) {
	ctx := context.Background()
	r := testReport("a", 1)
	require.NoError(t, s.store.Push(ctx, r, time.Hour))
	r.Tenants[0].Requests = -1
	reports, err := s.store.Reports(ctx)
	require.NoError(t, err)
	require.Equal(t, []Report{testReport("a", 1)}, reports)
	reports[0].Tenants[0].Blame = -1
	again, err := s.store.Reports(ctx)
	require.NoError(t, err)
	assert.Equal(t, []Report{testReport("a", 1)}, again)

	drops := map[string]float64{"bob": 0.5}
	require.NoError(t, s.store.SetTable(ctx, Table{Version: 1, Drops: drops}))
	drops["bob"] = 1
	table, err := s.store.Table(ctx)
	require.NoError(t, err)
	require.Equal(t, Table{Version: 1, Drops: map[string]float64{"bob": 0.5}}, table)
	table.Drops["carol"] = 1
	table, err = s.store.Table(ctx)
	require.NoError(t, err)
	assert.Equal(t, Table{Version: 1, Drops: map[string]float64{"bob": 0.5}}, table)
}

// The table reads back as written, and a new one replaces it whole.
func testStoreTableRoundTrip(t *testing.T, s storeUnderTest) {
	ctx := context.Background()
	first := Table{Version: 1, Drops: map[string]float64{"bob": 0.25, Other: 1, "alice": 1e-9, "dave": 1.0 / 3}}
	require.NoError(t, s.store.SetTable(ctx, first))
	got, err := s.store.Table(ctx)
	require.NoError(t, err)
	assert.Equal(t, first, got)

	second := Table{Version: 2, Drops: map[string]float64{"carol": 0.5}}
	require.NoError(t, s.store.SetTable(ctx, second))
	got, err = s.store.Table(ctx)
	require.NoError(t, err)
	assert.Equal(t, second, got, "replaced, not merged")

	// A table that drops nothing: no tenant in it (a nil or an empty map,
	// which mean the same).
	require.NoError(t, s.store.SetTable(ctx, Table{Version: 3}))
	got, err = s.store.Table(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), got.Version)
	assert.Empty(t, got.Drops)
}

// One id leads at a time; the lease passes to another once its holder
// stops renewing for its ttl.
func testStoreLead(t *testing.T, s storeUnderTest) {
	ctx := context.Background()
	lead := func(id string) bool {
		t.Helper()
		ok, err := s.store.Lead(ctx, id, s.ttl)
		require.NoError(t, err)
		return ok
	}
	assert.True(t, lead("a"), "a takes the free lease")
	assert.False(t, lead("b"), "a holds it")
	assert.True(t, lead("a"), "a renews")
	assert.False(t, lead("b"), "a still holds it")

	s.wait(2 * s.ttl) // a stops renewing
	assert.True(t, lead("b"), "b takes over")
	assert.False(t, lead("a"), "b holds it")
	assert.True(t, lead("b"), "b renews")
}

// A renewal extends the lease from the time of the renewal.
func testStoreLeadRenewal(t *testing.T, s storeUnderTest) {
	ctx := context.Background()
	ok, err := s.store.Lead(ctx, "a", s.ttl)
	require.NoError(t, err)
	require.True(t, ok)
	s.wait(s.ttl * 6 / 10)
	ok, err = s.store.Lead(ctx, "a", s.ttl)
	require.NoError(t, err)
	require.True(t, ok, "renewed")
	s.wait(s.ttl * 6 / 10) // past the first lease's end, not the renewal's
	ok, err = s.store.Lead(ctx, "b", s.ttl)
	require.NoError(t, err)
	assert.False(t, ok, "the renewal extended a's lease")
}

// A call with a context that has ended fails with its error, and does
// nothing.
func testStoreCanceled(t *testing.T, s storeUnderTest) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, s.store.Push(ctx, testReport("a", 1), time.Hour), context.Canceled)
	_, err := s.store.Reports(ctx)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, s.store.SetTable(ctx, Table{Version: 1}), context.Canceled)
	_, err = s.store.Table(ctx)
	assert.ErrorIs(t, err, context.Canceled)
	ok, err := s.store.Lead(ctx, "a", time.Hour)
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, ok)

	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, err = s.store.Table(expired)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	live := context.Background()
	reports, err := s.store.Reports(live)
	require.NoError(t, err)
	assert.Empty(t, reports, "no report pushed")
	table, err := s.store.Table(live)
	require.NoError(t, err)
	assert.Equal(t, Table{}, table, "no table written")
	ok, err = s.store.Lead(live, "b", time.Hour)
	require.NoError(t, err)
	assert.True(t, ok, "no lease taken")
}
