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
)

func TestMain(m *testing.M) {
	bench.ServeChild() // the demo's targets run as children of this binary
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

func TestCPUSplitFlags(t *testing.T) {
	parse := func(args ...string) (*suiteFlags, error) {
		f := newSuiteFlags(time.Second, 1, "sluice", bench.ScenarioSweep, "2")
		fs := flag.NewFlagSet("demo", flag.ContinueOnError)
		f.register(fs)
		require.NoError(t, fs.Parse(args))
		return f, f.finish("demo", args)
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

func TestProgressBarMovesAndStops(t *testing.T) {
	var cfg bench.SuiteConfig
	var buf bytes.Buffer
	stop := startProgress(&cfg, "on", &buf)
	require.NotNil(t, cfg.Progress, "mode on sets the suite's progress hook")
	cfg.Progress(0, 10*time.Second, "calibrating")
	cfg.Progress(5*time.Second, 10*time.Second, "sweep 2x")
	cfg.Progress(4*time.Second, 10*time.Second, "never backwards")
	stop()
	out := buf.String()
	assert.Contains(t, out, "calibrating", "the first report draws the bar") // later ones are throttled
	assert.Contains(t, out, "100%", "Finish fills the bar")

	var off bench.SuiteConfig
	startProgress(&off, "off", &buf)()
	assert.Nil(t, off.Progress)
	var auto bench.SuiteConfig
	startProgress(&auto, "auto", &buf)() // a buffer is not a terminal
	assert.Nil(t, auto.Progress)
}
