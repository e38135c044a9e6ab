package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// run builds a sample offering mult*c requests per second, of which good
// succeed and rej are rejected; the rest fail.
func run(scenario, target string, repeat int, c, mult, good, rej, p50 float64) bench.Sample {
	offered := mult * c
	return bench.Sample{
		Scenario: scenario,
		Shape:    "cpu",
		Handler:  bench.HandlerSpec{CPU: time.Millisecond},
		Target:   target,
		Repeat:   repeat,
		Capacity: c,
		Multiple: mult,
		Rates:    bench.Rates{Offered: offered, Goodput: good, Rejected: rej, Failed: offered - good - rej},
		Latency:  bench.Percentiles{P50: p50, P90: 2 * p50, P99: 4 * p50, P999: 8 * p50, Max: 10 * p50},
	}
}

// behind marks s as a run whose generator fell behind.
func behind(s bench.Sample) bench.Sample {
	s.Behind = true
	s.MaxLag = 50 * time.Millisecond
	return s
}

// sweepReport has sluice and nethttp at 2x (three kept repeats and a
// behind one for sluice), sluice and semaphore at 4x without nethttp, and
// semaphore at 8x with every run behind.
func sweepReport() *bench.Report {
	sw := "sweep"
	return &bench.Report{
		Command:  "go run ./cmd/bench -scenario sweep",
		Started:  time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Machine:  "2 CPUs, GOMAXPROCS 2, go1.26",
		Deadline: time.Second,
		Repeats:  3,
		Samples: []bench.Sample{
			run(sw, "sluice", 0, 1000, 4, 900, 3000, 2),
			run(sw, "sluice", 0, 1000, 2, 950, 1000, 2),
			run(sw, "nethttp", 0, 1000, 2, 500, 0, 900),
			run(sw, "sluice", 1, 1100, 2, 1000, 1150, 3),
			run(sw, "nethttp", 1, 1000, 2, 400, 0, 950),
			run(sw, "sluice", 2, 900, 2, 800, 950, 1),
			run(sw, "nethttp", 2, 1000, 2, 600, 0, 800),
			behind(run(sw, "sluice", 3, 1000, 2, 10, 0, 500)),
			run(sw, "semaphore", 0, 1000, 4, 700, 3200, 5),
			behind(run(sw, "semaphore", 0, 1000, 8, 100, 0, 1)),
			behind(run(sw, "semaphore", 1, 1000, 8, 100, 0, 1)),
		},
	}
}

// find returns the row of a target, multiple and class.
func find(t *testing.T, rows []Row, scenario, target string, mult float64, class string) Row {
	t.Helper()
	for _, r := range rows {
		if r.Scenario == scenario && r.Target == target && r.Multiple == mult && r.Class == class {
			return r
		}
	}
	require.Failf(t, "row not found", "%s %s x%g %q", scenario, target, mult, class)
	return Row{}
}

func TestSummarizeMediansLeaveOutBehindRuns(t *testing.T) {
	rows := Summarize(sweepReport(), tabled)
	r := find(t, rows, "sweep", "sluice", 2, "")
	assert.Equal(t, 3, r.Runs)
	assert.Equal(t, 1, r.Behind)
	assert.InDelta(t, 1000, r.Capacity, 1e-9)
	assert.InDelta(t, 2000, r.Offered, 1e-9)
	assert.InDelta(t, 950, r.Goodput, 1e-9, "the behind run's 10/s is left out")
	assert.InDelta(t, 1000, r.Rejected, 1e-9)
	assert.InDelta(t, 50, r.Failed, 1e-9)
	// Per run: 950/1000, 1000/1100, 800/900.
	assert.InDelta(t, 1000.0/1100, r.GoodputFrac, 1e-9)
	// Per run: 1000/2000, 1150/2200, 950/1800.
	assert.InDelta(t, 1150.0/2200, r.RejectedFrac, 1e-9)
	// Per run: 50/2000, 50/2200, 50/1800.
	assert.InDelta(t, 50.0/2000, r.FailedFrac, 1e-9)
	assert.InDelta(t, 2, r.P50, 1e-9)
	assert.InDelta(t, 8, r.P99, 1e-9)
	assert.InDelta(t, 16, r.P999, 1e-9)

	all := find(t, rows, "sweep", "semaphore", 8, "")
	assert.Equal(t, 0, all.Runs)
	assert.Equal(t, 2, all.Behind)
	assert.True(t, all.Indicative, "no kept run: the behind runs' medians, flagged")
	assert.InDelta(t, 100, all.Goodput, 1e-9)
	assert.InDelta(t, 0.1, all.GoodputFrac, 1e-9)
	assert.Zero(t, all.Ratio, "an indicative row has no ratio")
}

