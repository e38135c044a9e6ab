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
	srt "github.com/sluice-go/sluice/runtime"
)

// twoCPUs returns the first and the last CPU this process may run on, and
// skips the test on a machine with fewer than two.
func twoCPUs(t *testing.T) (first, last int) {
	t.Helper()
	allowed, err := srt.AffinityCPUs()
	require.NoError(t, err)
	if len(allowed) < 2 {
		t.Skipf("needs 2 CPUs, this process may use %v", allowed)
	}
	return allowed[0], allowed[len(allowed)-1]
}

func TestNoisyRunsEachRateOnEachTarget(t *testing.T) {
	_, last := twoCPUs(t)
	allowed, err := srt.AffinityCPUs()
	require.NoError(t, err)
	cfg := tinySuite()
	cfg.Targets = []string{"nethttp", "sluice", "sluice-pinned"}
	noisy := &Noisy{Rates: []float64{50, 80}}
	cfg.Scenarios = []bench.Scenario{noisy}
	var progress []string
	cfg.Progress = func(_, _ time.Duration, now string) { progress = append(progress, now) }
	rep, err := bench.RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	for _, now := range progress {
		assert.NotContains(t, now, "calibrating", "fixed rates need no capacity")
	}
	type key struct {
		target string
		rate   float64
	}
	var got []key
	for i := range rep.Samples {
		s := &rep.Samples[i]
		what := s.Target
		d := detail[NoisyDetail](t, s)
		got = append(got, key{s.Target, d.Rate})
		assert.Equal(t, "noisy", s.Scenario, what)
		assert.Equal(t, "light", s.Shape, what)
		assert.Zero(t, s.Capacity, what)
		assert.Zero(t, s.Multiple, what)
		assert.InEpsilon(t, d.Rate, s.Rates.Offered, 0.5, what)
		assert.Positive(t, s.Rates.Goodput, what)
		assert.Equal(t, allowed, d.CPUs, "%s: the target on every CPU", what)
		assert.Equal(t, last, d.NeighbourCPU, "%s: the neighbour on the last", what)
		assert.Equal(t, bench.TargetNice, d.NeighbourNice, what)
		// What the neighbour and the target's threads got is a timing
		// (package bench's tests check the readings): logged, not asserted.
		t.Logf("%s at %v/s: neighbour %.2f CPU, run queue %+v", what, d.Rate, d.NeighbourUse, d.RunQueue)
		assert.GreaterOrEqual(t, d.NeighbourUse, 0.0, what)
		switch s.Target {
		case "nethttp":
			assert.Nil(t, s.Placement, what)
		case "sluice":
			require.NotNil(t, s.Placement, what)
			assert.Equal(t, len(allowed), s.Placement.Workers, "%s: a worker per CPU", what)
			info, err := srt.DetectCPUs()
			require.NoError(t, err)
			assert.Equal(t, info.Exclusive, s.Placement.Pinned(), "%s: pinned by default only on an exclusive cpuset", what)
		case "sluice-pinned":
			require.NotNil(t, s.Placement, what)
			assert.Equal(t, allowed, s.Placement.CPUs, "%s: forced", what)
		}
	}
	assert.Equal(t, []key{
		{"nethttp", 50}, {"nethttp", 80}, {"sluice", 50}, {"sluice", 80}, {"sluice-pinned", 50}, {"sluice-pinned", 80},
	}, got)

	rows, err := noisy.Summarize(rep)
	require.NoError(t, err)
	require.Len(t, rows, 6)
	var buf bytes.Buffer
	require.NoError(t, WriteReport(&buf, rep, All()))
	assert.Contains(t, buf.String(), "noisy neighbour, shape light")
}

func TestNoisyQuietRunsNoNeighbour(t *testing.T) {
	twoCPUs(t)
	cfg := tinySuite()
	cfg.Targets = []string{"sluice"}
	cfg.Scenarios = []bench.Scenario{&Noisy{Rates: []float64{50}, Quiet: true}}
	rep, err := bench.RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	require.Len(t, rep.Samples, 1)
	d := detail[NoisyDetail](t, &rep.Samples[0])
	assert.Equal(t, -1, d.NeighbourCPU, "no neighbour")
	assert.Zero(t, d.NeighbourUse)
	assert.Positive(t, rep.Samples[0].Rates.Goodput)
}

func TestNoisyTargetRunsOnBothSetsOfASplit(t *testing.T) {
	a, b := twoCPUs(t)
	cfg := tinySuite()
	cfg.Targets = []string{"sluice"}
	cfg.Scenarios = []bench.Scenario{&Noisy{Rates: []float64{50}}}
	cfg.TargetCPUs, cfg.GeneratorCPUs = []int{b}, []int{a}
	rep, err := bench.RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	require.Len(t, rep.Samples, 1)
	s := &rep.Samples[0]
	d := detail[NoisyDetail](t, s)
	assert.Equal(t, []int{a, b}, d.CPUs, "both sets of the split")
	assert.Equal(t, b, d.NeighbourCPU)
	require.NotNil(t, s.Placement)
	assert.Equal(t, 2, s.Placement.Workers)
}

