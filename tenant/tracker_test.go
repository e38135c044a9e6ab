package tenant

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/gatetest"
)

func attempt(tenant string) *admit.Attempt {
	h := http.Header{}
	if tenant != "" {
		h.Set("X-Tenant", tenant)
	}
	return &admit.Attempt{Method: "GET", Path: "/", Header: h}
}

func newTracker(t *testing.T, opts Config) *Tracker {
	t.Helper()
	tr, err := New(opts)
	require.NoError(t, err)
	return tr
}

// run passes n requests of tenant through tr, ending the admitted ones
// with blame each, and returns which were dropped.
func run(tr *Tracker, tenant string, n int, blame time.Duration) []bool {
	dropped := make([]bool, n)
	a := attempt(tenant)
	for i := range n {
		if r := tr.Admit(a); r != nil {
			dropped[i] = true
			continue
		}
		tr.Done(a, admit.Outcome{Blame: blame, Latency: time.Millisecond})
	}
	return dropped
}

func TestDropsSpreadEvenly(t *testing.T) {
	tr := newTracker(t, Config{})
	run(tr, "a", 10, 0)
	tr.Collect(time.Second) // "a" is followed by name from now on
	require.NoError(t, tr.Apply(Table{Version: 1, Drops: map[string]float64{"a": 0.25, "b": 0.01}}))

	d := run(tr, "a", 100, 0)
	var at []int
	for i, x := range d {
		if x {
			at = append(at, i)
		}
	}
	require.Len(t, at, 25, "exactly a quarter dropped")
	for i := 1; i < len(at); i++ {
		assert.Equal(t, 4, at[i]-at[i-1], "one drop every fourth request")
	}

	// "b" is not followed yet: it is pooled under Other, which is not
	// dropped; once Collect follows it (the table names it), exactly one in
	// a hundred is.
	assert.NotContains(t, run(tr, "b", 100, 0), true)
	tr.Collect(time.Second)
	db := run(tr, "b", 300, 0)
	n := 0
	for _, x := range db {
		if x {
			n++
		}
	}
	assert.Equal(t, 3, n, "1%% of 300")

	r := tr.Collect(time.Second)
	u := usageOf(r, "a")
	assert.Zero(t, u.Requests, "nothing of a's since the last Collect")
	assert.Equal(t, int64(3), usageOf(r, "b").Dropped)
}

// A request refused before the tracker (Unasked: the age limit) pays for a
// drop its tenant owes: a tenant dropped by a half whose requests the age
// limit refuses one in two already loses no more; one in four, and the
// tracker drops a third of the rest, a half in all. Refusals never earn a
// tenant more than its share: after a run of them, the drops go on as
// before.
func TestRefusalsPayForDropsOwed(t *testing.T) {
	tr := newTracker(t, Config{})
	run(tr, "a", 10, 0)
	tr.Collect(time.Second)
	require.NoError(t, tr.Apply(Table{Version: 1, Drops: map[string]float64{"a": 0.5}}))
	a := attempt("a")
	tooOld := &admit.Refusal{Reason: "queue-timeout"}
	// pattern runs n rounds of the requests in each round that the age
	// limit refuses (true) and those it lets through, and returns how many
	// of the latter were dropped.
	pattern := func(n int, round ...bool) (dropped, asked int) {
		for range n {
			for _, old := range round {
				if old {
					tr.Unasked(a, tooOld)
					continue
				}
				asked++
				if tr.Admit(a) != nil {
					dropped++
				} else {
					tr.Done(a, admit.Outcome{Latency: time.Millisecond})
				}
			}
		}
		return dropped, asked
	}
	dropped, asked := pattern(40, true, false)
	assert.Zero(t, dropped, "the age limit refused a half already")
	dropped, asked = pattern(40, true, false, false, false)
	assert.InDelta(t, asked/3, dropped, 1, "a quarter refused for age: a third of the rest dropped")
	dropped, asked = pattern(1, true, true, true, true, true, true, true, true)
	assert.Zero(t, asked)
	dropped, asked = pattern(1, false, false, false, false, false, false, false, false)
	assert.Equal(t, 4, dropped, "a run of refusals leaves no credit: half of the next eight dropped")

	tr.SetEnforce(false)
	dropped, _ = pattern(10, true, false)
	assert.Zero(t, dropped, "not enforcing")
	require.NoError(t, tr.Apply(Table{Version: 2, Drops: map[string]float64{}}))
	tr.SetEnforce(true)
	dropped, _ = pattern(10, true, false)
	assert.Zero(t, dropped, "no drop in force")
}