func TestSummarizeEvenCountTakesMiddleMean(t *testing.T) {
	sw := "sweep"
	rep := &bench.Report{Samples: []bench.Sample{
		run(sw, "sluice", 0, 1000, 1, 800, 0, 1),
		run(sw, "sluice", 1, 1000, 1, 900, 0, 3),
	}}
	r := Summarize(rep, tabled)[0]
	assert.InDelta(t, 850, r.Goodput, 1e-9)
	assert.InDelta(t, 2, r.P50, 1e-9)
}

func TestSummarizeRatioAgainstNethttp(t *testing.T) {
	rows := Summarize(sweepReport(), tabled)
	s := find(t, rows, "sweep", "sluice", 2, "")
	assert.InDelta(t, 500, s.BaselineGoodput, 1e-9)
	assert.InDelta(t, 1.9, s.Ratio, 1e-9)
	n := find(t, rows, "sweep", "nethttp", 2, "")
	assert.InDelta(t, 1, n.Ratio, 1e-9)

	noBase := find(t, rows, "sweep", "semaphore", 4, "")
	assert.Zero(t, noBase.BaselineGoodput, "no nethttp at 4x")
	assert.Zero(t, noBase.Ratio, "0 without a baseline")
}

func TestSummarizeOrder(t *testing.T) {
	rep := sweepReport()
	step := run("step", "sluice", 0, 1000, 4, 900, 0, 1)
	mix := run("mix", "nethttp", 0, 1000, 2, 900, 0, 1)
	slow := run("slowdown", "sluice", 0, 1000, 1, 900, 0, 1)
	shapes := run("shapes", "sluice", 0, 1000, 1, 900, 0, 1)
	io := run("shapes", "sluice", 0, 1000, 1, 900, 0, 1)
	io.Shape = "io"
	other := run("custom", "sluice", 0, 1000, 1, 900, 0, 1)
	rep.Samples = append([]bench.Sample{step, mix, other, slow, io}, append(rep.Samples, shapes)...)

	var got []string
	for _, r := range Summarize(rep, tabled) {
		got = append(got, r.Scenario+"/"+r.Shape+"/"+formatMultiple(r.Multiple)+"/"+r.Target)
	}
	// Targets appear first in the order sluice, nethttp, semaphore.
	assert.Equal(t, []string{
		"sweep/cpu/2/sluice",
		"sweep/cpu/2/nethttp",
		"sweep/cpu/4/sluice",
		"sweep/cpu/4/semaphore",
		"sweep/cpu/8/semaphore",
		"shapes/cpu/1/sluice",
		"shapes/io/1/sluice",
		"slowdown/cpu/1/sluice",
		"mix/cpu/2/nethttp",
		"step/cpu/4/sluice",
	}, got, "a scenario of another kind (custom) is left to its own report")
	assert.Nil(t, Summarize(nil, tabled))

	// The table shows the scenarios named, in the order named.
	got = nil
	for _, r := range Summarize(rep, []string{"step", "custom", "sweep"}) {
		if r.Target == "sluice" {
			got = append(got, r.Scenario+"/"+formatMultiple(r.Multiple))
		}
	}
	assert.Equal(t, []string{"step/4", "custom/1", "sweep/2", "sweep/4"}, got)
}

// mixRun is a mix sample with a "kept" and a "new" class.
func mixRun(target string, repeat int, keptGood, newGood float64) bench.Sample {
	s := run("mix", target, repeat, 1000, 2, keptGood+newGood, 0, 1)
	s.Classes = map[string]bench.ClassSample{
		"kept": {Rates: bench.Rates{Offered: 1000, Goodput: keptGood, Failed: 1000 - keptGood}, Latency: bench.Percentiles{P50: 1, P99: 3}},
		"new":  {Rates: bench.Rates{Offered: 1000, Goodput: newGood, Rejected: 1000 - newGood}, Latency: bench.Percentiles{P50: 2, P99: 7}},
	}
	return s
}

