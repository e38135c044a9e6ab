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
)

func TestStrayRunsEachPartOnEachTarget(t *testing.T) {
	cfg := tinySuite()
	cfg.Duration = 400 * time.Millisecond
	stray := &Stray{
		Delay: 100 * time.Millisecond, Rate: 5, TrivialRate: 100, TrivialConns: 4, Multiple: 0.2,
		Shape: bench.Shape{Name: "spin", Spec: bench.HandlerSpec{CPU: 100 * time.Microsecond}},
	}
	cfg.Scenarios = []bench.Scenario{stray}
	rep, err := bench.RunSuite(context.Background(), cfg)
	require.NoError(t, err)

	type key struct{ target, part string }
	var got []key
	capacity := map[string]float64{}
	for i := range rep.Samples {
		s := &rep.Samples[i]
		d := detail[StrayDetail](t, s)
		what := s.Target + " " + d.Part
		got = append(got, key{s.Target, d.Part})
		assert.Equal(t, "stray", s.Scenario, what)
		assert.Equal(t, "spin", s.Shape, what)
		assert.Equal(t, 100*time.Millisecond, d.Delay, what)
		assert.Positive(t, s.Rates.Goodput, what)
		switch d.Part {
		case StrayTrivial:
			assert.Zero(t, s.Capacity, "%s: no capacity for the trivial endpoint", what)
			assert.Zero(t, s.Multiple, what)
			assert.InEpsilon(t, 100, s.Rates.Offered, 0.5, what)
		default:
			assert.Positive(t, s.Capacity, what)
			assert.Equal(t, 0.2, s.Multiple, what)
			assert.InEpsilon(t, 0.2*s.Capacity, s.Rates.Offered, 0.5, what)
			if c, ok := capacity[s.Target]; ok {
				assert.Equal(t, c, s.Capacity, "%s: one calibration for both CPU parts", what)
			}
			capacity[s.Target] = s.Capacity
		}
		if d.Part == StrayCPU {
			assert.Zero(t, d.Rate, "%s: no stray calls", what)
			assert.Zero(t, d.Calls, what)
		} else {
			assert.Equal(t, 5.0, d.Rate, what)
			assert.InDelta(t, 5, d.Calls.Offered, 2.5, "%s: 2 calls in 0.4 s", what)
			assert.Positive(t, d.Calls.Goodput, "%s: the stray calls are answered", what)
			assert.GreaterOrEqual(t, d.CallLatency.P50, 100.0, "%s: each waits for the slow service", what)
		}
	}
	assert.Equal(t, []key{
		{"nethttp", StrayTrivial}, {"nethttp", StrayCPU}, {"nethttp", StrayCPUWith},
		{"sluice", StrayTrivial}, {"sluice", StrayCPU}, {"sluice", StrayCPUWith},
	}, got)

	var buf bytes.Buffer
	require.NoError(t, WriteReport(&buf, rep, All()))
	assert.Contains(t, buf.String(), "stray blocking: /stray calls a service that answers after 100ms")
}