func usageOf(r Report, name string) Usage {
	for _, u := range r.Tenants {
		if u.Tenant == name {
			return u
		}
	}
	return Usage{}
}

func TestRefusal(t *testing.T) {
	tr := newTracker(t, Config{RetryAfter: 3 * time.Second})
	run(tr, "a", 10, 0)
	tr.Collect(time.Second)
	require.NoError(t, tr.Apply(Table{Version: 1, Drops: map[string]float64{"a": 1}}))
	r := tr.Admit(attempt("a"))
	require.NotNil(t, r)
	assert.Equal(t, Reason, r.Reason)
	assert.Equal(t, 429, r.Status)
	assert.Equal(t, 3*time.Second, r.RetryAfter)

	tr.SetEnforce(false)
	assert.Nil(t, tr.Admit(attempt("a")), "enforcement off: nothing dropped")
	assert.False(t, tr.Stats().Enforcing)
	tr.SetEnforce(true)
	assert.NotNil(t, tr.Admit(attempt("a")))
}

// A tenant that the table drops is beyond its share, and any other within
// it, while enforcement is on; when nothing is dropped or enforcement is
// off, the tracker cannot tell.
func TestShare(t *testing.T) {
	tr := newTracker(t, Config{})
	var _ admit.ShareKeeper = tr
	run(tr, "heavy", 10, 0)
	run(tr, "light", 10, 0)
	tr.Collect(time.Second)
	assert.Equal(t, admit.ShareUnknown, tr.Share(attempt("light")), "no table")

	require.NoError(t, tr.Apply(Table{Version: 1, Drops: map[string]float64{"heavy": 0.9}}))
	assert.Equal(t, admit.ShareWithin, tr.Share(attempt("light")))
	assert.Equal(t, admit.ShareWithin, tr.Share(attempt("newcomer")), "a tenant not followed yet, under Other, which is not dropped")
	assert.Equal(t, admit.ShareBeyond, tr.Share(attempt("heavy")))

	tr.SetEnforce(false)
	assert.Equal(t, admit.ShareUnknown, tr.Share(attempt("heavy")), "enforcement off")
	tr.SetEnforce(true)

	require.NoError(t, tr.Apply(Table{Version: 2, Drops: map[string]float64{Other: 0.5}}))
	assert.Equal(t, admit.ShareBeyond, tr.Share(attempt("newcomer")), "pooled under Other, which is dropped")
	assert.Equal(t, admit.ShareWithin, tr.Share(attempt("heavy")), "followed by name and no longer dropped")

	require.NoError(t, tr.Apply(Table{Version: 3, Drops: map[string]float64{"heavy": 0}}))
	assert.Equal(t, admit.ShareUnknown, tr.Share(attempt("light")), "a table that drops no one")
}

// Asking where a request stands counts nothing: a tenant asked about
// often, but never admitted or refused, is not followed by name for it.
func TestShareCountsNothing(t *testing.T) {
	tr := newTracker(t, Config{})
	require.NoError(t, tr.Apply(Table{Version: 1, Drops: map[string]float64{Other: 0.5}}))
	for range 10 * nameAfter {
		assert.Equal(t, admit.ShareBeyond, tr.Share(attempt("asked")), "pooled under Other, which is dropped")
	}
	tr.Collect(time.Second)
	assert.Zero(t, tr.Stats().Tracked)
	for _, u := range tr.Collect(time.Second).Tenants {
		assert.Zero(t, u.Requests, "tenant %q", u.Tenant)
	}
}