func TestSummarizeClasses(t *testing.T) {
	rep := &bench.Report{Samples: []bench.Sample{
		mixRun("sluice", 0, 600, 300),
		mixRun("nethttp", 0, 500, 100),
		mixRun("sluice", 1, 700, 200),
		mixRun("nethttp", 1, 300, 300),
		mixRun("sluice", 2, 650, 250),
		mixRun("nethttp", 2, 400, 200),
	}}
	rows := Summarize(rep, tabled)
	require.Len(t, rows, 6)
	var order []string
	for _, r := range rows {
		order = append(order, r.Target+"/"+r.Class)
	}
	assert.Equal(t, []string{"sluice/", "sluice/kept", "sluice/new", "nethttp/", "nethttp/kept", "nethttp/new"}, order)

	kept := find(t, rows, "mix", "sluice", 2, "kept")
	assert.Equal(t, 3, kept.Runs)
	assert.InDelta(t, 650, kept.Goodput, 1e-9)
	assert.InDelta(t, 0.65, kept.GoodputFrac, 1e-9, "a class's goodput is a fraction of the target's C")
	assert.InDelta(t, 0.35, kept.FailedFrac, 1e-9)
	assert.InDelta(t, 400, kept.BaselineGoodput, 1e-9)
	assert.InDelta(t, 650.0/400, kept.Ratio, 1e-9)
	assert.InDelta(t, 3, kept.P99, 1e-9)

	fresh := find(t, rows, "mix", "sluice", 2, "new")
	assert.InDelta(t, 250, fresh.Goodput, 1e-9)
	assert.InDelta(t, 0.75, fresh.RejectedFrac, 1e-9)
	assert.InDelta(t, 250.0/200, fresh.Ratio, 1e-9)

	whole := find(t, rows, "mix", "sluice", 2, "")
	assert.InDelta(t, 900, whole.Goodput, 1e-9)
	assert.InDelta(t, 900.0/600, whole.Ratio, 1e-9)
}

const bucket = 100 * time.Millisecond

// stepSample is a step run of 5 s in 100 ms buckets: 500/s offered until
// 1 s, 2000/s until 3 s, 500/s again after. Goodput is 1000/s in the high
// phase, except the first settle buckets (400/s); the first dirty buckets
// after the step down have rejections.
func stepSample(target string, repeat, settle, dirty int) bench.Sample {
	s := bench.Sample{
		Scenario: "step",
		Shape:    "cpu",
		Target:   target,
		Repeat:   repeat,
		Capacity: 1000,
		Multiple: 4,
		Step:     &bench.StepInfo{Low: 0.5, High: 4, Up: time.Second, Down: 3 * time.Second, End: 5 * time.Second},
	}
	for i := range 50 {
		b := load.Bucket{Start: time.Duration(i) * bucket, Offered: 50, OK: 50}
		switch {
		case i >= 10 && i < 30:
			b.Offered, b.OK = 200, 100
			if i < 10+settle {
				b.OK = 40
			}
			b.Rejected = b.Offered - b.OK
		case i >= 30 && i < 30+dirty:
			b.OK, b.Rejected = 40, 10
		}
		b.Completed = b.OK
		s.Series = append(s.Series, b)
	}
	return s
}

func TestStepMetrics(t *testing.T) {
	s := stepSample("sluice", 0, 0, 0)
	// Ramp: 400/s, 600/s, then 950/s (within 10 % of 1000/s), and one
	// bucket above steady but within the band.
	s.Series[10].OK, s.Series[11].OK, s.Series[12].OK, s.Series[15].OK = 40, 60, 95, 108
	// After the step down: rejections, then one failure, then clean.
	s.Series[30].Rejected, s.Series[31].Rejected, s.Series[32].Failed = 30, 5, 1

	m, ok := StepMetrics(s)
	require.True(t, ok)
	assert.Equal(t, bucket, m.Bucket)
	assert.InDelta(t, 1000, m.Steady, 1e-6)
	assert.InDelta(t, 2000, m.HighOffered, 1e-6)
	assert.InDelta(t, 1000, m.Level, 1e-6)
	assert.Equal(t, 300*time.Millisecond, m.ReactTime, "to the end of the first bucket within the band")
	assert.InDelta(t, 1, m.Stable, 1e-9, "every later bucket within the band")
	assert.True(t, m.Recovered)
	assert.Equal(t, 300*time.Millisecond, m.RecoverTime)
}

