package report

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
)

// tenantsReport is a report of one repeat of the tenants scenario: the on
// part meets every target, the off part none.
func tenantsReport() *bench.Report {
	series := func(offered, ok int64) []bench.Bucket {
		var out []bench.Bucket
		for i := range 20 {
			out = append(out, bench.Bucket{Start: time.Duration(i) * 100 * time.Millisecond, Offered: offered, OK: ok})
		}
		return out
	}
	sample := func(part string, f bench.TenantsFigures, heavyOK, lightOK int64) bench.Sample {
		return bench.Sample{
			Scenario: bench.ScenarioTenants, Shape: bench.TenantsShape, Target: "sluice",
			Handler: bench.HandlerSpec{CPU: 5 * time.Millisecond}, Capacity: 300, Multiple: 5.5,
			Rates: bench.Rates{Offered: 1650},
			Classes: map[string]bench.ClassSample{
				bench.TenantHeavy:    {Series: series(150, heavyOK)},
				bench.TenantLight(0): {Series: series(15, lightOK)},
			},
			Series: series(165, heavyOK+lightOK),
			Tenants: &bench.TenantsInfo{Part: part, Heavy: 5, Light: 0.05, Lights: 10, Period: time.Second,
				Bucket: 100 * time.Millisecond, Servers: make([]bench.TenantServer, 3), TenantsFigures: f},
		}
	}
	on := bench.TenantsFigures{Converged: true, ConvergedAt: 1500 * time.Millisecond, ConvergePeriods: 1.5, LightSuccess: 0.995,
		WorstLight: 0.992, LightSuccessAll: 0.95, HeavyGoodput: 0.47, HeavyLeft: 0.5, HeavyFair: 0.94, Jain: 0.99,
		BlameHeavy: 0.5, DemandBlameHeavy: 0.91, HeavyDropped: 0.86}
	off := bench.TenantsFigures{LightSuccess: 0.2, WorstLight: 0.15, LightSuccessAll: 0.2, HeavyGoodput: 0.9, HeavyLeft: 0.5,
		HeavyFair: 1.8, Jain: 0.4, BlameHeavy: 0.9, DemandBlameHeavy: 0.9}
	return &bench.Report{Samples: []bench.Sample{sample(bench.TenantsOn, on, 15, 2), sample(bench.TenantsOff, off, 25, 0)}}
}

func TestWriteTenants(t *testing.T) {
	rep := tenantsReport()
	rows := SummarizeTenants(rep)
	require.Len(t, rows, 2)
	assert.Equal(t, bench.TenantsOn, rows[0].Part)
	assert.Equal(t, 1, rows[0].Converged)
	assert.InDelta(t, 0.992, rows[0].WorstLight, 1e-12)
	assert.Equal(t, 1, rows[0].Met["light"])
	assert.Zero(t, rows[1].Met["light"])

	var buf bytes.Buffer
	require.NoError(t, WriteTenants(&buf, rep))
	out := buf.String()
	assert.Contains(t, out, "tenants: 3 servers of the target in child processes, protected by a concurrency gate",
		"a run saved before the protection was a setting had a concurrency gate")
	assert.Contains(t, out, "PASS converges within 2 periods: 1/1")
	assert.Contains(t, out, "PASS Jain's index >= 0.95: 1/1")
	assert.NotContains(t, out, "FAIL")
	assert.Equal(t, "20.00", lineOf(out, "sluice", "off")[5], "the off part's lights %")

	var table bytes.Buffer
	require.NoError(t, WriteTable(&table, rep))
	assert.Contains(t, table.String(), "tenants: 3 servers", "WriteTable writes it")
	assert.Len(t, NewDocument(rep).Tenants, 2)

	for i := range rep.Samples {
		rep.Samples[i].Tenants.Servers = rep.Samples[i].Tenants.Servers[:1]
		rep.Samples[i].Tenants.Protection = bench.TenantsDefault
	}
	buf.Reset()
	require.NoError(t, WriteTenants(&buf, rep))
	assert.Contains(t, buf.String(), "tenants: 1 server of the target in child processes, protected by the default configuration")

	var none bytes.Buffer
	require.NoError(t, WriteTenants(&none, &bench.Report{}))
	assert.Empty(t, none.String())
}

func TestTenantsPlot(t *testing.T) {
	dir := t.TempDir()
	paths, err := Plots(dir, tenantsReport())
	require.NoError(t, err)
	assert.Contains(t, paths, filepath.Join(dir, "tenants.png"))
}
