//go:build linux

package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
	"github.com/sluice-go/sluice/bench/report"
)

// The short form of the shed scenario, for CI: both targets through the
// three phases, in a second and a half each. Too short for the CPU
// average to act (it spans 10 s): what it checks is the plumbing (the
// targets, the phases, the series, the counters, the machine's CPU); the
// long form's figures are in docs/benchmarks.md and the lag itself is
// pinned down by gate.TestCPULagsAStep on scripted readings.
func TestShedRunsEachTargetThroughThePhases(t *testing.T) {
	cfg := tinySuite()
	cfg.Targets = []string{bench.TargetSluiceBusy, bench.TargetSluiceCPU}
	cfg.Scenarios = []bench.Scenario{&Shed{Low: 0.2, High: 1.5, Before: 300 * time.Millisecond, During: 800 * time.Millisecond, After: 400 * time.Millisecond, Bucket: 100 * time.Millisecond}}
	var mu sync.Mutex
	var progress []string
	cfg.Progress = func(_, _ time.Duration, now string) {
		mu.Lock()
		defer mu.Unlock()
		progress = append(progress, now)
	}
	rep, err := bench.RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	require.Len(t, rep.Samples, 2)
	for _, now := range progress {
		assert.NotContains(t, now, "calibrating", "the reference is calibrated within each run")
	}
	for i := range rep.Samples {
		s := &rep.Samples[i]
		what := s.Target
		assert.Equal(t, cfg.Targets[i], s.Target)
		assert.Equal(t, "shed", s.Scenario, what)
		assert.Equal(t, "light", s.Shape, what)
		assert.Positive(t, s.Capacity, "%s: the reference's C", what)
		assert.Equal(t, 1.5, s.Multiple, what)
		require.NotNil(t, s.Step, what)
		assert.Equal(t, bench.StepInfo{Low: 0.2, High: 1.5, Up: 300 * time.Millisecond, Down: 1100 * time.Millisecond, End: 1500 * time.Millisecond}, *s.Step, what)
		require.Len(t, s.Series, 15, "%s: 100 ms buckets over 1.5 s", what)
		var offered [3]int64
		for _, b := range s.Series {
			switch {
			case b.Start < s.Step.Up:
				offered[0] += b.Offered
			case b.Start < s.Step.Down:
				offered[1] += b.Offered
			default:
				offered[2] += b.Offered
			}
		}
		assert.InEpsilon(t, 0.2*s.Capacity*0.3, offered[0], 0.5, "%s: low before", what)
		assert.InEpsilon(t, 1.5*s.Capacity*0.8, offered[1], 0.5, "%s: high during", what)
		assert.InEpsilon(t, 0.2*s.Capacity*0.4, offered[2], 0.5, "%s: low after", what)
		assert.Positive(t, s.Rates.Goodput, what)
		d, err := bench.DetailOf[ShedDetail](s)
		require.NoError(t, err, what)
		require.NotNil(t, d, "%s: a shed sample records its detail", what)
		assert.Positive(t, d.HostCPU, "%s: the machine's CPU, read", what)
		assert.GreaterOrEqual(t, d.OtherCPU, 0.0, what)
		var st admit.Stats
		require.NoError(t, json.Unmarshal(s.Server, &st), what)
		assert.Positive(t, st.Admitted, what)
		for reason := range st.RejectedBy {
			want := map[string]string{bench.TargetSluiceBusy: "busy", bench.TargetSluiceCPU: "cpu"}[s.Target]
			assert.Equal(t, want, reason, "%s: refused by its one signal only (no age limit, no queue)", what)
		}
	}
}

func TestShedChecks(t *testing.T) {
	cfg := tinySuite()
	sh := &Shed{}
	require.NoError(t, sh.Check(&cfg))
	assert.Equal(t, &Shed{Low: 0.3, High: 3, Before: 10 * time.Second, During: 15 * time.Second, After: 10 * time.Second, Bucket: 250 * time.Millisecond}, sh)

	for _, c := range []struct {
		shed *Shed
		want string
	}{
		{&Shed{High: -1}, "the shed scenario's High multiple must be positive and finite, got -1"},
		{&Shed{Low: math.NaN()}, "the shed scenario's Low multiple must be positive and finite, got NaN"},
		{&Shed{High: math.Inf(1)}, "the shed scenario's High multiple must be positive and finite, got +Inf"},
		{&Shed{During: -time.Second}, "the shed scenario's During must not be negative (zero for the default), got -1s"},
		{&Shed{Bucket: -time.Millisecond}, "the shed scenario's Bucket must not be negative (zero for the default), got -1ms"},
	} {
		assert.ErrorContains(t, c.shed.Check(&cfg), c.want)
	}
	tls := tinySuite()
	tls.TLS = true
	assert.ErrorContains(t, (&Shed{}).Check(&tls), "-tls, -newconns and -clients")
	clients := tinySuite()
	clients.Clients = 4
	assert.ErrorContains(t, (&Shed{}).Check(&clients), "SuiteConfig.TLS, NewConns, Clients")

	all, err := Select(All(), []string{"shed"})
	require.NoError(t, err)
	assert.IsType(t, &Shed{}, all[0], "All registers it")
}