func TestApplyRejectsBadFractions(t *testing.T) {
	tr := newTracker(t, Config{})
	err := tr.Apply(Table{Version: 1, Drops: map[string]float64{"a": 1.5}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"a"`)
	require.NoError(t, tr.Apply(Table{Version: 5, Drops: map[string]float64{Other: 0.5}}))
	require.NoError(t, tr.Apply(Table{Version: 4}), "an older table is ignored")
	assert.Equal(t, uint64(5), tr.Stats().Version)
	require.NoError(t, tr.Apply(Table{}), "the zero table clears")
	assert.Equal(t, uint64(0), tr.Stats().Version)
	assert.Nil(t, tr.Stats().Drops)
}

func TestCollectCounts(t *testing.T) {
	tr := newTracker(t, Config{})
	run(tr, "a", 10, 2*time.Millisecond)
	run(tr, "", 3, time.Millisecond) // no tenant: Other
	a := attempt("b")
	require.Nil(t, tr.Admit(a))
	tr.Done(a, admit.Outcome{Canceled: true}) // a later stage refused it

	r := tr.Collect(2 * time.Second)
	assert.Equal(t, 2*time.Second, r.Period)
	// Before the first Collect nobody is followed: a's first three
	// requests, b's and those without a tenant are under Other; from its
	// fourth, a is counted under its own name.
	o := usageOf(r, Other)
	assert.Equal(t, int64(7), o.Requests)
	assert.Equal(t, int64(6), o.Admitted)
	assert.Equal(t, int64(1), o.Rejected)
	assert.Equal(t, 9*time.Millisecond, o.Blame)
	assert.Equal(t, 6*time.Millisecond, o.Busy)
	assert.Equal(t, Usage{Tenant: "a", Requests: 7, Admitted: 7, Blame: 14 * time.Millisecond, Busy: 7 * time.Millisecond}, usageOf(r, "a"))

	run(tr, "a", 10, 2*time.Millisecond)
	r = tr.Collect(time.Second)
	assert.Equal(t, Usage{Tenant: "a", Requests: 10, Admitted: 10, Blame: 20 * time.Millisecond, Busy: 10 * time.Millisecond}, usageOf(r, "a"))
	assert.Equal(t, Usage{}, usageOf(r, Other))

	st := tr.Stats()
	assert.Equal(t, 1, st.Tracked, "a; b came once, too few to be followed")
	require.Len(t, st.Totals, 2)
}

// TestBoundedTenants floods the tracker with random names, one request
// each, alongside a heavy tenant: memory stays bounded, the flood does not
// allocate per request, and the heavy tenant is followed by name.
func TestBoundedTenants(t *testing.T) {
	const size = 16
	tr := newTracker(t, Config{Tenants: size})
	rng := rand.New(rand.NewPCG(3, 4))
	names := make([]*admit.Attempt, 4096)
	for i := range names {
		names[i] = attempt(fmt.Sprintf("random-%d", rng.Uint64()))
	}
	heavy := attempt("heavy")
	i := 0
	allocs := testing.AllocsPerRun(20000, func() {
		a := names[i%len(names)]
		if i%4 == 0 {
			a = heavy
		}
		i++
		if tr.Admit(a) == nil {
			tr.Done(a, admit.Outcome{})
		}
	})
	assert.Less(t, allocs, 0.01, "a flood of names allocates (almost) nothing")

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for round := range 20 {
		for j := range 20000 {
			a := attempt(fmt.Sprintf("r%d-%d", round, j))
			if tr.Admit(a) == nil {
				tr.Done(a, admit.Outcome{})
			}
			if j%4 == 0 && tr.Admit(heavy) == nil {
				tr.Done(heavy, admit.Outcome{})
			}
		}
		tr.Collect(time.Second)
		assert.LessOrEqual(t, tr.Stats().Tracked, size)
		assert.LessOrEqual(t, len(tr.Stats().Totals), 4*size+1)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	assert.Less(t, int64(after.HeapAlloc)-int64(before.HeapAlloc), int64(1<<20), "400,000 names later, the heap has not grown")
	_, followed := tr.roster.Load().slots["heavy"]
	assert.True(t, followed, "the heavy tenant is followed by name")
}

// TestAttemptKeepsItsSlot reuses one Attempt, as a keep-alive connection
// does: its next request takes its last request's counters only while they
// are what a lookup would give (the same tenant, not retired by Collect).
func TestAttemptKeepsItsSlot(t *testing.T) {
	tr := newTracker(t, Config{Tenants: 1})
	once := func(a *admit.Attempt) {
		if tr.Admit(a) == nil {
			tr.Done(a, admit.Outcome{})
		}
	}
	a, c := attempt("a"), attempt("c")
	for range 10 {
		once(a)
	}
	tr.Collect(time.Second) // "a" is followed by name
	for range 5 {
		once(c) // "c" gets counters of its own from its fourth request
	}
	once(a)
	r := tr.Collect(time.Second) // "a" (1 request) stays, "c" (5) is retired
	assert.Equal(t, int64(1), usageOf(r, "a").Requests)
	assert.Equal(t, int64(2), usageOf(r, "c").Requests, "its fourth and fifth")
	require.Contains(t, tr.roster.Load().slots, "c", "the heavier one is followed")

	once(a) // "a" is retired: its next request is pooled under Other
	once(c)
	c.Header.Set("X-Tenant", "a") // the same Attempt, another tenant
	once(c)
	r = tr.Collect(time.Second)
	assert.Equal(t, int64(1), usageOf(r, "c").Requests)
	assert.Equal(t, int64(2), usageOf(r, Other).Requests, "both of retired a's")
	assert.Zero(t, usageOf(r, "a").Requests)
}

// TestShardedCounts attaches a tracker that already follows a tenant to a
// pipeline with four counter shards: the tenant's counters are made anew
// with four shards, its drop fraction kept, and a Collect sums the shards
// and the counts made before.
func TestShardedCounts(t *testing.T) {
	tr := newTracker(t, Config{})
	run(tr, "a", 10, 0)
	tr.Collect(time.Second)
	require.NoError(t, tr.Apply(Table{Version: 1, Drops: map[string]float64{"a": 0.5}}))
	run(tr, "a", 1, 0) // before Attach, in the one shard

	p, err := admit.New(admit.Config{Gates: []admit.Policy{gatetest.Concurrency(t, 10)}, Policies: []admit.Policy{tr}, MaxAge: -1}, admit.Host{Shards: 4})
	require.NoError(t, err)
	defer p.Close()
	require.Len(t, tr.roster.Load().slots["a"].shards, 4)
	for shard := range 6 { // 4 and 5 are out of range: the first shard's
		var tk admit.Ticket
		tk.Header = attempt("a").Header
		tk.Shard = shard
		if p.Decide(&tk) == admit.Admitted {
			p.Done(&tk, admit.Outcome{Status: 200})
		}
	}
	u := usageOf(tr.Collect(time.Second), "a")
	assert.Equal(t, int64(7), u.Requests)
	assert.Equal(t, int64(4), u.Admitted)
	assert.Equal(t, int64(3), u.Dropped, "every second request after Attach")
}

func TestTrackerAttachOnce(t *testing.T) {
	tr := newTracker(t, Config{})
	p1, err := admit.New(admit.Config{Policies: []admit.Policy{tr}}, admit.Host{})
	require.NoError(t, err)
	_, err = admit.New(admit.Config{Policies: []admit.Policy{tr}}, admit.Host{})
	require.ErrorContains(t, err, "one Tracker per server")
	p1.Close()
	p2, err := admit.New(admit.Config{Policies: []admit.Policy{tr}}, admit.Host{})
	require.NoError(t, err, "free again once its pipeline is closed")
	p2.Close()
}

func TestOptionsErrors(t *testing.T) {
	_, err := New(Config{Tenants: -1})
	require.ErrorContains(t, err, "Config.Tenants -1")
	_, err = New(Config{Key: admit.HeaderKey("")})
	require.ErrorContains(t, err, "Config.Key")
}

// TestRefusedBeforeAsked: requests the age limit refuses before the
// tracker is asked still count as their tenant's, rejected (with the age
// limit alone they are all an overloaded server refuses).
func TestRefusedBeforeAsked(t *testing.T) {
	tr := newTracker(t, Config{})
	p, err := admit.New(admit.Config{Policies: []admit.Policy{tr}}, admit.Host{})
	require.NoError(t, err)
	defer p.Close()
	var tk admit.Ticket
	tk.Header = http.Header{"X-Tenant": {"late"}}
	for range 10 {
		tk.Stamp = time.Now().Add(-time.Second).UnixNano() // a second old
		require.Equal(t, admit.Rejected, p.Decide(&tk))
	}
	tk.Stamp = time.Now().UnixNano()
	require.Equal(t, admit.Admitted, p.Decide(&tk))
	p.Done(&tk, admit.Outcome{Status: 200})

	r := tr.Collect(time.Second)
	var requests, rejected, admitted int64
	for _, u := range r.Tenants {
		requests += u.Requests
		rejected += u.Rejected
		admitted += u.Admitted
	}
	assert.Equal(t, int64(11), requests)
	assert.Equal(t, int64(10), rejected)
	assert.Equal(t, int64(1), admitted)
	assert.Equal(t, int64(7), usageOf(r, "late").Rejected, "named from its fourth request on")
}

// TestEndedCounts checks the packed count of ended requests: short and
// long latencies, the spills before either part overflows, and many
// workers ending requests on one shard at once.
func TestEndedCounts(t *testing.T) {
	var c counts
	sum := func() (int64, time.Duration) {
		c.spill()
		return c.admitted.Swap(0), time.Duration(c.busy.Swap(0))
	}
	c.end(3 * time.Millisecond)
	c.end(0)
	c.end(maxPacked - 1)
	c.end(maxPacked) // too long to pack
	c.end(time.Hour)
	n, busy := sum()
	assert.Equal(t, int64(5), n)
	assert.Equal(t, 3*time.Millisecond+2*maxPacked-1+time.Hour, busy)

	// Eight of these additions take the busy part past half its range:
	// every eighth one spills, and nothing carries into the count.
	for range 1000 {
		c.end(maxPacked - 1)
	}
	assert.Less(t, c.ended.Load()&busyMask, uint64(spillBusy), "spilled before overflowing")
	n, busy = sum()
	assert.Equal(t, int64(1000), n)
	assert.Equal(t, time.Duration(1000*(maxPacked-1)), busy)

	// The count part spills too.
	c.ended.Store((spillEnded - 1) << endedShift)
	c.end(time.Microsecond)
	assert.Zero(t, c.ended.Load(), "spilled")
	n, busy = sum()
	assert.Equal(t, int64(spillEnded), n)
	assert.Equal(t, time.Microsecond, busy)

	// Eight workers at once, with a reader taking the counts meanwhile.
	var wg sync.WaitGroup
	var taken atomic.Int64
	var takenBusy atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			n, b := sum()
			taken.Add(n)
			takenBusy.Add(int64(b))
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	for g := range 8 {
		wg.Go(func() {
			for i := range 20000 {
				c.end(time.Duration(1+(g*20000+i)%7) * maxPacked / 8)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-done
	n, busy = sum()
	n += taken.Load()
	busy += time.Duration(takenBusy.Load())
	var want time.Duration
	for i := range 8 * 20000 {
		want += time.Duration(1+i%7) * maxPacked / 8
	}
	assert.Equal(t, int64(8*20000), n)
	assert.Equal(t, want, busy)
}

// Names are the client's choice: the tracker keeps them valid UTF-8 and at
// most MaxNameLen bytes, so that reports, the store, the metrics and the
// dashboard carry them safely and bounded.
func TestNamesAreValidAndBounded(t *testing.T) {
	tr := newTracker(t, Config{})
	long := strings.Repeat("n", 64<<10)
	for range 2 {
		run(tr, "\xff\xfe", 10, time.Millisecond)
		run(tr, long, 10, time.Millisecond)
		run(tr, long+"x", 10, time.Millisecond)
	}
	r := tr.Collect(time.Second)
	names := map[string]bool{}
	for _, u := range r.Tenants {
		assert.True(t, utf8.ValidString(u.Tenant), "%q", u.Tenant)
		assert.LessOrEqual(t, len(u.Tenant), MaxNameLen)
		names[u.Tenant] = true
	}
	assert.True(t, names["\uFFFD"], "the invalid bytes replaced: %v", names)
	var longs int
	for n := range names {
		if strings.HasPrefix(n, "nnnn") {
			longs++
			assert.Contains(t, n, "#", "shortened with a hash")
		}
	}
	assert.Equal(t, 2, longs, "two long names with the same start stay two tenants")
}

// On a server that trims (admit.Env.TrimsShares: no gates, or a queue), a dropped
// tenant keeps trimmedKeep times the share of its requests that the table
// keeps (all of them at most), stays beyond its share for the server's
// trimming, and a tenant dropped whole stays dropped whole; once the
// tracker leaves that pipeline, the table's own fractions apply again.
func TestTrimmingServerKeepsMoreOfADroppedTenant(t *testing.T) {
	dropped := func(tr *Tracker, tenant string) int {
		n := 0
		for _, d := range run(tr, tenant, 1000, 0) {
			if d {
				n++
			}
		}
		return n
	}
	table := Table{Version: 1, Drops: map[string]float64{"heavy": 0.9, "half": 0.5, "little": 0.2, "banned": 1}}
	for _, tc := range []struct {
		name  string
		trims bool
		want  map[string]int
	}{
		{"gated server", false, map[string]int{"heavy": 900, "half": 500, "little": 200, "banned": 1000, "light": 0}},
		{"trimming server", true, map[string]int{"heavy": 875, "half": 375, "little": 0, "banned": 1000, "light": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker(t, Config{})
			detach, err := tr.Attach(admit.Env{Shards: 1, TrimsShares: tc.trims})
			require.NoError(t, err)
			for name := range tc.want {
				run(tr, name, 10, 0)
			}
			tr.Collect(time.Second)
			require.NoError(t, tr.Apply(table))
			for name, want := range tc.want {
				assert.InDelta(t, want, dropped(tr, name), 1, "tenant %q (fixed point: one either way)", name)
				if name != "light" {
					assert.Equal(t, admit.ShareBeyond, tr.Share(attempt(name)), "tenant %q", name)
				}
			}
			detach()
			assert.InDelta(t, 900, dropped(tr, "heavy"), 1, "detached: the table's own fraction")
		})
	}
}
