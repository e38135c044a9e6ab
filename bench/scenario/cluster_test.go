//go:build linux

package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/report"
	"github.com/sluice-go/sluice/client"
)

func TestClusterRunsEachPartOnFreshBackends(t *testing.T) {
	cfg := tinySuite()
	cfg.Targets = []string{"sluice"}
	cfg.Duration = 400 * time.Millisecond
	cfg.Constant = false
	c := &Cluster{
		CPU: 200 * time.Microsecond, KillMultiple: 0.3,
		KillAfter: 300 * time.Millisecond, Down: 300 * time.Millisecond, After: 600 * time.Millisecond,
		Breaker: client.BreakerConfig{OpenFor: 200 * time.Millisecond},
	}
	cfg.Scenarios = []bench.Scenario{c}
	rep, err := bench.RunSuite(context.Background(), cfg)
	require.NoError(t, err)

	var parts []string
	var capacity float64
	for i := range rep.Samples {
		s := &rep.Samples[i]
		d := detail[ClusterDetail](t, s)
		what := d.Part
		parts = append(parts, d.Part)
		assert.Equal(t, "cluster", s.Scenario, what)
		assert.Equal(t, ClusterShape, s.Shape, what)
		assert.Equal(t, "sluice", s.Target, what)
		assert.Positive(t, s.Capacity, what)
		if capacity > 0 {
			assert.Equal(t, capacity, s.Capacity, "%s: one calibration of the cluster for every part", what)
		}
		capacity = s.Capacity
		assert.Positive(t, s.Rates.Goodput, what)
		assert.InEpsilon(t, s.Multiple*s.Capacity, s.Rates.Offered, 0.5, what)

		require.Len(t, d.Backends, 3, what)
		for i, b := range d.Backends {
			assert.Equal(t, i == 2, b.Slow, "%s: the slow backend is the last", what)
			assert.Equal(t, b.Sent-b.Rejected-b.Failed, b.Served, what)
			if d.Part != ClusterKill || i > 0 {
				assert.NotEmpty(t, b.Server, "%s: backend %d's counters", what, i)
			}
		}
		assert.Equal(t, 3*d.Backends[0].Handler.CPU, d.Backends[2].Handler.CPU, what)
		assert.Equal(t, d.Requests-d.NoBackend+d.Retries, d.Attempts, "%s: a first attempt for each request not failed fast, and one per retry", what)
		assert.InDelta(t, float64(d.Attempts)/float64(d.Requests), d.Amplification, 1e-9, what)
		switch d.Part {
		case ClusterNone:
			assert.Zero(t, d.Retries, "no retry")
			assert.Equal(t, 1.0, d.Amplification)
		case ClusterNaive:
			assert.Zero(t, d.BudgetDenied, "no budget")
		case ClusterSluice:
			// The default budget: 10% of the requests, or 10 a second
			// over its 10 s window when that is more.
			assert.LessOrEqual(t, d.Retries, max(d.Requests/10, 100)+1)
		}
		if d.Part != ClusterKill {
			assert.Nil(t, d.Kill, what)
			assert.Empty(t, s.Classes, what)
			continue
		}
		k := d.Kill
		require.NotNil(t, k)
		assert.True(t, d.Backends[0].Killed)
		assert.GreaterOrEqual(t, k.KilledAt, c.KillAfter)
		assert.GreaterOrEqual(t, k.ReturnedAt, k.KilledAt+c.Down)
		assert.Equal(t, 200*time.Millisecond, k.ProbeInterval)
		t.Logf("kill: %+v", *k)
		// The one loose property: with 5 errors in a row enough to trip
		// it, the dead backend's breaker opens (when is a timing, logged).
		assert.True(t, k.Opened, "the breaker opens on the dead backend")
		if k.Opened {
			assert.Contains(t, s.Classes, KillOpen)
		}
		assert.Contains(t, s.Classes, KillBefore)
		for _, tr := range k.Transitions {
			assert.NotEqual(t, tr.From, tr.To)
		}
	}
	assert.Equal(t, []string{ClusterNone, ClusterNaive, ClusterSluice, ClusterKill}, parts)
}