func TestShedPointIsOneStepOnTheSuiteShape(t *testing.T) {
	cfg := tinySuite()
	sh := &Shed{}
	require.NoError(t, sh.Check(&cfg))
	assert.Equal(t, []bench.Point{{Shape: suiteShape, Spec: suiteShape.Spec, Window: 2*400*time.Millisecond + 35*time.Second}}, sh.Points(&cfg),
		"no Multiple (the run measures the reference's C itself); the window is that calibration and the phases")
}

// shedSample builds a shed sample over 1 s buckets: 2 s low, 4 s high, 3 s
// low, 100 requests a second low and 300 high (C = 100/s). The target
// starts refusing refuseFrom seconds into the overload, refusing half of
// each bucket from then on, and the requests it admits in the overload
// before that fail; after the step down it refuses 20 of each bucket for
// refuseAfter seconds. reasons is its server's counters.
func shedSample(target string, repeat, refuseFrom, refuseAfter int, reasons string) bench.Sample {
	s := bench.Sample{
		Scenario: "shed", Shape: "io", Handler: bench.HandlerSpec{CPU: time.Millisecond, DB: 10 * time.Millisecond},
		Target: target, Repeat: repeat, Capacity: 100, Multiple: 3,
		Latency: bench.Percentiles{P99: float64(10 * (repeat + 1))},
		Step:    &bench.StepInfo{Low: 1, High: 3, Up: 2 * time.Second, Down: 6 * time.Second, End: 9 * time.Second},
		Server:  json.RawMessage(reasons),
	}
	for i := range 9 {
		b := load.Bucket{Start: time.Duration(i) * time.Second, Offered: 100}
		switch {
		case i >= 2 && i < 6:
			b.Offered = 300
			if i-2 >= refuseFrom {
				b.Rejected, b.OK = 150, 150
			} else {
				b.Failed, b.OK = 250, 50
			}
		case i >= 6 && i-6 < refuseAfter:
			b.Rejected, b.OK = 20, 80
		default:
			b.OK = 100
		}
		s.Series = append(s.Series, b)
	}
	s.Rates = bench.Rates{Offered: 1, Goodput: 1}
	return s
}

func TestShedMetricsOf(t *testing.T) {
	m, ok := ShedMetricsOf(shedSample("sluice-cpu", 0, 2, 2, ""))
	require.True(t, ok)
	assert.Equal(t, ShedMetrics{
		FirstRefusal: 3 * time.Second, Refused: true,
		Goodput:       (50 + 50 + 150 + 150) / 4.0 / 100,
		Late:          500.0 / 1200,
		RefusedDuring: 300.0 / 1200,
		RefusedAfter:  40.0 / 300,
		RefusingFor:   2 * time.Second,
	}, m)

	m, ok = ShedMetricsOf(shedSample("sluice-busy", 0, 0, 0, ""))
	require.True(t, ok)
	assert.Equal(t, time.Second, m.FirstRefusal, "the first bucket of the overload")
	assert.Zero(t, m.Late)
	assert.Zero(t, m.RefusingFor)

	m, ok = ShedMetricsOf(shedSample("nethttp", 0, 9, 0, ""))
	require.True(t, ok)
	assert.False(t, m.Refused)
	assert.Zero(t, m.FirstRefusal)

	// A target that refuses a fifth of the light load refuses as much
	// after the step down: that is not refusing on, and its first refusal
	// is the first bucket above 20% + 10 points.
	r := shedSample("sluice-busy", 0, 1, 0, "")
	for i := range r.Series {
		if b := &r.Series[i]; b.Start < 2*time.Second || b.Start >= 6*time.Second {
			b.Rejected, b.OK = 20, 80
		} else if i == 2 {
			b.Rejected, b.OK, b.Failed = 80, 50, 170 // 27%: below the margin
		}
	}
	m, ok = ShedMetricsOf(r)
	require.True(t, ok)
	assert.InDelta(t, 0.2, m.RefusedBefore, 1e-12)
	assert.InDelta(t, 0.2, m.RefusedAfter, 1e-12)
	assert.Equal(t, 2*time.Second, m.FirstRefusal, "the second bucket of the overload, at 50%")
	assert.Zero(t, m.RefusingFor)

	_, ok = ShedMetricsOf(bench.Sample{Scenario: "shed"})
	assert.False(t, ok, "no step, no series")
}

