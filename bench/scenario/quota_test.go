//go:build linux

package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
)

func TestQuotaChecksItsSettings(t *testing.T) {
	q := &Quota{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	q.Flags(fs)
	require.NoError(t, fs.Parse([]string{"-quotas", "0.5,1.5/10ms", "-quota-x", "1,3"}))
	cfg := tinySuite()
	require.NoError(t, q.Check(&cfg))
	assert.Equal(t, []bench.Quota{{CPUs: 0.5}, {CPUs: 1.5, Period: 10 * time.Millisecond}}, q.Quotas)
	assert.Equal(t, []float64{1, 3}, q.Multiples)
	ps := q.Points(&cfg)
	require.Len(t, ps, 4)
	assert.Equal(t, suiteShape.Name+" in 0.5/100ms", ps[0].Shape.Name, "a shape per quota, so that C is measured in it")
	assert.Equal(t, bench.Quota{CPUs: 1.5, Period: 10 * time.Millisecond}, *ps[3].Quota)
	assert.Equal(t, 3.0, ps[3].Multiple)

	for _, bad := range [][]string{{"-quotas", "0"}, {"-quota-x", "-1"}, {"-quota-x", "two"}} {
		q := &Quota{}
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		q.Flags(fs)
		require.NoError(t, fs.Parse(bad))
		cfg := tinySuite()
		assert.Error(t, q.Check(&cfg), "%v", bad)
	}
	cfg = tinySuite()
	cfg.Quota = &bench.Quota{CPUs: 1}
	assert.ErrorContains(t, (&Quota{}).Check(&cfg), "runs each point in its own quotas")
}

func TestQuotaRunsInItsQuota(t *testing.T) {
	if err := bench.CheckQuotas(); err != nil {
		t.Skipf("this machine does not let the test make a CPU quota: %v", err)
	}
	cfg := tinySuite()
	q := &Quota{Quotas: []bench.Quota{{CPUs: 0.5, Period: 10 * time.Millisecond}}, Multiples: []float64{2}}
	cfg.Scenarios = []bench.Scenario{q}
	rep, err := bench.RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	require.Len(t, rep.Samples, 2, "one point on two targets")
	for _, s := range rep.Samples {
		require.NotNil(t, s.Quota, s.Target)
		assert.Equal(t, bench.Quota{CPUs: 0.5, Period: 10 * time.Millisecond}, *s.Quota, s.Target)
		require.NotNil(t, s.Throttled, "%s: the quota's counters", s.Target)
		assert.Positive(t, s.Capacity, s.Target)
		assert.Positive(t, s.Rates.Goodput, s.Target)
	}
	rows := q.Summarize(rep)
	require.Len(t, rows, 2)
	var buf bytes.Buffer
	require.NoError(t, q.WriteReport(&buf, rep))
	assert.Contains(t, buf.String(), "quota 0.5/10ms")
	js, err := json.Marshal(q.Rows(rep))
	require.NoError(t, err)
	assert.Contains(t, string(js), `"quota":"0.5/10ms"`)
}

func TestQuotaReportOfMadeUpSamples(t *testing.T) {
	q := &Quota{}
	quota := &bench.Quota{CPUs: 0.5}
	st, err := json.Marshal(bench.SluiceServer{Blocked: 2, Handovers: 1})
	require.NoError(t, err)
	sample := func(target string, good float64, periods int64) bench.Sample {
		return bench.Sample{Scenario: "quota", Target: target, Multiple: 2, Capacity: 100, Quota: quota,
			Requests: 600, Rates: bench.Rates{Offered: 200, Goodput: good, Rejected: 100},
			Throttled: &bench.Throttled{Quota: *quota, Periods: periods}, Server: st}
	}
	rep := &bench.Report{Samples: []bench.Sample{sample("sluice", 98, 15), sample("sluice", 100, 30), sample("sluice", 99, 21)}}
	rows := q.Summarize(rep)
	require.Len(t, rows, 1)
	r := rows[0]
	assert.Equal(t, "0.5/100ms", r.Quota)
	assert.InDelta(t, 0.99, r.Goodput, 1e-9, "the median of three")
	assert.InDelta(t, 0.5, r.Rejected, 1e-9)
	assert.InDelta(t, 0.7, r.Throttled, 1e-9, "21 of the 30 periods of a 3 s window")
	assert.Equal(t, int64(6), r.Blocked, "summed")
	assert.Equal(t, int64(3), r.Handovers)
	assert.Equal(t, 3, r.Runs)
}
