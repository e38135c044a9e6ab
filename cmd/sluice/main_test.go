package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
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
	"github.com/sluice-go/sluice/bench/scenario"
)

func TestMain(m *testing.M) {
	bench.ServeChild(scenario.ChildHooks()...) // the demo's targets run as children of this binary
	// Operations awaited by the lanes demo may still sleep briefly after a run.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("time.Sleep"))
}

func TestLanesPrintsTable(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"lanes", "-duration", "200ms", "-workers", "1", "-pin=false"}, &out, &errOut)
	require.NoError(t, err, errOut.String())
	s := out.String()
	assert.Contains(t, s, "strict (default)")
	assert.Contains(t, s, "shares 1:1")
	assert.Contains(t, s, "of 1", "one worker reported")
}

// TestDemoWritesTableJSONAndPlot runs the demo small: both targets in child
// processes, one light point each.
func TestDemoWritesTableJSONAndPlot(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"demo",
		"-duration", "300ms", "-calibrate", "300ms", "-warmup", "100ms",
		"-x", "0.3", "-cpu", "100us", "-db", "1ms", "-out", dir, "-progress", "off"}, &out, &errOut)
	require.NoError(t, err, errOut.String())
	s := out.String()
	assert.Contains(t, s, "sweep, shape io")
	assert.Contains(t, s, "sluice")
	assert.Contains(t, s, "nethttp")
	assert.Contains(t, s, filepath.Join(dir, "report.json"))
	assert.Contains(t, s, filepath.Join(dir, "goodput-io.png"))
	assert.Contains(t, s, "Columns (medians over the kept runs):", "the legend under the table")
	// On a loaded machine the generator may fall behind: the summary then
	// says "about" (indicative) or that a target has no figures.
	assert.Regexp(t, `\n  At 0\.3x: sluice (completed (about )?\d+ requests a second in time|has no figures) .*; net/http (completed (about )?\d+ in time|has no figures) .*\.\n$`, s,
		"the plain summary closes the output")

	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	require.NoError(t, err)
	var doc struct {
		Report bench.Report `json:"report"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Len(t, doc.Report.Samples, 2)
	for _, smp := range doc.Report.Samples {
		assert.Positive(t, smp.Capacity, smp.Target)
		assert.Positive(t, smp.Rates.Goodput, smp.Target)
	}
	assert.Contains(t, doc.Report.Command, "go run ./cmd/sluice demo")
	png, err := os.ReadFile(filepath.Join(dir, "goodput-io.png"))
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(png, []byte("\x89PNG")))
}

func TestBadInput(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"nope"},
		{"lanes", "-duration", "0s"},
		{"lanes", "-load", "-1"},
		{"lanes", "-cpu", "0s"},
		{"lanes", "-workers", "-2"},
		{"lanes", "-bogus"},
		{"demo", "-duration", "0s"},
		{"demo", "-repeats", "0"},
		{"demo", "-x", "2,abc"},
		{"demo", "-x", "-1"},
		{"demo", "-cpu", "0s", "-db", "0s"},
		{"demo", "-targets", "apache"},
		{"demo", "-scenarios", "chaos"},
		{"demo", "-progress", "maybe"},
		{"demo", "extra"},
		{"bench", "-deadline", "0s"},
		{"demo", "-target-cpus", "1"},
		{"demo", "-generator-cpus", "0"},
		{"demo", "-target-cpus", "one", "-generator-cpus", "0"},
		{"demo", "-target-cpus", "1", "-generator-cpus", "0-"},
		{"demo", "-target-cpus", "0", "-generator-cpus", "0"},
		{"demo", "-target-cpus", "1000", "-generator-cpus", "0"},
		{"demo", "-cpus", "half"},
		{"demo", "-cpus", "shared", "-target-cpus", "1", "-generator-cpus", "0"},
		{"bench", "-scenarios", "noisy", "-noisy-rates", "800,x"},
		{"bench", "-scenarios", "noisy", "-noisy-rates", "0"},
		{"bench", "-scenarios", "stray", "-stray-delay", "0s"},
		{"bench", "-scenarios", "stray", "-stray-x", "-2"},
		{"bench", "-scenarios", "cluster", "-cluster-x", "0"},
		{"bench", "-scenarios", "tenants", "-tenants-duration", "0s"},
		{"bench", "-scenarios", "tenants", "-tenants-cpu", "0s"},
		{"bench", "-scenarios", "tenants", "-tenants-utilisation", "1.5"},
		{"bench", "-client", "polite"},
		{"bench", "-client", "keep,keep"},
		{"bench", "-shapes", "cpu,gpu"},
		{"bench", "-shapes", "io,io"},
		{"bench", "-conns", "-1"},
	} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append(args, "-out", t.TempDir()), &out, &errOut)
		assert.Error(t, err, strings.Join(args, " "))
	}
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"help"}, &out, &out))
	assert.Contains(t, out.String(), "demo")
	assert.Contains(t, out.String(), "bench")
	assert.Contains(t, out.String(), "lanes")
}

// parseSuiteFlags parses args as command's flags, with scenario as the
// default scenarios, and returns the flags and finish's error.
func parseSuiteFlags(t *testing.T, command, scenario string, args ...string) (*suiteFlags, error) {
	t.Helper()
	f := newSuiteFlags(time.Second, 1, "sluice", scenario, []float64{2})
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	f.register(fs)
	require.NoError(t, fs.Parse(args))
	return f, f.finish(command, args)
}

func TestCPUSplitFlags(t *testing.T) {
	parse := func(args ...string) (*suiteFlags, error) {
		return parseSuiteFlags(t, "demo", "sweep", args...)
	}
	target, gen, err := bench.SplitCPUs()
	require.NoError(t, err)
	f, err := parse()
	require.NoError(t, err)
	assert.Equal(t, target, f.cfg.TargetCPUs, "split by default")
	assert.Equal(t, gen, f.cfg.GeneratorCPUs)

	f, err = parse("-cpus", "shared")
	require.NoError(t, err)
	assert.Nil(t, f.cfg.TargetCPUs)
	assert.Nil(t, f.cfg.GeneratorCPUs)

	f, err = parse("-target-cpus", "3-4,1", "-generator-cpus", "0")
	require.NoError(t, err, "the lists are parsed here, checked against the machine by the suite")
	assert.Equal(t, []int{1, 3, 4}, f.cfg.TargetCPUs)
	assert.Equal(t, []int{0}, f.cfg.GeneratorCPUs)
}

func TestNoisyAndStrayFlags(t *testing.T) {
	parse := func(args ...string) (*scenario.Noisy, *scenario.Stray) {
		f, err := parseSuiteFlags(t, "bench", "noisy,stray", args...)
		require.NoError(t, err)
		require.Len(t, f.cfg.Scenarios, 2)
		noisy, ok := f.cfg.Scenarios[0].(*scenario.Noisy)
		require.True(t, ok, "-scenarios noisy selects the noisy scenario")
		stray, ok := f.cfg.Scenarios[1].(*scenario.Stray)
		require.True(t, ok, "-scenarios stray selects the stray scenario")
		for _, sc := range f.cfg.Scenarios {
			require.NoError(t, sc.Check(&f.cfg), "the suite checks %s before it runs", sc.Name())
		}
		return noisy, stray
	}
	noisy, stray := parse()
	assert.Equal(t, []float64{800, 1200}, noisy.Rates, "the two loads by default")
	assert.False(t, noisy.Quiet)
	assert.Equal(t, time.Second, stray.Delay)
	assert.Equal(t, 2.0, stray.Multiple)

	noisy, stray = parse("-noisy-rates", "400/s, 600", "-noisy-quiet", "-stray-delay", "500ms", "-stray-x", "3")
	assert.Equal(t, []float64{400, 600}, noisy.Rates)
	assert.True(t, noisy.Quiet)
	assert.Equal(t, 500*time.Millisecond, stray.Delay)
	assert.Equal(t, 3.0, stray.Multiple)
}

func TestProgressBarMovesAndStops(t *testing.T) {
	var cfg bench.SuiteConfig
	var buf bytes.Buffer
	stop := startProgress(&cfg, "on", "demo", &buf)
	require.NotNil(t, cfg.Progress, "mode on sets the suite's progress hook")
	cfg.Progress(0, 10*time.Second, "calibrating")
	cfg.Progress(5*time.Second, 10*time.Second, "sweep 2x")
	cfg.Progress(4*time.Second, 10*time.Second, "never backwards")
	stop()
	out := buf.String()
	assert.Contains(t, out, "calibrating", "the first report draws the bar") // later ones are throttled
	assert.Contains(t, out, "100%", "Finish fills the bar")

	var off bench.SuiteConfig
	buf.Reset()
	startProgress(&off, "off", "demo", &buf)()
	assert.Nil(t, off.Progress)
	assert.Empty(t, buf.String())
}

// TestProgressLinesWhenNotATerminal checks that with -progress auto and
// stderr going elsewhere than a terminal (a buffer here, a file or a pipe
// in use), every step of the suite gets one plain line.
func TestProgressLinesWhenNotATerminal(t *testing.T) {
	for _, mode := range []string{"auto", "lines"} {
		var cfg bench.SuiteConfig
		var buf bytes.Buffer
		stop := startProgress(&cfg, mode, "demo", &buf)
		require.NotNil(t, cfg.Progress, mode)
		total := 40 * time.Second
		// As RunSuite reports: each step as it starts and as it ends.
		cfg.Progress(0, total, "repeat 1/1, io, sluice: calibrating")
		cfg.Progress(10*time.Second, total, "repeat 1/1, io, sluice: calibrating")
		cfg.Progress(10*time.Second, total, "repeat 1/1, io, sluice: sweep 2x")
		cfg.Progress(20*time.Second, total, "repeat 1/1, io, sluice: sweep 2x")
		cfg.Progress(20*time.Second, total, "repeat 1/1, io, nethttp: sweep 2x")
		cfg.Progress(total, total, "repeat 1/1, io, nethttp: sweep 2x")
		stop()
		lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
		require.Len(t, lines, 5, mode+": "+buf.String())
		assert.Equal(t, "sluice demo: about 40s of measurements planned, one line per step", lines[0])
		assert.Equal(t, "sluice demo: [  0%] repeat 1/1, io, sluice: calibrating", lines[1])
		assert.Equal(t, "sluice demo: [ 25%] repeat 1/1, io, sluice: sweep 2x", lines[2])
		assert.Equal(t, "sluice demo: [ 50%] repeat 1/1, io, nethttp: sweep 2x", lines[3])
		assert.Regexp(t, `^sluice demo: \[100%\] done in \d+s$`, lines[4])
		assert.NotContains(t, buf.String(), "\r", "no bar drawing")
	}

	// Stopped before the end (an interrupt, an error): says so.
	var cfg bench.SuiteConfig
	var buf bytes.Buffer
	stop := startProgress(&cfg, "auto", "bench", &buf)
	cfg.Progress(0, 10*time.Second, "repeat 1/3, io, sluice: calibrating")
	cfg.Progress(3*time.Second, 10*time.Second, "repeat 1/3, io, sluice: calibrating")
	stop()
	assert.Regexp(t, `\nsluice bench: \[ 30%\] stopped after \d+s\n$`, buf.String())

	// A suite that never started writes nothing.
	buf.Reset()
	startProgress(&bench.SuiteConfig{}, "lines", "demo", &buf)()
	assert.Empty(t, buf.String())
}

// writeReport saves rep as a report.json under dir and returns its path.
func writeReport(t *testing.T, dir string, rep *bench.Report) string {
	t.Helper()
	path := filepath.Join(dir, "report.json")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, scenario.WriteJSON(f, rep, scenario.All()))
	require.NoError(t, f.Close())
	return path
}

// savedReport is a small hand-built sweep of sluice and net/http at 2x.
func savedReport() *bench.Report {
	sample := func(target string, goodput, rejected float64) bench.Sample {
		return bench.Sample{
			Scenario: "sweep", Shape: "io", Target: target,
			Capacity: 1000, Multiple: 2,
			Rates:   bench.Rates{Offered: 2000, Goodput: goodput, Rejected: rejected, Failed: 2000 - goodput - rejected},
			Latency: bench.Percentiles{P50: 15, P90: 30, P99: 80, P999: 90, Max: 100},
		}
	}
	return &bench.Report{
		Command:  "go run ./cmd/sluice demo",
		Deadline: time.Second,
		Repeats:  1,
		Samples:  []bench.Sample{sample("sluice", 990, 1010), sample("nethttp", 950, 0)},
	}
}

func TestReportTakesTheFileAsArgumentOrFlag(t *testing.T) {
	dir := t.TempDir()
	path := writeReport(t, dir, savedReport())
	plots := t.TempDir()
	for _, args := range [][]string{
		{"report", path},
		{"report", "-in", path},
		{"report", "-out", plots, path},
		{"report", path, "-out", plots},
		{"report", "--", path},
	} {
		var out, errOut bytes.Buffer
		require.NoError(t, run(context.Background(), args, &out, &errOut), strings.Join(args, " "))
		s := out.String()
		assert.Contains(t, s, "sweep, shape io", args)
		assert.Contains(t, s, "Columns (medians over the kept runs):", args)
		assert.Contains(t, s, "plot:  ", args)
		assert.Contains(t, s, "  At 2x: sluice completed 990 requests a second in time", args)
	}
	assert.FileExists(t, filepath.Join(dir, "goodput-io.png"), "the plots go next to the report by default")
	assert.FileExists(t, filepath.Join(plots, "goodput-io.png"), "or to -out")

	for _, args := range [][]string{
		{"report"},
		{"report", path, path},
		{"report", "-in", path, path},
		{"report", filepath.Join(dir, "missing.json")},
		{"report", "-bogus", path},
	} {
		var out, errOut bytes.Buffer
		assert.Error(t, run(context.Background(), args, &out, &errOut), strings.Join(args, " "))
	}
}

// TestReportRendersAReportSavedBefore renders testdata/report-2026-12-07.json,
// which sluice bench wrote (-scenarios sweep,shapes,slowdown,mix,step,
// two targets, two repeats) before the weather scenarios kept their own
// settings and reports, and compares the text with what sluice report
// printed for it then (testdata/report-2026-12-07.txt, the plots'
// directory written DIR). A deliberate change of the report's text
// regenerates the text with -update, to be read in review.
func TestReportRendersAReportSavedBefore(t *testing.T) {
	const name = "testdata/report-2026-12-07"
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"report", "-out", dir, name + ".json"}, &out, &errOut), errOut.String())
	got := strings.ReplaceAll(out.String(), dir, "DIR")
	if *update {
		require.NoError(t, os.WriteFile(name+".txt", []byte(got), 0o644))
	}
	want, err := os.ReadFile(name + ".txt")
	require.NoError(t, err)
	assert.Equal(t, string(want), got)
	for _, f := range []string{"goodput-io.png", "latency-io.png", "step-io.png"} {
		assert.FileExists(t, filepath.Join(dir, f))
	}
}

// update makes TestReportRendersAReportSavedBefore write the text it
// compares with.
var update = flag.Bool("update", false, "rewrite the expected text of TestReportRendersAReportSavedBefore")

// TestReportReadsAnOldNoisyReport gives sluice report a report.json as
// sluice bench wrote it before the noisy scenario kept its figures in a
// sample's detail: they were under "noisy", and the table still shows them.
func TestReportReadsAnOldNoisyReport(t *testing.T) {
	const old = `{"report": {"command": "go run ./cmd/sluice bench -scenarios noisy", "deadline": 1000000000, "repeats": 1,
  "samples": [{"scenario": "noisy", "shape": "io", "handler": {"cpu": 1000000, "db": 10000000, "blocking": false},
    "target": "sluice", "repeat": 0, "rates": {"offered": 1200, "goodput": 1100, "rejected": 60, "failed": 40},
    "latency_ms": {"p50": 20, "p99": 180}, "behind": false, "target_cpu": 1.4,
    "noisy": {"rate": 1200, "cpus": [0, 1], "neighbour_cpu": 1, "neighbour_nice": 10, "neighbour_use": 0.48,
      "run_queue": {"wait": 0.9, "max_thread": 0.45, "max_thread_run": 0.5}},
    "placement": {"workers": 2, "cpus": [0, 1], "exclusive": true}}]},
  "summary": [], "steps": [], "noisy": [{"target": "sluice", "rate": 1200}]}`
	path := filepath.Join(t.TempDir(), "report.json")
	require.NoError(t, os.WriteFile(path, []byte(old), 0o644))
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"report", path}, &out, &errOut), errOut.String())
	s := out.String()
	assert.Contains(t, s, "noisy neighbour, shape io (cpu 1ms, db 10ms): targets on CPUs 0-1, a busy loop in another process on CPU 1 (nice 10, as the targets)")
	var row string
	for _, l := range strings.Split(s, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "sluice" {
			row = strings.Join(f, " ")
		}
	}
	assert.Equal(t, "sluice pinned 0-1 1200 1100 - 5.0 3.3 20.0 180 1.40 0.48 0.90 0.45 1/0", row)
}

// TestReportReadsAnOldStrayReport does the same for the stray scenario,
// whose figures were under "stray".
func TestReportReadsAnOldStrayReport(t *testing.T) {
	const old = `{"report": {"command": "go run ./cmd/sluice bench -scenarios stray", "deadline": 1000000000, "repeats": 1,
  "samples": [{"scenario": "stray", "shape": "cpu", "handler": {"cpu": 1000000, "db": 0, "blocking": false},
    "target": "nethttp", "repeat": 0, "rates": {"offered": 500, "goodput": 500, "rejected": 0, "failed": 0},
    "latency_ms": {"p50": 1.5, "p99": 4}, "behind": false,
    "stray": {"part": "trivial", "delay": 1000000000, "rate": 2,
      "calls": {"offered": 2, "goodput": 1.5, "rejected": 0, "failed": 0.5}, "call_latency_ms": {"p50": 1002}}}]},
  "summary": [], "steps": [], "stray": [{"target": "nethttp"}]}`
	path := filepath.Join(t.TempDir(), "report.json")
	require.NoError(t, os.WriteFile(path, []byte(old), 0o644))
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"report", path}, &out, &errOut), errOut.String())
	s := out.String()
	assert.Contains(t, s, "stray blocking: /stray calls a service that answers after 1s through a plain net/http client (holding its thread), 2 a second")
	var row string
	for _, l := range strings.Split(s, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "nethttp" && f[1] == "-" {
			row = strings.Join(f, " ")
		}
	}
	assert.Equal(t, "nethttp - 500 500 1.50 4.00 0.0 0.0 2 1.5 1/0", row)
}

// TestReportReadsAnOldShedReport does the same for the shed scenario, whose
// figures were under "shed": a run disturbed by other programs is still
// left out.
func TestReportReadsAnOldShedReport(t *testing.T) {
	const old = `{"report": {"command": "go run ./cmd/sluice bench -scenarios shed -targets sluice-cpu", "deadline": 1000000000, "repeats": 2,
  "samples": [{"scenario": "shed", "shape": "io", "handler": {"cpu": 1000000, "db": 10000000, "blocking": false},
    "target": "sluice-cpu", "repeat": 0, "capacity": 200, "multiple": 3, "rates": {"offered": 300, "goodput": 200, "rejected": 100, "failed": 0},
    "latency_ms": {"p50": 12, "p99": 60}, "behind": false,
    "series": [{"start": 0, "offered": 200, "ok": 200}, {"start": 1000000000, "offered": 600, "ok": 200, "rejected": 300, "failed": 100},
      {"start": 2000000000, "offered": 200, "ok": 100, "rejected": 100}],
    "step": {"low": 1, "high": 3, "up": 1000000000, "down": 2000000000, "end": 3000000000},
    "server": {"Admitted": 600, "RejectedBy": {"cpu": 400}}, "shed": {"host_cpu": 1.2, "other_cpu": 0}},
   {"scenario": "shed", "shape": "io", "handler": {"cpu": 1000000, "db": 10000000, "blocking": false},
    "target": "sluice-cpu", "repeat": 1, "capacity": 200, "multiple": 3, "rates": {"offered": 300, "goodput": 300, "rejected": 0, "failed": 0},
    "latency_ms": {"p50": 12, "p99": 30}, "behind": false,
    "step": {"low": 1, "high": 3, "up": 1000000000, "down": 2000000000, "end": 3000000000},
    "shed": {"host_cpu": 2, "other_cpu": 0.8}}]},
  "summary": [], "steps": [], "shed": [{"target": "sluice-cpu"}]}`
	path := filepath.Join(t.TempDir(), "report.json")
	require.NoError(t, os.WriteFile(path, []byte(old), 0o644))
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"report", path}, &out, &errOut), errOut.String())
	s := out.String()
	assert.Contains(t, s, "shed: one signal alone against a step of overload, shape io (cpu 1ms, db 10ms): 1x of C for 1s, 3x for 1s, 1x for 1s (C = 200/s, sluice's capacity)")
	var row string
	for _, l := range strings.Split(s, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "sluice-cpu" {
			row = strings.Join(f, " ")
		}
	}
	assert.Equal(t, "sluice-cpu 1.00 s 1.00 16.7 50.0 0.0 50.0 1.00 s 60.0 cpu 400 1/0/1", row)
}

// TestReportReadsAnOldClusterReport does the same for the cluster
// scenario, whose figures were under "cluster".
func TestReportReadsAnOldClusterReport(t *testing.T) {
	const old = `{"report": {"command": "go run ./cmd/sluice bench -scenarios cluster", "deadline": 1000000000, "repeats": 1,
  "samples": [{"scenario": "cluster", "shape": "cluster", "handler": {"cpu": 1000000, "db": 0, "blocking": false},
    "target": "sluice", "repeat": 0, "capacity": 1000, "multiple": 1.5, "requests": 4500,
    "rates": {"offered": 1500, "goodput": 950, "rejected": 550, "failed": 0}, "latency_ms": {"p50": 20, "p99": 80}, "behind": false,
    "cluster": {"part": "none", "requests": 1000, "attempts": 1000, "amplification": 1,
      "backends": [{"handler": {"cpu": 1000000}, "sent": 1300, "served": 1300}, {"handler": {"cpu": 1000000}, "sent": 1300, "served": 1300},
        {"handler": {"cpu": 3000000}, "slow": true, "sent": 700, "served": 700}]}}]},
  "summary": [], "steps": [], "cluster": [{"target": "sluice", "part": "none"}]}`
	path := filepath.Join(t.TempDir(), "report.json")
	require.NoError(t, os.WriteFile(path, []byte(old), 0o644))
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"report", path}, &out, &errOut), errOut.String())
	s := out.String()
	assert.Contains(t, s, "cluster: 3 backends, each a child process of the target, busy 1ms a request, the last 3ms; C their capacities measured together;")
	var row string
	for _, l := range strings.Split(s, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "sluice" && f[1] == "none" {
			row = strings.Join(f, " ")
		}
	}
	assert.Equal(t, "sluice none 1000 1500 950 0.950 1.000 36.7 0.0 20.0 80.0 39/39/21 1/0", row)
}

// TestReportReadsAnOldSoakReport does the same for the soak, whose
// figures were under "soak"; the report command shows its checks again
// without failing on them.
func TestReportReadsAnOldSoakReport(t *testing.T) {
	const old = `{"report": {"command": "go run ./cmd/sluice soak", "deadline": 1000000000, "repeats": 1,
  "samples": [{"scenario": "soak", "shape": "io", "handler": {"cpu": 1000000, "db": 10000000, "blocking": false},
    "target": "sluice", "repeat": 0, "capacity": 100, "multiple": 5, "requests": 500,
    "rates": {"offered": 500, "goodput": 50, "rejected": 450, "failed": 0}, "latency_ms": {"p50": 20, "p99": 80}, "behind": false,
    "series": [{"Start": 0, "OK": 50}],
    "soak": {"duration": 1000000000, "bucket": 1000000000, "settle": 1000000000, "panic_every": 100,
      "chaos_mix": {"slowloris": 2}, "resources": [], "drained": {}, "stop": {"took": 1000000},
      "rules": {"min_goodput": 0.7},
      "checks": [{"name": "goodput", "pass": false, "enforced": true, "detail": "every 1s at least 0.70 of C (100/s): min 0.50"}]}}]},
  "summary": [], "steps": []}`
	path := filepath.Join(t.TempDir(), "report.json")
	require.NoError(t, os.WriteFile(path, []byte(old), 0o644))
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"report", path}, &out, &errOut), errOut.String())
	s := out.String()
	assert.Contains(t, s, "soak, shape io (cpu 1ms, db 10ms): 5x of C for 1s, goodput per 1s bucket")
	assert.Contains(t, s, "with 2 chaos clients (2 slowloris), and a handler that panics on every 100th request (1%)")
	assert.Contains(t, s, "  FAIL goodput: every 1s at least 0.70 of C (100/s): min 0.50")
}

func TestSummaryClosesTheOutput(t *testing.T) {
	var buf bytes.Buffer
	writeSummary(&buf, savedReport(), scenario.All())
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	require.Len(t, lines, 4, buf.String())
	assert.Empty(t, lines[0], "a blank line before")
	assert.Equal(t, "  At 2x: sluice completed 990 requests a second in time (0.99 of its capacity), with 50% refused; "+
		"net/http completed 950 in time (0.95 of its capacity), with 52% failed.", lines[3])

	buf.Reset()
	writeSummary(&buf, &bench.Report{}, scenario.All())
	assert.Empty(t, buf.String(), "nothing to say, no blank line")
}

func TestClientAndShapesFlags(t *testing.T) {
	parse := func(args ...string) (*suiteFlags, error) {
		return parseSuiteFlags(t, "bench", "shapes", args...)
	}
	f, err := parse()
	require.NoError(t, err)
	assert.Nil(t, f.cfg.ClientModes, "no mode named: the default client, samples as before")
	sh := f.cfg.Scenarios[0].(*scenario.Shapes)
	require.NoError(t, sh.Check(&f.cfg))
	assert.Equal(t, scenario.DefaultShapes(), sh.Shapes, "all shapes")

	f, err = parse("-client", "keep, reconnect", "-shapes", "io,cpu", "-conns", "5000")
	require.NoError(t, err)
	assert.Equal(t, 5000, f.cfg.Conns)
	assert.Equal(t, []load.ClientMode{load.ClientKeep, load.ClientReconnect}, f.cfg.ClientModes)
	sh = f.cfg.Scenarios[0].(*scenario.Shapes)
	require.NoError(t, sh.Check(&f.cfg))
	assert.Equal(t, []bench.Shape{bench.ShapeIO, bench.ShapeCPU}, sh.Shapes)
}

// Every command's -h says how it is called and what it does before its
// flags, and the top-level usage lists every command.
func TestEveryCommandSaysWhatItDoes(t *testing.T) {
	var top bytes.Buffer
	usage(&top)
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			assert.Regexp(t, `\n  `+c.name+`[ \n]`, top.String(), "the command list")
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), []string{c.name, "-h"}, &stdout, &stderr)
			require.ErrorIs(t, err, flag.ErrHelp)
			out := stderr.String()
			assert.True(t, strings.HasPrefix(out, "usage: sluice "+c.name), "-h begins with the synopsis: %q", out[:min(len(out), 80)])
			flags := strings.Index(out, "\n  -")
			require.Positive(t, flags, "-h lists the flags")
			assert.Greater(t, len(strings.Fields(out[:flags])), 8, "-h says what the command does before its flags")
		})
	}
}

// scenarioNames returns the names of ss.
func scenarioNames(ss []bench.Scenario) []string {
	var names []string
	for _, s := range ss {
		names = append(names, s.Name())
	}
	return names
}
