//go:build linux

package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
	"github.com/sluice-go/sluice/internal/redistest"
)

// needRedis skips t without redis-server on PATH, except under CI=true,
// where it fails it (the CI installs it).
func needRedis(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath(redistest.Program); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed (%s)", redistest.Program, redistest.InstallCommand)
		}
		t.Skipf("%s is not installed; install it (%s) to run this test", redistest.Program, redistest.InstallCommand)
	}
}

// tinyTenants is the tenants scenario small enough for a test: 2 s parts,
// a 250 ms control period.
func tinyTenants() (bench.SuiteConfig, *Tenants) {
	cfg := tinySuite()
	cfg.Targets = []string{"sluice"}
	tc := &Tenants{CPU: 2 * time.Millisecond, Duration: 2 * time.Second, Period: 250 * time.Millisecond, Bucket: 50 * time.Millisecond}
	cfg.Scenarios = []bench.Scenario{tc}
	cfg.Constant = false
	return cfg, tc
}

func TestSuiteTenants(t *testing.T) {
	needRedis(t)
	cfg, _ := tinyTenants()
	var last string
	cfg.Progress = func(_, _ time.Duration, now string) { last = now }
	rep, err := bench.RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	assert.Contains(t, last, "tenants off", "the progress names the part")

	require.Len(t, rep.Samples, 2, "one sample per part")
	for i, s := range rep.Samples {
		ti := detail[TenantsDetail](t, &s)
		what := ti.Part
		assert.Equal(t, tenantsParts[i], ti.Part)
		assert.Equal(t, "tenants", s.Scenario, what)
		assert.Equal(t, TenantsShape, s.Shape, what)
		assert.Positive(t, s.Capacity, what)
		assert.Equal(t, rep.Samples[0].Capacity, s.Capacity, "%s: one calibration for both parts", what)
		assert.InEpsilon(t, 5.5*s.Capacity, s.Rates.Offered, 0.3, what)

		require.Len(t, s.Classes, 11, "%s: the heavy tenant and ten light ones", what)
		for name, c := range s.Classes {
			assert.Len(t, c.Series, 40, "%s %s: 2 s of 50 ms buckets", what, name)
		}
		assert.Greater(t, s.Classes[TenantHeavy].Rates.Offered, 50*s.Classes[TenantLight(0)].Rates.Offered/10, what)

		require.Len(t, ti.Servers, 1, what)
		assert.Equal(t, TenantsDefault, ti.Protection, "%s: the default configuration protects the server", what)
		var leaderships, refused int64
		for _, sv := range ti.Servers {
			assert.NotEmpty(t, sv.Totals, "%s: each server counted its tenants", what)
			assert.NotEmpty(t, sv.Admission, what)
			leaderships += sv.Leaderships
			var st struct{ Rejected int64 }
			require.NoError(t, json.Unmarshal(sv.Admission, &st), what)
			refused += st.Rejected
		}
		assert.Positive(t, leaderships, "%s: one of them led", what)
		assert.NotEmpty(t, ti.Steps, "%s: the leader's decisions", what)
		for j := 1; j < len(ti.Steps); j++ {
			assert.Greater(t, ti.Steps[j].Version, ti.Steps[j-1].Version, what)
		}
		if refused > 0 {
			// The servers were overloaded: the blame of their closed
			// time is counted. (On a loaded machine the generator may
			// fall so far behind that a short part never overloads
			// them, and there is no blame to count.)
			assert.Positive(t, ti.BlameHeavy, what)
		} else {
			t.Logf("%s: the servers refused nothing (generator behind: %v)", what, s.Behind)
		}
		if ti.Part == TenantsOn {
			assert.Positive(t, ti.HeavyDropped, "enforcing: the heavy tenant is dropped")
			assert.GreaterOrEqual(t, ti.FirstDrop, time.Duration(0))
		} else {
			assert.Zero(t, ti.HeavyDropped, "not enforcing: nothing is dropped")
			assert.Zero(t, ti.LightDropped)
		}
	}
}

func TestTenantsWithoutRedis(t *testing.T) {
	cfg, tc := tinyTenants()
	require.NoError(t, tc.Check(&cfg))
	t.Setenv("PATH", t.TempDir())
	sh := tc.shape()
	trial := &bench.Trial{Suite: &cfg, Scenario: tc, Point: bench.Point{Shape: sh, Spec: sh.Spec, Multiple: 5.5, Part: TenantsOn}, Target: "sluice", Capacity: 100}
	_, err := tc.Run(context.Background(), trial)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "apt-get install -y redis-server")
}