// withShedDetail returns s with d as its detail.
func withShedDetail(t *testing.T, s bench.Sample, d ShedDetail) bench.Sample {
	t.Helper()
	require.NoError(t, s.SetDetail(d))
	return s
}

// shedReport is three repeats of both targets and a fourth of the busy
// one: its first run disturbed, the CPU target's last behind, one run
// counting a reason the others do not.
func shedReport(t *testing.T) *bench.Report {
	var samples []bench.Sample
	for r := range 3 {
		samples = append(samples,
			shedSample("sluice-busy", r, 0, 0, fmt.Sprintf(`{"Admitted":9,"RejectedBy":{"busy":%d}}`, 600+r)),
			shedSample("sluice-cpu", r, 1+r, 2, `{"Admitted":9,"RejectedBy":{"cpu":300}}`),
		)
	}
	samples[5] = behindSample(samples[5])
	samples[0] = withShedDetail(t, samples[0], ShedDetail{HostCPU: 1.9, OtherCPU: 0.5}) // left out
	samples[2] = withShedDetail(t, samples[2], ShedDetail{HostCPU: 1.5, OtherCPU: 0.05})
	samples = append(samples, shedSample("sluice-busy", 3, 0, 0, `{"RejectedBy":{"busy":599}}`))
	samples[3].Server = json.RawMessage(`{"RejectedBy":{"cpu":500,"queue-closed":3}}`)
	return &bench.Report{Command: "sluice bench -scenarios shed", Deadline: time.Second, Repeats: 3, Samples: samples}
}

func TestShedSummarize(t *testing.T) {
	rows, err := (&Shed{}).Summarize(shedReport(t))
	require.NoError(t, err)
	require.Len(t, rows, 2)
	b, c := rows[0], rows[1]
	assert.Equal(t, "sluice-busy", b.Target)
	assert.Equal(t, 3, b.Runs)
	assert.Equal(t, 1, b.Disturbed)
	assert.Equal(t, time.Second, b.Shed.FirstRefusal)
	assert.Equal(t, 30.0, b.P99, "repeats 1 to 3; 0 was disturbed")
	assert.Equal(t, map[string]float64{"busy": 601}, b.RefusedBy, "599, 601, 602")
	assert.Equal(t, 100.0, b.Capacity)
	assert.Equal(t, 3.0, b.High)
	assert.Equal(t, 4*time.Second, b.Down-b.Up)

	assert.Equal(t, "sluice-cpu", c.Target)
	assert.Equal(t, 2, c.Runs)
	assert.Equal(t, 1, c.Behind)
	assert.Equal(t, 2500*time.Millisecond, c.Shed.FirstRefusal, "median of 2 s and 3 s; the behind run left out")
	assert.Equal(t, 2*time.Second, c.Shed.RefusingFor)
	assert.Equal(t, map[string]float64{"cpu": 400, "queue-closed": 1.5}, c.RefusedBy, "a run without a reason counts 0 for it")

	rows, err = (&Shed{}).Summarize(&bench.Report{Samples: []bench.Sample{{Scenario: "sweep", Target: "sluice"}}})
	assert.NoError(t, err)
	assert.Nil(t, rows, "no shed samples")
	rows, err = (&Shed{}).Summarize(nil)
	assert.NoError(t, err)
	assert.Nil(t, rows)

	bad := shedReport(t)
	bad.Samples[1].Detail = json.RawMessage(`"not a detail"`)
	_, err = (&Shed{}).Summarize(bad)
	assert.ErrorContains(t, err, "sluice-cpu, repeat 0", "the sample whose detail does not decode")
	assert.Nil(t, (&Shed{}).Rows(bad))
}