func TestStepMetricsStableShare(t *testing.T) {
	s := stepSample("sluice", 0, 0, 0)
	s.Series[25].OK = 80 // a dip at 2.5 s
	m, ok := StepMetrics(s)
	require.True(t, ok)
	assert.Equal(t, 100*time.Millisecond, m.ReactTime, "at its level from the first high bucket")
	assert.InDelta(t, 18.0/19, m.Stable, 1e-9, "one of the 19 later buckets out of the band")

	s.Series[29].OK = 50
	m, ok = StepMetrics(s)
	require.True(t, ok)
	assert.InDelta(t, 17.0/19, m.Stable, 1e-9)

	// A slow rise: the level is reached in the second half.
	s = stepSample("sluice", 0, 12, 0)
	m, ok = StepMetrics(s)
	require.True(t, ok)
	assert.Equal(t, 1300*time.Millisecond, m.ReactTime)
}

func TestStepMetricsOutput(t *testing.T) {
	// A queue built up and flushed: the load of every other bucket is
	// served, the rest rejected, while the answers leave at a level rate.
	s := stepSample("sluice", 0, 0, 0)
	for i := 10; i < 30; i++ {
		s.Series[i].OK = 150
		if i%2 == 1 {
			s.Series[i].OK = 50
		}
		s.Series[i].Rejected = s.Series[i].Offered - s.Series[i].OK
	}
	s.Series[10].Completed = 30 // answers start to leave in the second bucket
	m, ok := StepMetrics(s)
	require.True(t, ok)
	assert.True(t, m.HasOutput)
	assert.InDelta(t, 1000, m.Steady, 1e-6, "the median of 1500s and 500s")
	assert.Equal(t, 100*time.Millisecond, m.ReactTime)
	assert.InDelta(t, 0, m.Stable, 1e-9, "no later bucket by send time within 10%")
	assert.InDelta(t, 1000, m.OutputSteady, 1e-6)
	assert.Equal(t, 200*time.Millisecond, m.OutputReact)
	assert.InDelta(t, 1, m.OutputStable, 1e-9, "every later bucket by end time at the level")

	for i := range s.Series {
		s.Series[i].Completed = 0
	}
	m, ok = StepMetrics(s)
	require.True(t, ok, "a series without completions still has the send-time metrics")
	assert.False(t, m.HasOutput)
	assert.Zero(t, m.OutputReact)
	assert.Zero(t, m.OutputStable)
}

func TestStepMetricsRecovery(t *testing.T) {
	m, ok := StepMetrics(stepSample("sluice", 0, 0, 0))
	require.True(t, ok)
	assert.Equal(t, 100*time.Millisecond, m.ReactTime, "one bucket")
	assert.Zero(t, m.RecoverTime, "no rejection after the step down")
	assert.True(t, m.Recovered)

	m, ok = StepMetrics(stepSample("sluice", 0, 0, 20))
	require.True(t, ok)
	assert.Equal(t, 2*time.Second, m.RecoverTime, "rejections to the end")
	assert.False(t, m.Recovered)
}

func TestStepMetricsNeedsAStep(t *testing.T) {
	s := stepSample("sluice", 0, 0, 0)
	s.Step = nil
	_, ok := StepMetrics(s)
	assert.False(t, ok, "no StepInfo")

	s = stepSample("sluice", 0, 0, 0)
	s.Series = nil
	_, ok = StepMetrics(s)
	assert.False(t, ok, "no series")

	s = stepSample("sluice", 0, 0, 0)
	s.Series = s.Series[:15]
	_, ok = StepMetrics(s)
	assert.False(t, ok, "no bucket in the second half of the high phase")
}