func TestNoisyFlagsAndChecks(t *testing.T) {
	n := &Noisy{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n.Flags(fs)
	require.NoError(t, fs.Parse([]string{"-noisy-rates", "400/s, 600", "-noisy-quiet"}))
	s := tinySuite()
	require.NoError(t, n.Check(&s))
	assert.Equal(t, []float64{400, 600}, n.Rates, "a rate may end in /s")
	assert.True(t, n.Quiet)

	d := &Noisy{}
	require.NoError(t, d.Check(&s))
	assert.Equal(t, DefaultNoisyRates(), d.Rates, "the default rates")
	d.Rates[0] = 1
	assert.Equal(t, []float64{800, 1200}, DefaultNoisyRates(), "a copy: the defaults stay")

	for name, bad := range map[string]struct {
		noisy *Noisy
		says  string
	}{
		"not a rate": {&Noisy{rates: "800,x"}, `-noisy-rates: "x" is not a rate`},
		"zero":       {&Noisy{rates: "0"}, "-noisy-rates"},
		"negative":   {&Noisy{Rates: []float64{100, -1}}, "rate -1 must be in (0, 1000000]"},
		"too high":   {&Noisy{Rates: []float64{2e6}}, "-noisy-rates"},
	} {
		assert.ErrorContains(t, bad.noisy.Check(&s), bad.says, name)
	}
	for name, set := range map[string]func(*bench.SuiteConfig){
		"-tls":      func(s *bench.SuiteConfig) { s.TLS = true },
		"-newconns": func(s *bench.SuiteConfig) { s.NewConns = true },
		"-clients":  func(s *bench.SuiteConfig) { s.Clients = 4 },
	} {
		s := tinySuite()
		set(&s)
		assert.ErrorContains(t, (&Noisy{}).Check(&s), name, "the error names the flag")
	}
}

func TestNoisyPointsAreOnePerRate(t *testing.T) {
	s := tinySuite()
	n := &Noisy{Rates: []float64{300, 900}}
	require.NoError(t, n.Check(&s))
	ps := n.Points(&s)
	require.Len(t, ps, 2)
	for i, rate := range []float64{300, 900} {
		assert.Equal(t, rate, ps[i].Rate)
		assert.Zero(t, ps[i].Multiple, "the same rate for every target: no capacity")
		assert.Equal(t, suiteShape, ps[i].Shape)
		assert.Equal(t, suiteShape.Spec, ps[i].Spec)
	}
}

// noisySample builds a noisy sample of target at rate, with good answered
// in time, rej refused and the rest failed.
func noisySample(t *testing.T, target string, repeat int, rate, good, rej, p99, rqMax float64, place *bench.Placement) bench.Sample {
	t.Helper()
	s := bench.Sample{
		Scenario: "noisy", Shape: "io", Handler: bench.HandlerSpec{CPU: time.Millisecond, DB: 10 * time.Millisecond},
		Target: target, Repeat: repeat,
		Rates:     bench.Rates{Offered: rate, Goodput: good, Rejected: rej, Failed: rate - good - rej},
		Latency:   bench.Percentiles{P50: 15, P99: p99},
		TargetCPU: 0.7,
		Placement: place,
	}
	require.NoError(t, s.SetDetail(NoisyDetail{Rate: rate, CPUs: []int{0, 1}, NeighbourCPU: 1, NeighbourNice: 10, NeighbourUse: 0.5,
		RunQueue: bench.RunQueue{Wait: 1, MaxThread: rqMax}}))
	return s
}

// behindSample marks s as a run whose generator fell behind.
func behindSample(s bench.Sample) bench.Sample {
	s.Behind = true
	return s
}

// noisyReport has three targets at 800/s over three repeats, one of
// net/http's behind, and two at 1200/s, each run behind.
func noisyReport(t *testing.T) *bench.Report {
	pinned := &bench.Placement{Workers: 2, CPUs: []int{0, 1}}
	floating := &bench.Placement{Workers: 2, Reason: "root cpuset"}
	return &bench.Report{Command: "sluice bench -scenarios noisy", Deadline: time.Second, Repeats: 3, Samples: []bench.Sample{
		noisySample(t, "sluice", 0, 800, 800, 0, 50, 0.3, floating),
		noisySample(t, "sluice-pinned", 0, 800, 700, 100, 150, 0.9, pinned),
		noisySample(t, "nethttp", 0, 800, 800, 0, 300, 0.4, nil),
		noisySample(t, "sluice", 1, 800, 780, 20, 60, 0.3, floating),
		noisySample(t, "sluice-pinned", 1, 800, 740, 60, 140, 0.8, pinned),
		noisySample(t, "nethttp", 1, 800, 790, 0, 280, 0.4, nil),
		noisySample(t, "sluice", 2, 800, 790, 10, 70, 0.3, floating),
		noisySample(t, "sluice-pinned", 2, 800, 720, 80, 160, 0.7, pinned),
		behindSample(noisySample(t, "nethttp", 2, 800, 100, 0, 900, 0.4, nil)),
		behindSample(noisySample(t, "sluice", 0, 1200, 1000, 200, 90, 0.3, floating)),
		behindSample(noisySample(t, "nethttp", 0, 1200, 900, 0, 900, 0.4, nil)),
	}}
}

func TestNoisySummarize(t *testing.T) {
	rows, err := (&Noisy{}).Summarize(noisyReport(t))
	require.NoError(t, err)
	var order []string
	by := map[string]NoisyRow{}
	for _, r := range rows {
		k := r.Target + " " + formatRates([]float64{r.Rate})
		order = append(order, k)
		by[k] = r
	}
	assert.Equal(t, []string{"sluice 800", "sluice-pinned 800", "nethttp 800", "sluice 1200", "nethttp 1200"}, order,
		"by rate, then target in order of appearance")

	s := by["sluice 800"]
	assert.Equal(t, 3, s.Runs)
	assert.Equal(t, 790.0, s.Goodput, "the median")
	assert.Equal(t, 10.0, s.Rejected)
	assert.InDelta(t, 10.0/800, s.RejectedFrac, 1e-12)
	assert.Equal(t, 60.0, s.P99)
	assert.Equal(t, 0.5, s.NeighbourUse)
	assert.Equal(t, "floating", s.Placement)
	n := by["nethttp 800"]
	assert.Equal(t, 2, n.Runs)
	assert.Equal(t, 1, n.Behind)
	assert.Equal(t, 795.0, n.Goodput, "the median of the two kept runs")
	assert.Empty(t, n.Placement)
	assert.InDelta(t, 790.0/795, s.Ratio, 1e-12)
	assert.False(t, s.RatioIndicative)
	p := by["sluice-pinned 800"]
	assert.Equal(t, "pinned 0-1", p.Placement)
	assert.Equal(t, 0.8, p.MaxThreadWait)
	assert.InDelta(t, 720.0/795, p.Ratio, 1e-12)

	s12 := by["sluice 1200"]
	assert.True(t, s12.Indicative)
	assert.Equal(t, 0, s12.Runs)
	assert.Equal(t, 1, s12.Behind)
	assert.InDelta(t, 1000.0/900, s12.Ratio, 1e-12)
	assert.True(t, s12.RatioIndicative, "against a baseline whose runs were all behind")

	none, err := (&Noisy{}).Summarize(&bench.Report{Samples: []bench.Sample{{Scenario: "sweep", Target: "sluice"}}})
	require.NoError(t, err)
	assert.Nil(t, none)
	none, err = (&Noisy{}).Summarize(nil)
	require.NoError(t, err)
	assert.Nil(t, none)

	bad := &bench.Report{Samples: []bench.Sample{{Scenario: "noisy", Target: "sluice", Detail: json.RawMessage(`{"rate":"fast"}`)}}}
	_, err = (&Noisy{}).Summarize(bad)
	assert.ErrorContains(t, err, "sluice", "a detail that does not decode names its sample")
	assert.Nil(t, (&Noisy{}).Rows(bad))
}

// tableLine returns the line of out that starts with prefix once its
// cells are separated by single spaces, "" when there is none.
func tableLine(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if norm := strings.Join(strings.Fields(l), " "); strings.HasPrefix(norm, prefix) {
			return norm
		}
	}
	return ""
}