func TestShedReport(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, (&Shed{}).WriteReport(&buf, shedReport(t)))
	out := buf.String()
	assert.Contains(t, out, "\nshed: one signal alone against a step of overload, shape io (cpu 1ms, db 10ms): 1x of C for 2s, 3x for 4s, 1x for 3s (C = 100/s, sluice's capacity)\n")
	assert.Equal(t, "target first refusal goodput/C late % 503 % 503 % before 503 % after refusing for p99 ms refused by runs", tableLine(out, "target"))
	assert.Equal(t, "sluice-busy 1.00 s 1.50 0.0 50.0 0.0 0.0 0.00 s 30.0 busy 601 3/0/1", tableLine(out, "sluice-busy"))
	assert.Equal(t, "sluice-cpu 2.50 s 1.12 31.2 31.2 0.0 13.3 2.00 s 15.0 cpu 400, queue-closed 2 2/1/0", tableLine(out, "sluice-cpu"))
	assert.Contains(t, out, "first refusal: from the step up to the end of the first bucket that refused (503) 10 points more of its requests\n")
	assert.Contains(t, out, "0.1 CPU during the run, which the CPU target, reading the whole machine, counts as load).\n")

	buf.Reset()
	require.NoError(t, (&Shed{}).WriteReport(&buf, &bench.Report{}))
	assert.Empty(t, buf.String(), "nothing without shed samples")

	buf.Reset()
	require.NoError(t, WriteReport(&buf, shedReport(t), All()))
	assert.Contains(t, buf.String(), "shed: one signal alone")
	assert.NotContains(t, buf.String(), "shed, shape", "not in the main table")

	buf.Reset()
	require.NoError(t, WriteJSON(&buf, shedReport(t), All()))
	var doc struct {
		Summary   []report.Row         `json:"summary"`
		Scenarios map[string][]ShedRow `json:"scenarios"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc))
	assert.Len(t, doc.Scenarios["shed"], 2, "the rows in the JSON document")
	assert.Empty(t, doc.Summary)
}

func TestShedPlots(t *testing.T) {
	dir := t.TempDir()
	paths, err := Plots(dir, shedReport(t), All())
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "shed-io.png")}, paths)

	disturbed := shedReport(t)
	for i := range disturbed.Samples {
		disturbed.Samples[i] = withShedDetail(t, disturbed.Samples[i], ShedDetail{HostCPU: 2, OtherCPU: 1})
	}
	paths, err = (&Shed{}).Plots(t.TempDir(), disturbed)
	require.NoError(t, err)
	assert.Empty(t, paths, "no run to show: every one disturbed")
}

// oldShedReport is a report.json as sluice bench wrote it before the shed
// scenario kept its figures in a sample's detail: under "shed".
const oldShedReport = `{
  "report": {
    "command": "go run ./cmd/sluice bench -scenarios shed -targets sluice-busy",
    "deadline": 1000000000,
    "repeats": 2,
    "samples": [
      {"scenario": "shed", "shape": "io", "handler": {"cpu": 1000000, "db": 10000000, "blocking": false},
       "target": "sluice-busy", "repeat": 0, "capacity": 100, "multiple": 3,
       "rates": {"offered": 150, "goodput": 120, "rejected": 30, "failed": 0},
       "latency_ms": {"p50": 12, "p99": 40},
       "behind": false, "target_cpu": 0.8, "generator_cpu": 0.2,
       "series": [{"start": 0, "offered": 100, "ok": 100},
                  {"start": 1000000000, "offered": 300, "ok": 150, "rejected": 150},
                  {"start": 2000000000, "offered": 100, "ok": 100}],
       "step": {"low": 1, "high": 3, "up": 1000000000, "down": 2000000000, "end": 3000000000},
       "server": {"Admitted": 350, "RejectedBy": {"busy": 150}},
       "shed": {"host_cpu": 1.5, "other_cpu": 0.02}},
      {"scenario": "shed", "shape": "io", "handler": {"cpu": 1000000, "db": 10000000, "blocking": false},
       "target": "sluice-busy", "repeat": 1, "capacity": 100, "multiple": 3,
       "rates": {"offered": 150, "goodput": 100, "rejected": 50, "failed": 0},
       "latency_ms": {"p50": 12, "p99": 900},
       "behind": false, "target_cpu": 0.8, "generator_cpu": 0.2,
       "series": [{"start": 0, "offered": 100, "ok": 100},
                  {"start": 1000000000, "offered": 300, "ok": 100, "rejected": 200},
                  {"start": 2000000000, "offered": 100, "ok": 100}],
       "step": {"low": 1, "high": 3, "up": 1000000000, "down": 2000000000, "end": 3000000000},
       "server": {"Admitted": 300, "RejectedBy": {"busy": 200}},
       "shed": {"host_cpu": 3, "other_cpu": 1.5}}
    ]
  },
  "summary": [],
  "steps": [],
  "shed": [{"target": "sluice-busy"}]
}`

func TestShedReportsAnOldReport(t *testing.T) {
	var doc report.Document
	require.NoError(t, json.Unmarshal([]byte(oldShedReport), &doc))
	require.NotNil(t, doc.Report)
	var buf bytes.Buffer
	require.NoError(t, WriteReport(&buf, doc.Report, All()))
	out := buf.String()
	assert.Contains(t, out, "shed: one signal alone against a step of overload, shape io (cpu 1ms, db 10ms): 1x of C for 1s, 3x for 1s, 1x for 1s (C = 100/s, sluice's capacity)")
	assert.Equal(t, "sluice-busy 1.00 s 1.50 0.0 50.0 0.0 0.0 0.00 s 40.0 busy 150 1/0/1", tableLine(out, "sluice-busy"),
		"the second run, disturbed by its old other_cpu, left out")
	assert.True(t, strings.HasSuffix(out, "counts as load).\n"))
}