// stepReport has three kept sluice runs and a behind one, and nethttp runs
// that are all behind.
func stepReport() *bench.Report {
	return &bench.Report{
		Command:  "go run ./cmd/bench -scenario step",
		Deadline: time.Second,
		Repeats:  3,
		Samples: []bench.Sample{
			stepSample("sluice", 0, 2, 3),
			stepSample("sluice", 1, 3, 1),
			stepSample("sluice", 2, 1, 20),
			behind(stepSample("sluice", 3, 15, 20)),
			behind(stepSample("nethttp", 0, 0, 0)),
		},
	}
}

func TestSummarizeSteps(t *testing.T) {
	rows := SummarizeSteps(stepReport(), "step")
	require.Len(t, rows, 2)
	s := rows[0]
	assert.Equal(t, "sluice", s.Target)
	assert.Equal(t, 0.5, s.Low)
	assert.Equal(t, 4.0, s.High)
	assert.Equal(t, 3, s.Runs)
	assert.Equal(t, 1, s.Behind)
	assert.Equal(t, 3, s.Measured)
	assert.InDelta(t, 1000, s.Steady, 1e-6)
	assert.Equal(t, 300*time.Millisecond, s.ReactTime)
	assert.Equal(t, 300*time.Millisecond, s.RecoverTime)
	assert.InDelta(t, 1, s.Stable, 1e-9)
	assert.Equal(t, 2, s.Recovered)
	assert.Equal(t, 3, s.OutputMeasured)
	assert.Equal(t, 300*time.Millisecond, s.OutputReact)
	assert.InDelta(t, 1, s.OutputStable, 1e-9)

	n := rows[1]
	assert.Equal(t, "nethttp", n.Target)
	assert.Equal(t, 0, n.Runs)
	assert.Equal(t, 1, n.Behind)
	assert.Zero(t, n.Measured)
	assert.Nil(t, SummarizeSteps(nil, "step"))

	// Only the named scenario's runs with a step profile count.
	rep := stepReport()
	other := rep.Samples[0]
	other.Scenario = "shed"
	flat := rep.Samples[0]
	flat.Step = nil
	rep.Samples = append(rep.Samples, other, flat)
	assert.Equal(t, rows, SummarizeSteps(rep, "step"))
	assert.Len(t, SummarizeSteps(rep, "shed"), 1)
	assert.Empty(t, SummarizeSteps(rep, "sweep"))
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

func TestWriteTableNamesTheCPUSplit(t *testing.T) {
	rep := sweepReport()
	rep.TargetCPUs, rep.GeneratorCPUs = []int{4, 5, 6, 7}, []int{0, 1}
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, rep, tabled))
	assert.Contains(t, buf.String(), "CPUs:     targets on 4-7, generator on 0-1\n")
}

func TestWriteTable(t *testing.T) {
	rep := sweepReport()
	rep.Samples = append(rep.Samples, stepReport().Samples...)
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, rep, tabled))
	out := buf.String()

	assert.Contains(t, out, "Command:  go run ./cmd/bench -scenario sweep")
	assert.Contains(t, out, "Machine:  2 CPUs, GOMAXPROCS 2, go1.26")
	assert.Contains(t, out, "CPUs:     targets and generator share all")
	assert.Contains(t, out, "Deadline: 1s  Repeats: 3")
	assert.Contains(t, out, "sweep, shape cpu (cpu 1ms, db 0s)")
	assert.Less(t, strings.Index(out, "sweep, shape cpu"), strings.Index(out, "step, shape cpu"))

	// target x C/s offered/s goodput/s goodput/C vs-nethttp rejected% failed% p50 p99 p99.9 runs
	assert.Equal(t, []string{"sluice", "2", "1000", "2000", "950", "0.91", "1.90", "52.3", "2.5", "2.00", "8.00", "16.0", "-", "-", "3/1"},
		lineOf(out, "sluice", "950"))
	assert.Equal(t, []string{"semaphore", "4", "1000", "4000", "700", "0.70", "-", "80.0", "2.5", "5.00", "20.0", "40.0", "-", "-", "1/0"},
		lineOf(out, "semaphore", "700"))
	ind := lineOf(out, "semaphore*", "0/2")
	require.Len(t, ind, 15)
	assert.Equal(t, []string{"semaphore*", "8", "1000", "8000", "100", "0.10"}, ind[:6])
	assert.Contains(t, out, "* after a target: the generator fell behind its schedule in every run of this row")
	assert.Contains(t, out, "- under vs nethttp: nethttp was not run at that load.")
	assert.Contains(t, out, "\nColumns (medians over the kept runs):\n")

	assert.Contains(t, out, "step response, shape cpu")
	// target x offered/s steady/s react stable done-react done-stable recover recovered runs
	assert.Equal(t, []string{"sluice", "0.5->4", "2000", "1000", "300", "100", "300", "100", "300", "2/3", "3/1"},
		lineOf(out, "sluice", "0.5->4"))
	assert.Equal(t, []string{"nethttp", "0.5->4", "behind", "-", "-", "-", "-", "-", "-", "-", "0/1"},
		lineOf(out, "nethttp", "0.5->4"))
}

