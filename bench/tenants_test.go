//go:build linux

package bench

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
func tinyTenants() SuiteConfig {
	cfg := tinySuite()
	cfg.Targets = []string{"sluice"}
	cfg.Scenarios = []Scenario{builtIn(ScenarioTenants)}
	cfg.Constant = false
	cfg.Tenants = TenantsConfig{CPU: 2 * time.Millisecond, Duration: 2 * time.Second, Period: 250 * time.Millisecond, Bucket: 50 * time.Millisecond}
	return cfg
}

func TestSuiteTenants(t *testing.T) {
	needRedis(t)
	cfg := tinyTenants()
	var progress progressLog
	cfg.Progress = progress.record
	rep, err := RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	progress.check(t)

	require.Len(t, rep.Samples, 2, "one sample per part")
	for i, s := range rep.Samples {
		require.NotNil(t, s.Tenants)
		ti := s.Tenants
		what := ti.Part
		assert.Equal(t, TenantsParts[i], ti.Part)
		assert.Equal(t, ScenarioTenants, s.Scenario, what)
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
		var leaderships int64
		for _, sv := range ti.Servers {
			assert.NotEmpty(t, sv.Totals, "%s: each server counted its tenants", what)
			assert.NotEmpty(t, sv.Admission, what)
			leaderships += sv.Leaderships
		}
		assert.Positive(t, leaderships, "%s: one of them led", what)
		assert.NotEmpty(t, ti.Steps, "%s: the leader's decisions", what)
		for j := 1; j < len(ti.Steps); j++ {
			assert.Greater(t, ti.Steps[j].Version, ti.Steps[j-1].Version, what)
		}
		assert.Positive(t, ti.BlameHeavy, what)
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
	cfg := tinyTenants()
	require.NoError(t, cfg.defaults())
	t.Setenv("PATH", t.TempDir())
	sh := cfg.Tenants.shape()
	_, err := cfg.tenants(context.Background(), "sluice", Point{Shape: sh, Spec: sh.Spec, Multiple: 5.5, Part: TenantsOn}, 100, 0, 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "apt-get install -y redis-server")
}

func TestTenantsOnSluiceTargetsOnly(t *testing.T) {
	cfg := tinyTenants()
	cfg.Targets = []string{"sluice", "nethttp"}
	err := cfg.defaults()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"nethttp"`)
}

func TestTenantMix(t *testing.T) {
	tc := TenantsConfig{}
	require.NoError(t, tc.defaults())
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
func tenantSample(failFor int, heavyOK int64) (*Sample, *TenantsInfo) {
	series := func(offered int64, ok func(i int) int64) []Bucket {
		var out []Bucket
		for i := range 10 {
			out = append(out, Bucket{Start: time.Duration(i) * 100 * time.Millisecond, Offered: offered, OK: ok(i)})
		}
		return out
	}
	s := &Sample{Classes: map[string]ClassSample{
		TenantHeavy: {Series: series(50, func(int) int64 { return heavyOK })},
		TenantLight(0): {Series: series(1, func(i int) int64 {
			if i < failFor {
				return 0
			}
			return 1
		})},
	}}
	ti := &TenantsInfo{Period: 200 * time.Millisecond, Bucket: 100 * time.Millisecond}
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