func TestClusterFlagsAndChecks(t *testing.T) {
	c := &Cluster{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.Flags(fs)
	require.NoError(t, fs.Parse([]string{"-cluster-x", "2"}))
	s := tinySuite()
	require.NoError(t, c.Check(&s))
	assert.Equal(t, 2.0, c.Multiple)

	c = &Cluster{}
	fs = flag.NewFlagSet("bench", flag.ContinueOnError)
	c.Flags(fs)
	require.NoError(t, fs.Parse(nil))
	require.NoError(t, c.Check(&s))
	assert.Equal(t, DefaultClusterMultiple, c.Multiple, "-cluster-x's default")

	d := &Cluster{}
	require.NoError(t, d.Check(&s))
	assert.Equal(t, &Cluster{
		CPU: time.Millisecond, Slow: 3, Multiple: 1.5, KillMultiple: 0.4,
		KillAfter: client.DefaultBreakerWindow, Down: 2 * time.Second, After: 2*client.DefaultBreakerOpenFor + time.Second,
		NaiveAttempts: 1000,
	}, d, "the defaults of the zero fields")
	var handlers []bench.HandlerSpec
	for _, cs := range d.children(&s, "sluice") {
		handlers = append(handlers, cs.Handler)
		assert.Nil(t, cs.Quota)
	}
	assert.Equal(t, []bench.HandlerSpec{{CPU: time.Millisecond}, {CPU: time.Millisecond}, {CPU: 3 * time.Millisecond}}, handlers, "the slow backend last")
	assert.Equal(t, []bool{false, false, true}, []bool{d.slow(0), d.slow(1), d.slow(2)})

	// Quotas: the same handler for all, the small quota the slow one.
	q := &Cluster{}
	fs = flag.NewFlagSet("bench", flag.ContinueOnError)
	q.Flags(fs)
	require.NoError(t, fs.Parse([]string{"-cluster-quotas", "0.3, 0.3,0.1"}))
	require.NoError(t, q.Check(&s))
	assert.Equal(t, []bench.Quota{{CPUs: 0.3}, {CPUs: 0.3}, {CPUs: 0.1}}, q.Quotas)
	for i, cs := range q.children(&s, "sluice") {
		assert.Equal(t, bench.HandlerSpec{CPU: time.Millisecond}, cs.Handler)
		assert.Equal(t, &q.Quotas[i], cs.Quota)
	}
	assert.Equal(t, []bool{false, false, true}, []bool{q.slow(0), q.slow(1), q.slow(2)})
	for _, arg := range []string{"0.3,0.3", "0.3,x,0.1", "0.3,0.3,0"} {
		c := &Cluster{}
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		c.Flags(fs)
		require.NoError(t, fs.Parse([]string{"-cluster-quotas", arg}))
		assert.Error(t, c.Check(&s), arg)
	}

	d = &Cluster{Breaker: client.BreakerConfig{Window: 2 * time.Second, OpenFor: time.Second}}
	require.NoError(t, d.Check(&s))
	assert.Equal(t, 2*time.Second, d.KillAfter, "a full window of the breaker's")
	assert.Equal(t, 3*time.Second, d.After, "two probe intervals and a second")

	for _, arg := range []string{"0", "-1", "1001"} {
		c := &Cluster{}
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		c.Flags(fs)
		require.NoError(t, fs.Parse([]string{"-cluster-x", arg}))
		assert.ErrorContains(t, c.Check(&s), "-cluster-x must be in (0, 1000]", "the error names the flag")
	}
	for name, bad := range map[string]*Cluster{
		"Slow":          {Slow: -3},
		"Multiple":      {Multiple: -1},
		"KillMultiple":  {KillMultiple: -0.4},
		"Down":          {Down: -time.Second},
		"NaiveAttempts": {NaiveAttempts: -1},
	} {
		assert.ErrorContains(t, bad.Check(&s), name, "the error names the field")
	}
	for name, set := range map[string]func(*bench.SuiteConfig){
		"-tls":      func(s *bench.SuiteConfig) { s.TLS = true },
		"-newconns": func(s *bench.SuiteConfig) { s.NewConns = true },
		"-clients":  func(s *bench.SuiteConfig) { s.Clients = 4 },
	} {
		s := tinySuite()
		set(&s)
		assert.ErrorContains(t, (&Cluster{}).Check(&s), name, "the error names the flag")
	}
}

func TestClusterPointsAreItsFourParts(t *testing.T) {
	s := tinySuite()
	c := &Cluster{Multiple: 2, KillAfter: time.Second, Down: 2 * time.Second, After: 3 * time.Second}
	require.NoError(t, c.Check(&s))
	ps := c.Points(&s)
	require.Len(t, ps, 4)
	for i, part := range []string{ClusterNone, ClusterNaive, ClusterSluice} {
		assert.Equal(t, part, ps[i].Part)
		assert.Equal(t, 2.0, ps[i].Multiple, part)
		assert.Equal(t, s.Duration, ps[i].Window, part)
	}
	for _, p := range ps {
		assert.Equal(t, bench.Shape{Name: ClusterShape, Spec: bench.HandlerSpec{CPU: time.Millisecond}}, p.Shape, p.Part)
		assert.Equal(t, p.Shape.Spec, p.Spec, p.Part)
	}
	assert.Equal(t, ClusterKill, ps[3].Part)
	assert.Equal(t, DefaultClusterKillMultiple, ps[3].Multiple)
	assert.Equal(t, 6*time.Second, ps[3].Window, "the kill, the time down and the time after")
}

// clusterSample builds a cluster sample of one part: served are the
// answers of the three backends, attempts the attempts per request (of
// 1000).
func clusterSample(t *testing.T, part string, repeat int, good, p99, attempts float64, served ...int64) bench.Sample {
	s := bench.Sample{
		Scenario: "cluster", Shape: ClusterShape, Handler: bench.HandlerSpec{CPU: time.Millisecond},
		Target: "sluice", Repeat: repeat, Capacity: 1000, Multiple: 1.5, Requests: 1500 * 3,
		Rates:   bench.Rates{Offered: 1500, Goodput: good, Rejected: 1500 - good},
		Latency: bench.Percentiles{P50: p99 / 4, P99: p99},
	}
	d := ClusterDetail{Part: part, Requests: 1000, Attempts: int64(1000 * attempts), Amplification: attempts}
	for i, n := range served {
		cpu := time.Millisecond
		if i == 2 {
			cpu *= 3
		}
		d.Backends = append(d.Backends, ClusterBackend{Handler: bench.HandlerSpec{CPU: cpu}, Slow: i == 2, Sent: n, Served: n})
	}
	if part == ClusterKill {
		s.Multiple = 0.4
		s.Rates = bench.Rates{Offered: 400, Goodput: 398, Failed: 2}
		s.Requests = 400 * 17
		d.Kill = &ClusterKillDetail{
			KilledAt: 10 * time.Second, ReturnedAt: 12 * time.Second, ProbeInterval: 5 * time.Second,
			Opened: true, OpenAfter: time.Duration(repeat+1) * 10 * time.Millisecond,
			Closed: repeat != 1, ClosedAfter: 3 * time.Second,
		}
		s.Classes = map[string]bench.ClassSample{
			KillBefore: {Rates: bench.Rates{Offered: 200, Goodput: 200}, Latency: bench.Percentiles{P50: 3, P99: 20}},
			KillDead:   {Rates: bench.Rates{Offered: 1, Goodput: 0.5, Failed: 0.5}, Latency: bench.Percentiles{P50: 3, P99: 4}},
			KillOpen:   {Rates: bench.Rates{Offered: 150, Goodput: 150}, Latency: bench.Percentiles{P50: 4, P99: 30}},
		}
	}
	require.NoError(t, s.SetDetail(d))
	return s
}

// clusterReport is three repeats of the four parts on sluice, the first
// naive run behind.
func clusterReport(t *testing.T) *bench.Report {
	var samples []bench.Sample
	for r := range 3 {
		naive := clusterSample(t, ClusterNaive, r, 900, 990, 5, 1400, 1400, 700)
		if r == 0 {
			naive = behindSample(naive)
		}
		samples = append(samples,
			clusterSample(t, ClusterNone, r, 950+float64(r), 80, 1, 1300, 1300, 700),
			naive,
			clusterSample(t, ClusterSluice, r, 970, 60, 1.1, 1400, 1300, 600),
			clusterSample(t, ClusterKill, r, 0, 0, 1.05, 1000, 3000, 1000),
		)
	}
	return &bench.Report{Command: "sluice bench -scenarios cluster", Deadline: time.Second, Repeats: 3, Samples: samples}
}

func TestClusterSummarize(t *testing.T) {
	c := &Cluster{}
	rows, err := c.Summarize(clusterReport(t))
	require.NoError(t, err)
	require.Len(t, rows, 4)
	var parts []string
	for _, r := range rows {
		parts = append(parts, r.Part)
		assert.Equal(t, "sluice", r.Target)
	}
	assert.Equal(t, clusterParts, parts)

	none, naive, sl, kill := rows[0], rows[1], rows[2], rows[3]
	assert.Equal(t, 3, none.Runs)
	assert.Equal(t, 1000.0, none.Capacity)
	assert.Equal(t, 951.0, none.Goodput)
	assert.InDelta(t, 0.951, none.GoodputFrac, 1e-9)
	assert.Equal(t, 1.0, none.Amplification)
	assert.InDeltaSlice(t, []float64{1300.0 / 3300, 1300.0 / 3300, 700.0 / 3300}, none.Served, 1e-9)
	assert.Nil(t, none.Kill)

	assert.Equal(t, 2, naive.Runs, "the behind run is left out")
	assert.Equal(t, 1, naive.Behind)
	assert.Equal(t, 5.0, naive.Amplification)
	assert.Equal(t, 990.0, naive.P99)
	assert.InDelta(t, 0.4, naive.RejectedFrac, 1e-9)

	assert.Equal(t, 1.1, sl.Amplification)
	assert.InDelta(t, 0.97, sl.GoodputFrac, 1e-9)

	require.NotNil(t, kill.Kill)
	k := kill.Kill
	assert.Equal(t, 0.4, kill.Multiple)
	assert.Equal(t, 3, k.Opened)
	assert.Equal(t, 20*time.Millisecond, k.OpenAfter, "the median of 10, 20 and 30 ms")
	assert.Equal(t, 2, k.Closed, "one run never closed")
	assert.Equal(t, 3*time.Second, k.ClosedAfter)
	assert.Equal(t, 5*time.Second, k.ProbeInterval)
	assert.InDelta(t, 200*17, k.Phases[KillBefore].Requests, 1e-6)
	assert.Equal(t, 0.5, k.Phases[KillDead].FailedFrac)
	assert.Equal(t, 30.0, k.Phases[KillOpen].P99)
	assert.NotContains(t, k.Phases, KillAfter)

	rows, err = c.Summarize(nil)
	require.NoError(t, err)
	assert.Nil(t, rows)
	assert.Nil(t, c.Rows(&bench.Report{}), "no cluster samples, no rows")

	bad := clusterReport(t)
	bad.Samples[0].Detail = json.RawMessage(`[1]`)
	_, err = c.Summarize(bad)
	assert.ErrorContains(t, err, "sluice, repeat 0", "the error names the sample")
	assert.Nil(t, c.Rows(bad))
}

// clusterLines are the lines of clusterReport's tables, their cells
// separated by single spaces.
var clusterLines = []string{
	"sluice none 1000 1500 951 0.951 1.000 36.6 0.0 20.0 80.0 39/39/21 3/0",
	"sluice naive 1000 1500 900 0.900 5.000 40.0 0.0 248 990 40/40/20 2/1",
	"sluice sluice 1000 1500 970 0.970 1.100 35.3 0.0 15.0 60.0 42/39/18 3/0",
	"before 3400 0.0 3.00 20.0",
	"dead 17 50.0 3.00 4.00",
	"open 2550 0.0 4.00 30.0",
	"after 0 - - -",
}

func TestClusterReport(t *testing.T) {
	c := &Cluster{}
	var buf bytes.Buffer
	require.NoError(t, c.WriteReport(&buf, clusterReport(t)))
	out := buf.String()
	assert.Contains(t, out, "\ncluster: 3 backends, each a child process of the target, busy 1ms a request, the last 3ms; C their capacities measured together;\n1.5x of C offered open loop through each client:\n")
	for _, want := range clusterLines {
		cells := strings.Fields(want)
		assert.Equal(t, want, tableLine(out, cells[0]+" "+cells[1]), "in:\n%s", out)
	}
	assert.Contains(t, out, "\none fast backend killed (SIGKILL) and started again on its address, sluice's client at 0.4x of C, probe interval 5s:\n")
	assert.Contains(t, out, "sluice: the breaker opened 20.0 ms after the kill (3 of 3 runs), closed 3000 ms after the return, 0.60 probe intervals (2 of 3 runs); runs 3/0\n")
	assert.Contains(t, out, "its breaker closed, while the breaker was open or half-open, after it closed; runs: kept/behind.\n")

	buf.Reset()
	require.NoError(t, WriteReport(&buf, clusterReport(t), All()))
	assert.Contains(t, buf.String(), "sent/offered", "the report of every scenario has the cluster's tables")

	buf.Reset()
	require.NoError(t, c.WriteReport(&buf, &bench.Report{}))
	assert.Empty(t, buf.String(), "nothing without cluster samples")
}

// oldClusterReport is a report.json written before the cluster scenario
// kept its figures in Sample.Detail: one run of the sluice client and one
// of the kill part, their figures under "cluster".
const oldClusterReport = `{
  "report": {
    "command": "sluice bench -scenarios cluster", "deadline": 1000000000, "repeats": 1,
    "samples": [
      {"scenario": "cluster", "shape": "cluster", "handler": {"cpu": 1000000, "db": 0, "blocking": false},
       "target": "sluice", "repeat": 0, "capacity": 1000, "multiple": 1.5, "requests": 4500,
       "rates": {"offered": 1500, "goodput": 970, "rejected": 530, "failed": 0},
       "latency_ms": {"p50": 15, "p99": 60},
       "cluster": {"part": "sluice", "requests": 1000, "attempts": 1100, "retries": 100, "amplification": 1.1,
                   "backends": [{"handler": {"cpu": 1000000}, "sent": 1400, "served": 1400},
                                {"handler": {"cpu": 1000000}, "sent": 1300, "served": 1300},
                                {"handler": {"cpu": 3000000}, "slow": true, "sent": 600, "served": 600}]}},
      {"scenario": "cluster", "shape": "cluster", "handler": {"cpu": 1000000, "db": 0, "blocking": false},
       "target": "sluice", "repeat": 0, "capacity": 1000, "multiple": 0.4, "requests": 6800,
       "rates": {"offered": 400, "goodput": 398, "rejected": 0, "failed": 2},
       "latency_ms": {"p50": 3, "p99": 20},
       "classes": {"before": {"rates": {"offered": 200, "goodput": 200, "rejected": 0, "failed": 0}, "latency_ms": {"p50": 3, "p99": 20}}},
       "cluster": {"part": "kill", "requests": 6800, "attempts": 7140, "amplification": 1.05,
                   "backends": [{"handler": {"cpu": 1000000}, "killed": true, "sent": 1000, "served": 1000},
                                {"handler": {"cpu": 1000000}, "sent": 3000, "served": 3000},
                                {"handler": {"cpu": 3000000}, "slow": true, "sent": 1000, "served": 1000}],
                   "kill": {"killed_at": 10000000000, "returned_at": 12000000000, "probe_interval": 5000000000,
                            "opened": true, "open_after": 20000000, "closed": false}}}
    ]
  },
  "summary": [],
  "steps": [],
  "cluster": [{"target": "sluice", "part": "sluice"}]
}`

func TestClusterReportsAnOldReport(t *testing.T) {
	var doc report.Document
	require.NoError(t, json.Unmarshal([]byte(oldClusterReport), &doc))
	require.NotNil(t, doc.Report)
	var buf bytes.Buffer
	require.NoError(t, WriteReport(&buf, doc.Report, All()))
	out := buf.String()
	assert.Contains(t, out, "cluster: 3 backends, each a child process of the target, busy 1ms a request, the last 3ms")
	assert.Equal(t, "sluice sluice 1000 1500 970 0.970 1.100 35.3 0.0 15.0 60.0 42/39/18 1/0", tableLine(out, "sluice sluice"))
	assert.Contains(t, out, "sluice: the breaker opened 20.0 ms after the kill (1 of 1 runs), never closed; runs 1/0\n")
	assert.Equal(t, "before 3400 0.0 3.00 20.0", tableLine(out, "before"))
	assert.Equal(t, "after 0 - - -", tableLine(out, "after"))
}