func TestWriteTableClassColumn(t *testing.T) {
	rep := &bench.Report{Samples: []bench.Sample{mixRun("sluice", 0, 600, 300), mixRun("nethttp", 0, 500, 100)}}
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, rep, tabled))
	assert.Equal(t, "new", lineOf(buf.String(), "sluice", "new")[1])
	assert.Equal(t, "-", lineOf(buf.String(), "sluice", "900")[1], "the whole sample has no class")
}

// failWriter fails every write.
type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }

func TestWriteErrors(t *testing.T) {
	boom := errors.New("boom")
	assert.ErrorIs(t, WriteTable(failWriter{boom}, sweepReport(), tabled), boom)
	assert.ErrorIs(t, WriteJSON(failWriter{boom}, sweepReport(), tabled), boom)
	assert.Error(t, WriteTable(&bytes.Buffer{}, nil, tabled))
	assert.Error(t, WriteJSON(&bytes.Buffer{}, nil, tabled))
	_, err := plots(t.TempDir(), nil)
	assert.Error(t, err)
}

func TestWriteJSONRoundTrips(t *testing.T) {
	rep := sweepReport()
	rep.Samples = append(rep.Samples, stepReport().Samples...)
	rep.Samples = append(rep.Samples, mixRun("sluice", 0, 600, 300))
	var buf bytes.Buffer
	require.NoError(t, WriteJSON(&buf, rep, tabled))

	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(buf.Bytes(), &raw))
	assert.Contains(t, raw, "report")
	assert.Contains(t, raw, "summary")
	assert.Contains(t, raw, "steps")

	var got Document
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	assert.Equal(t, NewDocument(rep, tabled), got)
	assert.Equal(t, rep, got.Report)
}

func TestWriteJSONEmptyReport(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteJSON(&buf, &bench.Report{}, tabled))
	var got Document
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	assert.Empty(t, got.Summary)
	assert.NotNil(t, got.Summary, "an empty list, not null")
}

// assertPNG checks that path is a non-empty PNG file.
func assertPNG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(b), 8)
	assert.Equal(t, []byte("\x89PNG\r\n\x1a\n"), b[:8], path)
}

// tabled are the scenarios shown in the table of rates by offered load, as
// package bench/scenario lists them.
var tabled = []string{"sweep", "shapes", "slowdown", "mix", "step"}

// plots draws the charts of rep as the sweep and step scenarios do.
func plots(dir string, rep *bench.Report) ([]string, error) {
	paths, err := OfferedPlots(dir, rep, "sweep")
	if err != nil {
		return paths, err
	}
	more, err := StepPlots(dir, rep, "step", "Step response", nil)
	return append(paths, more...), err
}

func TestPlots(t *testing.T) {
	rep := sweepReport()
	rep.Samples = append(rep.Samples, stepReport().Samples...)
	dir := filepath.Join(t.TempDir(), "plots", "new")
	paths, err := plots(dir, rep)
	require.NoError(t, err)
	assert.Equal(t, []string{
		filepath.Join(dir, "goodput-cpu.png"),
		filepath.Join(dir, "latency-cpu.png"),
		filepath.Join(dir, "step-cpu.png"),
	}, paths)
	for _, p := range paths {
		assertPNG(t, p)
	}
}