func TestTenantsOnSluiceTargetsOnly(t *testing.T) {
	cfg, tc := tinyTenants()
	cfg.Targets = []string{"sluice", "nethttp"}
	err := tc.Check(&cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"nethttp"`)
}

func TestTenantMix(t *testing.T) {
	tc := &Tenants{}
	require.NoError(t, tc.Check(&bench.SuiteConfig{}))
	m := newTenantMix(tc, 1)
	counts := map[string]int{}
	const n = 110_000
	for i := range n {
		name, hdr := m.classify(i)
		assert.Equal(t, name, hdr.Get(TenantHeader))
		counts[name]++
	}
	require.Len(t, counts, 11)
	assert.InEpsilon(t, n*5/5.5, counts[TenantHeavy], 0.02)
	for i := range 10 {
		assert.InEpsilon(t, n*0.05/5.5, counts[TenantLight(i)], 0.1, TenantLight(i))
	}
}

func TestWaterFill(t *testing.T) {
	assert.InDeltaSlice(t, []float64{0.5, 0.05, 0.05}, waterFill([]float64{5, 0.05, 0.05}, 0.6), 1e-12)
	assert.InDeltaSlice(t, []float64{0.2, 0.4, 0.4}, waterFill([]float64{0.2, 1, 3}, 1), 1e-12)
	assert.InDeltaSlice(t, []float64{0.1, 0, 0.2}, waterFill([]float64{0.1, 0, 0.2}, 1), 1e-12, "every demand met")
}

// tenantSample builds a tenants sample of 10 buckets of 100 ms at C = 100:
// heavy offered 50 a bucket, a light tenant 1 a bucket; light fails its
// first failFor buckets, heavy succeeds on heavyOK a bucket.
func tenantSample(failFor int, heavyOK int64) (*bench.Sample, *TenantsDetail) {
	series := func(offered int64, ok func(i int) int64) []load.Bucket {
		var out []load.Bucket
		for i := range 10 {
			out = append(out, load.Bucket{Start: time.Duration(i) * 100 * time.Millisecond, Offered: offered, OK: ok(i)})
		}
		return out
	}
	s := &bench.Sample{Classes: map[string]bench.ClassSample{
		TenantHeavy: {Series: series(50, func(int) int64 { return heavyOK })},
		TenantLight(0): {Series: series(1, func(i int) int64 {
			if i < failFor {
				return 0
			}
			return 1
		})},
	}}
	ti := &TenantsDetail{Period: 200 * time.Millisecond, Bucket: 100 * time.Millisecond}
	return s, ti
}

func TestMeasureTenants(t *testing.T) {
	s, ti := tenantSample(3, 9)
	f := measureTenants(s, ti, 100)
	require.True(t, f.Converged)
	assert.Equal(t, 300*time.Millisecond, f.ConvergedAt)
	assert.InDelta(t, 1.5, f.ConvergePeriods, 1e-12)
	assert.Equal(t, 1.0, f.LightSuccess)
	assert.Equal(t, 1.0, f.WorstLight)
	assert.InDelta(t, 0.7, f.LightSuccessAll, 1e-12)
	// Heavy: 9 of 50 a bucket = 0.9 C of the 0.9 C the light one leaves.
	assert.InDelta(t, 0.9, f.HeavyGoodput, 1e-12)
	assert.InDelta(t, 0.9, f.HeavyLeft, 1e-12)
	assert.InDelta(t, 1.0, f.HeavyFair, 1e-12)
	assert.InDelta(t, 1.0, f.Jain, 1e-12)
	assert.True(t, f.Met()["converge"])
	assert.True(t, f.Met()["light"])

	s, ti = tenantSample(10, 9)
	f = measureTenants(s, ti, 100)
	assert.False(t, f.Converged, "the light tenant never succeeds")
	assert.Zero(t, f.LightSuccess)
	assert.False(t, f.Met()["light"])
	assert.InDelta(t, 0.5, f.Jain, 1e-12, "one tenant at its share, one at none")
}

// With the store killed, AfterKill is every tenant's goodput from a
// control period after the kill to the end, and the "store" target is
// checked; without a kill it is not.
func TestMeasureTenantsAfterTheStoreIsKilled(t *testing.T) {
	s, ti := tenantSample(0, 9)
	ti.StoreKilledAt = 300 * time.Millisecond // + a period of 200 ms: buckets 5 to 9
	// Heavy serves 9 a bucket until the 5th bucket, then 6.
	for i := range s.Classes[TenantHeavy].Series {
		if i >= 5 {
			s.Classes[TenantHeavy].Series[i].OK = 6
		}
	}
	f := measureTenants(s, ti, 100)
	require.True(t, f.Killed)
	// (6 + 1) a bucket of 100 ms at C = 100 a second.
	assert.InDelta(t, 0.7, f.AfterKill, 1e-12)
	met, ok := f.Met()["store"]
	require.True(t, ok)
	assert.False(t, met, "0.7 of C is under 0.8")

	s, ti = tenantSample(0, 9)
	ti.StoreKilledAt = 300 * time.Millisecond
	f = measureTenants(s, ti, 100)
	assert.InDelta(t, 1.0, f.AfterKill, 1e-12)
	assert.True(t, f.Met()["store"])

	s, ti = tenantSample(0, 9)
	f = measureTenants(s, ti, 100)
	assert.False(t, f.Killed)
	assert.NotContains(t, f.Met(), "store", "no kill, no target")
}

// A run whose store was killed has the "store" target in the report,
// with the median goodput after the kill.
func TestTenantsReportAfterTheStoreIsKilled(t *testing.T) {
	rep := tenantsReport(t)
	d := detail[TenantsDetail](t, &rep.Samples[0])
	d.StoreKilledAt, d.Killed, d.AfterKill = 8*time.Second, true, 0.85
	require.NoError(t, rep.Samples[0].SetDetail(d))
	var buf bytes.Buffer
	require.NoError(t, (&Tenants{}).WriteReport(&buf, rep))
	assert.Contains(t, buf.String(), "PASS goodput >= 0.8 of C from a period after redis-server was killed: 1/1\n       (median goodput 0.850 of C)")
}

func TestTenantsKillFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"-tenants-kill-redis", "8s"}, ""},
		{[]string{"-tenants-kill-redis", "-1s"}, "-tenants-kill-redis must be in [0, -tenants-duration 20s), got -1s"},
		{[]string{"-tenants-kill-redis", "20s"}, "-tenants-kill-redis must be in [0, -tenants-duration 20s), got 20s"},
		{[]string{"-tenants-kill-redis", "19s500ms"}, "leave at least a control period"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		tc := &Tenants{}
		tc.Flags(fs)
		require.NoError(t, fs.Parse(c.args))
		err := tc.Check(&bench.SuiteConfig{Targets: []string{"sluice"}})
		if c.err == "" {
			require.NoError(t, err, c.args)
			assert.Equal(t, 8*time.Second, tc.KillStore)
			continue
		}
		require.Error(t, err, c.args)
		assert.Contains(t, err.Error(), c.err)
	}
}

// tenantsReport is a report of one repeat of the tenants scenario: the on
// part meets every target, the off part none.
func tenantsReport(t *testing.T) *bench.Report {
	series := func(offered, ok int64) []load.Bucket {
		var out []load.Bucket
		for i := range 20 {
			out = append(out, load.Bucket{Start: time.Duration(i) * 100 * time.Millisecond, Offered: offered, OK: ok})
		}
		return out
	}
	sample := func(part string, f TenantsFigures, heavyOK, lightOK int64) bench.Sample {
		s := bench.Sample{
			Scenario: "tenants", Shape: TenantsShape, Target: "sluice",
			Handler: bench.HandlerSpec{CPU: 5 * time.Millisecond}, Capacity: 300, Multiple: 5.5,
			Rates: bench.Rates{Offered: 1650},
			Classes: map[string]bench.ClassSample{
				TenantHeavy:    {Series: series(150, heavyOK)},
				TenantLight(0): {Series: series(15, lightOK)},
			},
			Series: series(165, heavyOK+lightOK),
		}
		require.NoError(t, s.SetDetail(TenantsDetail{Part: part, Heavy: 5, Light: 0.05, Lights: 10, Period: time.Second,
			Bucket: 100 * time.Millisecond, Servers: make([]TenantServer, 3), TenantsFigures: f}))
		return s
	}
	on := TenantsFigures{Converged: true, ConvergedAt: 1500 * time.Millisecond, ConvergePeriods: 1.5, LightSuccess: 0.995,
		WorstLight: 0.992, LightSuccessAll: 0.95, HeavyGoodput: 0.47, HeavyLeft: 0.5, HeavyFair: 0.94, Jain: 0.99,
		BlameHeavy: 0.5, DemandBlameHeavy: 0.91, HeavyDropped: 0.86}
	off := TenantsFigures{LightSuccess: 0.2, WorstLight: 0.15, LightSuccessAll: 0.2, HeavyGoodput: 0.9, HeavyLeft: 0.5,
		HeavyFair: 1.8, Jain: 0.4, BlameHeavy: 0.9, DemandBlameHeavy: 0.9}
	return &bench.Report{Samples: []bench.Sample{sample(TenantsOn, on, 15, 2), sample(TenantsOff, off, 25, 0)}}
}

func TestTenantsReport(t *testing.T) {
	tc := &Tenants{}
	rep := tenantsReport(t)
	rows, err := tc.Summarize(rep)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	assert.Equal(t, TenantsOn, rows[0].Part)
	assert.Equal(t, 1, rows[0].Converged)
	assert.InDelta(t, 0.992, rows[0].WorstLight, 1e-12)
	assert.Equal(t, 1, rows[0].Met["light"])
	assert.Zero(t, rows[1].Met["light"])

	var buf bytes.Buffer
	require.NoError(t, tc.WriteReport(&buf, rep))
	out := buf.String()
	assert.Contains(t, out, "tenants: 3 servers of the target in child processes, protected by a concurrency gate",
		"a run saved before the protection was a setting had a concurrency gate")
	assert.Contains(t, out, "PASS converges within 2 periods: 1/1")
	assert.Contains(t, out, "PASS Jain's index >= 0.95: 1/1")
	assert.NotContains(t, out, "FAIL")
	assert.NotContains(t, out, "redis-server was killed", "no kill, no such target")
	assert.Equal(t, "20.00", lineOf(out, "sluice", "off")[5], "the off part's lights %")

	var table bytes.Buffer
	require.NoError(t, WriteReport(&table, rep, All()))
	assert.Contains(t, table.String(), "tenants: 3 servers", "the whole report has it")
	assert.Equal(t, rows, tc.Rows(rep), "the JSON rows")

	for i := range rep.Samples {
		d := detail[TenantsDetail](t, &rep.Samples[i])
		d.Servers, d.Protection = d.Servers[:1], TenantsDefault
		require.NoError(t, rep.Samples[i].SetDetail(d))
	}
	buf.Reset()
	require.NoError(t, tc.WriteReport(&buf, rep))
	assert.Contains(t, buf.String(), "tenants: 1 server of the target in child processes, protected by the default configuration")

	var none bytes.Buffer
	require.NoError(t, tc.WriteReport(&none, &bench.Report{}))
	assert.Empty(t, none.String())
}

func TestTenantsPlots(t *testing.T) {
	dir := t.TempDir()
	paths, err := (&Tenants{}).Plots(dir, tenantsReport(t))
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "tenants.png")}, paths)
}

// TestTenantsReportsAnOldReport reads a sample written before the tenants
// scenario kept its figures in Sample.Detail: they were under "tenants".
func TestTenantsReportsAnOldReport(t *testing.T) {
	s := tenantsReport(t).Samples[0]
	back := asOldSample(t, s, "tenants")
	rows, err := (&Tenants{}).Summarize(&bench.Report{Samples: []bench.Sample{back}})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, TenantsOn, rows[0].Part)
	assert.InDelta(t, 0.992, rows[0].WorstLight, 1e-12)
}

// lineOf returns the fields of the first line of text whose fields start
// with first and include all of want.
func lineOf(text string, first string, want ...string) []string {
	for l := range strings.Lines(text) {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != first {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(" "+strings.Join(f, " ")+" ", " "+w+" ")
		}
		if ok {
			return f
		}
	}
	return nil
}

func TestTenantsFlagsAndChecks(t *testing.T) {
	parse := func(args ...string) (*Tenants, error) {
		tc := &Tenants{}
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		tc.Flags(fs)
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		return tc, tc.Check(&bench.SuiteConfig{Targets: []string{"sluice"}})
	}
	tc, err := parse()
	require.NoError(t, err)
	assert.Equal(t, DefaultTenantsDuration, tc.Duration)
	assert.Equal(t, DefaultTenantsCPU, tc.CPU)
	assert.Equal(t, DefaultTenantsServers, tc.Servers)
	assert.Equal(t, TenantsDefault, tc.Protection)

	tc, err = parse("-tenants-duration", "5s", "-tenants-cpu", "2ms", "-tenants-utilisation", "0.85", "-tenants-servers", "3", "-tenants-protection", "busy")
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, tc.Duration)
	assert.Equal(t, 2*time.Millisecond, tc.CPU)
	assert.Equal(t, 0.85, tc.Utilisation)
	assert.Equal(t, 3, tc.Servers)
	assert.Equal(t, TenantsBusy, tc.Protection)

	for flagName, bad := range map[string]string{
		"-tenants-duration": "0s", "-tenants-cpu": "0s", "-tenants-utilisation": "1.5",
		"-tenants-servers": "17", "-tenants-protection": "moat",
	} {
		_, err = parse(flagName, bad)
		assert.ErrorContains(t, err, flagName)
	}
	assert.ErrorContains(t, (&Tenants{}).Check(&bench.SuiteConfig{TLS: true}), "-tls")
}