func TestNoisyReport(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, (&Noisy{}).WriteReport(&buf, noisyReport(t)))
	out := buf.String()
	assert.Contains(t, out, "noisy neighbour, shape io (cpu 1ms, db 10ms): targets on CPUs 0-1, a busy loop in another process on CPU 1 (nice 10, as the targets)\n")
	assert.Equal(t, "target workers offered/s goodput/s vs nethttp 503 % failed % p50 ms p99 ms CPU tgt CPU nbr rq wait rq max runs", tableLine(out, "target"))
	assert.Equal(t, "sluice floating 800 790 0.99 1.2 0.0 15.0 60.0 0.70 0.50 1.00 0.30 3/0", tableLine(out, "sluice floating"))
	assert.Equal(t, "sluice-pinned pinned 0-1 800 720 0.91 10.0 0.0 15.0 150 0.70 0.50 1.00 0.80 3/0", tableLine(out, "sluice-pinned"))
	assert.Equal(t, "nethttp - 800 795 1.00 0.0 0.6 15.0 290 0.70 0.50 1.00 0.40 2/1", tableLine(out, "nethttp - 800"))
	assert.Equal(t, "sluice* floating 1200 1000 1.11* 16.7 0.0 15.0 90.0 0.70 0.50 1.00 0.30 0/1", tableLine(out, "sluice* floating"))
	assert.Contains(t, out, "* after a target: the load generator fell behind")
	assert.Contains(t, out, "rq max: the same for the one thread that waited most")

	quiet := noisyReport(t)
	for i := range quiet.Samples {
		s := &quiet.Samples[i]
		d := detail[NoisyDetail](t, s)
		d.NeighbourCPU = -1
		require.NoError(t, s.SetDetail(d))
	}
	buf.Reset()
	require.NoError(t, (&Noisy{}).WriteReport(&buf, quiet))
	assert.Contains(t, buf.String(), "noisy neighbour's control, shape io (cpu 1ms, db 10ms): targets on CPUs 0-1, no neighbour\n")

	buf.Reset()
	require.NoError(t, (&Noisy{}).WriteReport(&buf, &bench.Report{}))
	assert.Empty(t, buf.String(), "nothing without noisy samples")

	buf.Reset()
	require.NoError(t, WriteJSON(&buf, noisyReport(t), All()))
	var doc struct {
		Scenarios map[string][]NoisyRow `json:"scenarios"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc))
	assert.Len(t, doc.Scenarios["noisy"], 5, "the rows in the JSON document")
}

// oldNoisyReport is a report.json as sluice bench wrote it before the noisy
// scenario kept its figures in a sample's detail: under "noisy".
const oldNoisyReport = `{
  "report": {
    "command": "go run ./cmd/sluice bench -scenarios noisy",
    "deadline": 1000000000,
    "repeats": 1,
    "samples": [
      {"scenario": "noisy", "shape": "io", "handler": {"cpu": 1000000, "db": 10000000, "blocking": false},
       "target": "sluice", "repeat": 0, "capacity": 0, "multiple": 0,
       "rates": {"offered": 800, "goodput": 760, "rejected": 40, "failed": 0},
       "latency_ms": {"p50": 12, "p90": 30, "p99": 95, "p999": 120, "max": 150},
       "behind": false, "target_cpu": 0.8, "generator_cpu": 0.2,
       "noisy": {"rate": 800, "cpus": [0, 1], "neighbour_cpu": 1, "neighbour_nice": 10, "neighbour_use": 0.45,
                 "run_queue": {"wait": 0.6, "max_thread": 0.4, "max_thread_run": 0.5}},
       "placement": {"workers": 2, "reason": "root cpuset"}},
      {"scenario": "noisy", "shape": "io", "handler": {"cpu": 1000000, "db": 10000000, "blocking": false},
       "target": "nethttp", "repeat": 0, "capacity": 0, "multiple": 0,
       "rates": {"offered": 800, "goodput": 800, "rejected": 0, "failed": 0},
       "latency_ms": {"p50": 14, "p90": 40, "p99": 210, "p999": 300, "max": 400},
       "behind": false, "target_cpu": 0.9, "generator_cpu": 0.2,
       "noisy": {"rate": 800, "cpus": [0, 1], "neighbour_cpu": 1, "neighbour_nice": 10, "neighbour_use": 0.5,
                 "run_queue": {"wait": 0.7, "max_thread": 0.5, "max_thread_run": 0.5}}}
    ]
  },
  "summary": [],
  "steps": [],
  "noisy": [{"target": "sluice", "rate": 800}]
}`

func TestNoisyReportsAnOldReport(t *testing.T) {
	var doc report.Document
	require.NoError(t, json.Unmarshal([]byte(oldNoisyReport), &doc))
	require.NotNil(t, doc.Report)
	var buf bytes.Buffer
	require.NoError(t, WriteReport(&buf, doc.Report, All()))
	out := buf.String()
	assert.Contains(t, out, "noisy neighbour, shape io (cpu 1ms, db 10ms): targets on CPUs 0-1, a busy loop in another process on CPU 1 (nice 10, as the targets)")
	assert.Equal(t, "sluice floating 800 760 0.95 5.0 0.0 12.0 95.0 0.80 0.45 0.60 0.40 1/0", tableLine(out, "sluice floating"))
	assert.Equal(t, "nethttp - 800 800 1.00 0.0 0.0 14.0 210 0.90 0.50 0.70 0.50 1/0", tableLine(out, "nethttp -"))
}