func TestPlotsSkipAbsentData(t *testing.T) {
	dir := t.TempDir()
	rep := &bench.Report{Samples: []bench.Sample{
		mixRun("sluice", 0, 600, 300),
		behind(stepSample("sluice", 0, 0, 0)),
	}}
	paths, err := plots(dir, rep)
	require.NoError(t, err)
	assert.Empty(t, paths)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)

	// A sweep whose runs were all behind is drawn, as indicative.
	rep.Samples = append(rep.Samples, behind(run("sweep", "sluice", 0, 1000, 2, 900, 0, 1)))
	paths, err = plots(dir, rep)
	require.NoError(t, err)
	assert.Len(t, paths, 2, "goodput and latency")
	for _, p := range paths {
		assertPNG(t, p)
		os.Remove(p)
	}

	// Step runs only, of two shapes that reduce to the same file name.
	s := stepSample("sluice", 0, 0, 0)
	s.Shape = "a/b"
	u := stepSample("sluice", 0, 0, 0)
	u.Shape = "a_b"
	paths, err = plots(dir, &bench.Report{Samples: []bench.Sample{s, u}})
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "step-a_b.png"), filepath.Join(dir, "step-a_b-2.png")}, paths)
	for _, p := range paths {
		assertPNG(t, p)
	}
}

func TestPlotsRejectsNaN(t *testing.T) {
	s := run("sweep", "sluice", 0, 1000, 2, 900, 0, 1)
	s.Rates.Goodput = math.NaN()
	_, err := plots(t.TempDir(), &bench.Report{Samples: []bench.Sample{s}})
	assert.ErrorContains(t, err, "goodput of sluice")
}

func TestLogTicks(t *testing.T) {
	var labels []string
	for _, tk := range logTicks(0.4, 12) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	assert.Equal(t, []string{"0.5", "1", "2", "5", "10"}, labels)
	assert.Nil(t, logTicks(0, 1))

	labels = nil
	for _, tk := range logTicks(2.5, 4.5) {
		labels = append(labels, tk.Label)
	}
	assert.Equal(t, []string{"3", "4"}, labels, "a narrow range labels every tick")
}

func TestMultipleTicks(t *testing.T) {
	ticks := multipleTicks([]float64{4, 0.5, 1, 4, 2}).Ticks(0.4, 5)
	var labels []string
	for _, tk := range ticks {
		labels = append(labels, tk.Label)
	}
	assert.Equal(t, []string{"0.5", "1", "2", "4"}, labels)

	many := make([]float64, maxValueTicks+1)
	for i := range many {
		many[i] = float64(i + 1)
	}
	assert.NotEmpty(t, multipleTicks(many).Ticks(1, 13))
}

func TestFormatTick(t *testing.T) {
	assert.Equal(t, "0.3", formatTick(3*0.1))
	assert.Equal(t, "10000", formatTick(1e4))
	assert.Equal(t, "2.5", formatTick(2.5))
	assert.Equal(t, "0.002", formatTick(2e-3))
}

func TestSummarizeCPUAndEfficiency(t *testing.T) {
	mk := func(repeat int, goodput, tcpu float64) bench.Sample {
		return bench.Sample{
			Scenario: "sweep", Shape: "io", Target: "sluice", Repeat: repeat,
			Capacity: 1000, CapacityCPU: 2, Multiple: 5,
			Rates:     bench.Rates{Offered: 5000, Goodput: goodput},
			TargetCPU: tcpu, GeneratorCPU: 0.5,
		}
	}
	rep := &bench.Report{Samples: []bench.Sample{mk(0, 600, 1.5), mk(1, 700, 1.4), mk(2, 500, 1.25)}}
	r := find(t, Summarize(rep, tabled), "sweep", "sluice", 5, "")
	assert.InDelta(t, 1.4, r.TargetCPU, 1e-9)
	assert.InDelta(t, 0.5, r.GeneratorCPU, 1e-9)
	// Per run: (600/1.5)/(1000/2) = 0.8, (700/1.4)/500 = 1, (500/1.25)/500 = 0.8.
	assert.InDelta(t, 0.8, r.Efficiency, 1e-9)
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, rep, tabled))
	assert.Contains(t, buf.String(), "1.40/0.50")
	assert.Contains(t, buf.String(), " 0.80 ")
}
