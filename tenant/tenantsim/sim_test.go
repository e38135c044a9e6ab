package tenantsim

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain checks that no run leaves a goroutine behind (each agent's tick
// runs on one of its own).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// builtin returns the built-in scenario name, scaled to d (0: as is).
func builtin(t *testing.T, name string, d time.Duration) Scenario {
	t.Helper()
	for _, sc := range Builtin() {
		if sc.Name == name {
			return sc.Scaled(d)
		}
	}
	t.Fatalf("no built-in scenario %q", name)
	return Scenario{}
}

// target returns the result of r's first target of kind from from.
func target(t *testing.T, r *Result, kind string, from time.Duration) TargetResult {
	t.Helper()
	for _, tr := range r.Targets {
		if tr.Kind == kind && time.Duration(tr.From) == from {
			return tr
		}
	}
	t.Fatalf("%s has no %s target from %v", r.Scenario.Name, kind, from)
	return TargetResult{}
}

func run(t *testing.T, sc Scenario) *Result {
	t.Helper()
	if raceEnabled && time.Duration(sc.Duration) > 2*time.Second {
		t.Skip("a long run, under the race detector: TestRunIsDeterministicForASeed runs the agents' hand-over")
	}
	r, err := Run(sc)
	require.NoError(t, err)
	return r
}

// byName returns the tenant's figures.
func byName(t *testing.T, r *Result, name string) TenantResult {
	t.Helper()
	for _, tr := range r.Tenants {
		if tr.Name == name {
			return tr
		}
	}
	t.Fatalf("no tenant %q", name)
	return TenantResult{}
}

func TestRunIsDeterministicForASeed(t *testing.T) {
	// 10 ms requests: a tenth of the events of the flood, so that it runs
	// under the race detector too (the agents' hand-over).
	sc := builtin(t, "flood", 2*time.Second)
	sc.Cost = Duration(10 * time.Millisecond)
	sc.Seed = 7
	encode := func(r *Result) string {
		r.Elapsed = 0
		var b bytes.Buffer
		require.NoError(t, WriteJSON(&b, []*Result{r}))
		return b.String()
	}
	a, b := encode(run(t, sc)), encode(run(t, sc))
	assert.Equal(t, a, b, "the same scenario and seed give the same run")
	sc.Seed = 8
	assert.NotEqual(t, a, encode(run(t, sc)), "another seed, other arrivals")
}

// TestFloodProtectsTheLightTenants is the flood, 8 s: once the loop has
// converged, every light tenant succeeds, the heavy one gets its share of
// what is left and bears the blame, and only it is dropped. From a cold
// start the loop takes about 3 periods (docs/benchmarks.md says why); the
// test bounds it at 4.
func TestFloodProtectsTheLightTenants(t *testing.T) {
	r := run(t, builtin(t, "flood", 8*time.Second))
	conv := target(t, r, KindConverge, 0)
	assert.LessOrEqual(t, conv.Value, 4.0, conv.Text)
	assert.Positive(t, conv.Value, conv.Text)
	for _, kind := range []string{KindSuccess, KindJain, KindBlame, KindDropsOnlyOver} {
		tr := target(t, r, kind, 0)
		assert.True(t, tr.Pass, "%s: %s", kind, tr.Text)
	}
	assert.GreaterOrEqual(t, target(t, r, KindFair, 0).Value, 0.8)
	heavy := byName(t, r, "heavy")
	assert.Greater(t, heavy.Total.Dropped, heavy.Total.Offered/2)
	for _, tr := range r.Tenants {
		if tr.Group == "light" {
			assert.Zero(t, tr.Total.Dropped, tr.Name)
		}
	}
	require.NotEmpty(t, r.Control)
	assert.Equal(t, "overloaded", r.Control[0].State)
	assert.Equal(t, 3, r.Control[len(r.Control)-1].Servers)
}

// TestAliceBobDropsOnlyBob: Alice sends ten times Bob's requests, but her
// work is within her share and his is not: only Bob is dropped.
func TestAliceBobDropsOnlyBob(t *testing.T) {
	r := run(t, builtin(t, "alice-bob", 10*time.Second))
	alice, bob := byName(t, r, "alice"), byName(t, r, "bob")
	assert.Greater(t, alice.Total.Offered, 8*bob.Total.Offered)
	assert.Zero(t, alice.Total.Dropped)
	assert.Positive(t, bob.Total.Dropped)
	assert.Greater(t, bob.Total.DemandShare, 0.6, "blame by cost, not by count")
	tr := target(t, r, KindSuccess, 0)
	assert.True(t, tr.Pass, tr.Text)
}

func TestNoDropsBelowCapacity(t *testing.T) {
	r := run(t, builtin(t, "no-false-drops", 10*time.Second))
	for _, tr := range r.Tenants {
		assert.Zero(t, tr.Total.Dropped, tr.Name)
		assert.Greater(t, tr.Total.Success, 0.99, tr.Name)
	}
	for _, c := range r.Control {
		assert.Equal(t, "idle", c.State, "at %v", c.At)
	}
	assert.True(t, r.Passed())
}

// TestStoreOutageFailsOpenThenResumes: the store fails for 7 s, longer
// than the agents' StaleAfter (5 periods): the servers drop the stale
// table and serve on their own gates, the lease lapses, and once the store
// is back a leader is elected again and enforcement resumes.
func TestStoreOutageFailsOpenThenResumes(t *testing.T) {
	sc := builtin(t, "flood", 16*time.Second)
	sc.Name = "outage"
	sc.Outage = &Window{From: Duration(4 * time.Second), To: Duration(11 * time.Second)}
	sc.Targets = []Target{
		{Kind: KindThroughput, From: Duration(4 * time.Second), To: Duration(11 * time.Second), Min: 0.8},
		{Kind: KindResume, From: Duration(11 * time.Second), Max: 2},
	}
	r := run(t, sc)
	for _, tr := range r.Targets {
		assert.True(t, tr.Pass, "%s: %s", tr.Kind, tr.Text)
	}
	assert.Positive(t, r.StoreFailures)
	heavy := byName(t, r, "heavy")
	assert.Zero(t, heavy.Seconds[10].Drop, "the stale table is dropped by 10 s (fail-open)")
	assert.Positive(t, heavy.Seconds[8].Drop, "but held for StaleAfter")
	leader := r.Agents[0]
	assert.Positive(t, leader.LeadFailures)
	assert.GreaterOrEqual(t, leader.Leaderships, int64(2), "the lease lapsed and was taken again")
}

func TestRunRejectsScenariosThatCannotWork(t *testing.T) {
	_, err := Run(Scenario{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "name is empty")
	assert.Contains(t, err.Error(), "no tenants")
}

func TestPlotAndTable(t *testing.T) {
	r := run(t, builtin(t, "arrive-leave", 6*time.Second))
	path := filepath.Join(t.TempDir(), "x", "arrive-leave.png")
	require.NoError(t, Plot(path, r))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(data, []byte("\x89PNG")), "a PNG")

	var b strings.Builder
	require.NoError(t, WriteTable(&b, r))
	out := b.String()
	assert.Contains(t, out, "arrive-leave: ")
	assert.Contains(t, out, "C = 12000 requests/s")
	for _, g := range []string{"a", "d (2)", "heavy"} {
		assert.Contains(t, out, "  "+g+"  ", "a row per group")
	}
	assert.Regexp(t, `(PASS|FAIL) drops-appear`, out)
	for _, col := range []string{"xC:", "success:", "dropped:", "rejected:", "drop:", "blame:", "demand blame:"} {
		assert.Contains(t, out, col, "the legend says what each column holds")
	}

	var back []*Result
	var j bytes.Buffer
	require.NoError(t, WriteJSON(&j, []*Result{r}))
	require.NoError(t, json.Unmarshal(j.Bytes(), &back))
	require.Len(t, back, 1)
	assert.Equal(t, r.Scenario, back[0].Scenario)
	assert.Len(t, back[0].Tenants[0].Seconds, 6)
}