func TestStrayFlagsAndChecks(t *testing.T) {
	st := &Stray{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	st.Flags(fs)
	require.NoError(t, fs.Parse([]string{"-stray-delay", "500ms", "-stray-x", "3"}))
	s := tinySuite()
	require.NoError(t, st.Check(&s))
	assert.Equal(t, 500*time.Millisecond, st.Delay)
	assert.Equal(t, 3.0, st.Multiple)

	d := &Stray{}
	require.NoError(t, d.Check(&s))
	assert.Equal(t, &Stray{Delay: time.Second, Rate: 2, TrivialRate: 500, TrivialConns: 32, Multiple: 2, Shape: bench.ShapeCPU}, d,
		"the defaults of the zero fields")

	for name, args := range map[string][]string{
		"-stray-delay": {"-stray-delay", "0s"},
		"-stray-x":     {"-stray-x", "-2"},
	} {
		st := &Stray{}
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		st.Flags(fs)
		require.NoError(t, fs.Parse(args))
		assert.ErrorContains(t, st.Check(&s), name+" must be in", "the error names the flag")
	}
	for name, bad := range map[string]*Stray{
		"Rate":         {Rate: -2},
		"TrivialRate":  {TrivialRate: -1},
		"Multiple":     {Multiple: -1},
		"Delay":        {Delay: -time.Second},
		"TrivialConns": {TrivialConns: -3},
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
		assert.ErrorContains(t, (&Stray{}).Check(&s), name, "the error names the flag")
	}
}

func TestStrayPointsAreItsThreeParts(t *testing.T) {
	s := tinySuite()
	st := &Stray{Delay: 200 * time.Millisecond, Multiple: 3}
	require.NoError(t, st.Check(&s))
	ps := st.Points(&s)
	require.Len(t, ps, 3)
	for i, part := range []string{StrayTrivial, StrayCPU, StrayCPUWith} {
		assert.Equal(t, part, ps[i].Part)
		assert.Equal(t, bench.ShapeCPU, ps[i].Shape, part)
	}
	assert.Zero(t, ps[0].Multiple, "the trivial endpoint has a rate of its own")
	assert.Equal(t, s.Duration+200*time.Millisecond, ps[0].Window, "the window waits for the last call")
	assert.Equal(t, 3.0, ps[1].Multiple)
	assert.Equal(t, s.Duration, ps[1].Window, "no calls to wait for")
	assert.Equal(t, 3.0, ps[2].Multiple)
	assert.Equal(t, s.Duration+200*time.Millisecond, ps[2].Window)
}

// straySample builds a stray sample of one part.
func straySample(t *testing.T, target, part string, repeat int, offered, good, rej, p99 float64) bench.Sample {
	t.Helper()
	s := bench.Sample{
		Scenario: "stray", Shape: "cpu", Handler: bench.HandlerSpec{CPU: time.Millisecond},
		Target: target, Repeat: repeat,
		Rates:   bench.Rates{Offered: offered, Goodput: good, Rejected: rej, Failed: offered - good - rej},
		Latency: bench.Percentiles{P50: p99 / 4, P99: p99},
	}
	d := StrayDetail{Part: part, Delay: time.Second}
	if part != StrayTrivial {
		s.Capacity, s.Multiple = 900, 2
	}
	if part != StrayCPU {
		d.Rate = 2
		d.Calls = bench.Rates{Offered: 2, Goodput: 1.5}
	}
	if strings.HasPrefix(target, "sluice") {
		s.Placement = &bench.Placement{Workers: 2}
	}
	require.NoError(t, s.SetDetail(d))
	return s
}

// strayReport has sluice and net/http over three repeats, net/http's last
// run with the stray calls behind.
func strayReport(t *testing.T) *bench.Report {
	var samples []bench.Sample
	for r := range 3 {
		samples = append(samples,
			straySample(t, "sluice", StrayTrivial, r, 500, 200+float64(r), 0, 990),
			straySample(t, "sluice", StrayCPU, r, 1800, 900, 900, 80),
			straySample(t, "sluice", StrayCPUWith, r, 1800, 300*float64(r+1), 1500-300*float64(r+1), 400),
			straySample(t, "nethttp", StrayTrivial, r, 500, 500, 0, 3),
			straySample(t, "nethttp", StrayCPU, r, 1800, 800, 0, 900),
		)
		with := straySample(t, "nethttp", StrayCPUWith, r, 1800, 800, 0, 900)
		if r == 2 {
			with = behindSample(with)
		}
		samples = append(samples, with)
	}
	return &bench.Report{Command: "sluice bench -scenarios stray", Deadline: time.Second, Repeats: 3, Samples: samples}
}

func TestStraySummarize(t *testing.T) {
	rows, err := (&Stray{}).Summarize(strayReport(t))
	require.NoError(t, err)
	require.Len(t, rows, 2)
	s, n := rows[0], rows[1]
	assert.Equal(t, "sluice", s.Target)
	assert.Equal(t, "floating", s.Placement)
	assert.Equal(t, 3, s.Trivial.Runs)
	assert.Equal(t, 201.0, s.Trivial.Goodput, "the median")
	assert.Equal(t, 990.0, s.Trivial.P99)
	assert.Equal(t, 2.0, s.Trivial.CallsOffered)
	assert.Equal(t, 1.5, s.Trivial.CallsDone)
	assert.Equal(t, 900.0, s.Capacity)
	assert.Equal(t, 2.0, s.Multiple)
	assert.Equal(t, 900.0, s.CPU.Goodput)
	assert.Equal(t, 0.5, s.CPU.RejectedFrac)
	assert.Zero(t, s.CPU.CallsOffered, "no calls beside the CPU-bound part alone")
	assert.Equal(t, 600.0, s.CPUWith.Goodput)
	assert.InDelta(t, 600.0/900, s.WithOverAlone, 1e-12, "the median of the repeats' ratios 1/3, 2/3, 1")

	assert.Equal(t, "nethttp", n.Target)
	assert.Empty(t, n.Placement)
	assert.Equal(t, 2, n.CPUWith.Runs)
	assert.Equal(t, 1, n.CPUWith.Behind)
	assert.Equal(t, 1.0, n.WithOverAlone, "the behind repeat is left out")

	none, err := (&Stray{}).Summarize(&bench.Report{Samples: []bench.Sample{{Scenario: "sweep", Target: "sluice"}}})
	require.NoError(t, err)
	assert.Nil(t, none)
	none, err = (&Stray{}).Summarize(nil)
	require.NoError(t, err)
	assert.Nil(t, none)

	bad := &bench.Report{Samples: []bench.Sample{{Scenario: "stray", Target: "nethttp", Detail: json.RawMessage(`{"part":7}`)}}}
	_, err = (&Stray{}).Summarize(bad)
	assert.ErrorContains(t, err, "nethttp", "a detail that does not decode names its sample")
	assert.Nil(t, (&Stray{}).Rows(bad))
}

func TestStrayReport(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, (&Stray{}).WriteReport(&buf, strayReport(t)))
	out := buf.String()
	assert.Contains(t, out, "stray blocking: /stray calls a service that answers after 1s through a plain net/http client (holding its thread), 2 a second\n")
	assert.Contains(t, out, "/trivial beside the stray calls:\n")
	assert.Contains(t, out, "CPU-bound handler, shape cpu (cpu 1ms, db 0s), at 2x of C, alone and beside the stray calls:\n")
	assert.Equal(t, "target workers offered/s goodput/s p50 ms p99 ms 503 % failed % stray calls/s done/s runs", tableLine(out, "target workers"))
	assert.Equal(t, "sluice floating 500 201 248 990 0.0 59.8 2 1.5 3/0", tableLine(out, "sluice floating"))
	assert.Equal(t, "nethttp - 500 500 0.75 3.00 0.0 0.0 2 1.5 3/0", tableLine(out, "nethttp -"))
	assert.Equal(t, "target C/s goodput/s alone with stray with/alone p99 ms alone with stray 503 % alone with stray runs", tableLine(out, "target C/s"))
	assert.Equal(t, "sluice 900 900 600 0.67 80.0 400 50.0 50.0 3/0, 3/0", tableLine(out, "sluice 900"))
	assert.Equal(t, "nethttp 900 800 800 1.00 900 900 0.0 0.0 3/0, 2/1", tableLine(out, "nethttp 900"))
	assert.Contains(t, out, "answered within their delay plus 2s;")

	buf.Reset()
	require.NoError(t, (&Stray{}).WriteReport(&buf, &bench.Report{}))
	assert.Empty(t, buf.String(), "nothing without stray samples")

	buf.Reset()
	require.NoError(t, WriteJSON(&buf, strayReport(t), All()))
	var doc struct {
		Scenarios map[string][]StrayRow `json:"scenarios"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc))
	assert.Len(t, doc.Scenarios["stray"], 2, "the rows in the JSON document")
}

// oldStrayReport is a report.json as sluice bench wrote it before the stray
// scenario kept its figures in a sample's detail: under "stray".
const oldStrayReport = `{
  "report": {
    "command": "go run ./cmd/sluice bench -scenarios stray",
    "deadline": 1000000000,
    "repeats": 1,
    "samples": [
      {"scenario": "stray", "shape": "cpu", "handler": {"cpu": 1000000, "db": 0, "blocking": false},
       "target": "sluice", "repeat": 0, "capacity": 0, "multiple": 0,
       "rates": {"offered": 500, "goodput": 480, "rejected": 0, "failed": 20},
       "latency_ms": {"p50": 2, "p99": 40}, "behind": false,
       "stray": {"part": "trivial", "delay": 1000000000, "rate": 2,
                 "calls": {"offered": 2, "goodput": 2, "rejected": 0, "failed": 0}, "call_latency_ms": {"p50": 1001, "p99": 1003}},
       "placement": {"workers": 2, "reason": "root cpuset"}},
      {"scenario": "stray", "shape": "cpu", "handler": {"cpu": 1000000, "db": 0, "blocking": false},
       "target": "sluice", "repeat": 0, "capacity": 1000, "multiple": 2,
       "rates": {"offered": 2000, "goodput": 950, "rejected": 1050, "failed": 0},
       "latency_ms": {"p50": 10, "p99": 60}, "behind": false,
       "stray": {"part": "cpu", "delay": 1000000000, "rate": 0,
                 "calls": {"offered": 0, "goodput": 0, "rejected": 0, "failed": 0}, "call_latency_ms": {}}},
      {"scenario": "stray", "shape": "cpu", "handler": {"cpu": 1000000, "db": 0, "blocking": false},
       "target": "sluice", "repeat": 0, "capacity": 1000, "multiple": 2,
       "rates": {"offered": 2000, "goodput": 760, "rejected": 1240, "failed": 0},
       "latency_ms": {"p50": 12, "p99": 90}, "behind": false,
       "stray": {"part": "cpu+stray", "delay": 1000000000, "rate": 2,
                 "calls": {"offered": 2, "goodput": 2, "rejected": 0, "failed": 0}, "call_latency_ms": {"p50": 1001, "p99": 1004}}}
    ]
  },
  "summary": [],
  "steps": [],
  "stray": [{"target": "sluice"}]
}`

func TestStrayReportsAnOldReport(t *testing.T) {
	var doc report.Document
	require.NoError(t, json.Unmarshal([]byte(oldStrayReport), &doc))
	require.NotNil(t, doc.Report)
	var buf bytes.Buffer
	require.NoError(t, WriteReport(&buf, doc.Report, All()))
	out := buf.String()
	assert.Contains(t, out, "stray blocking: /stray calls a service that answers after 1s through a plain net/http client (holding its thread), 2 a second")
	assert.Equal(t, "sluice floating 500 480 2.00 40.0 0.0 4.0 2 2 1/0", tableLine(out, "sluice floating"))
	assert.Equal(t, "sluice 1000 950 760 0.80 60.0 90.0 52.5 62.0 1/0, 1/0", tableLine(out, "sluice 1000"))
}
