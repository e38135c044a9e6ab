//go:build linux

package bench

import (
	"context"
	"encoding/json"
	"math"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// suiteShape is a light handler: a suite of it on a small machine stays
// short and never overloads anything at the multiples used here.
var suiteShape = Shape{Name: "light", Spec: HandlerSpec{CPU: 100 * time.Microsecond, DB: time.Millisecond}}

// tinySuite is a suite small enough for a test: short windows, one repeat,
// loads well below capacity.
func tinySuite() SuiteConfig {
	return SuiteConfig{
		Targets:        []string{"nethttp", "sluice"},
		Scenarios:      []string{ScenarioSweep},
		Shape:          suiteShape,
		Multiples:      []float64{0.2},
		Duration:       300 * time.Millisecond,
		Repeats:        1,
		Constant:       true,
		Calibrate:      CalibrateConfig{Warmup: 100 * time.Millisecond, Duration: 300 * time.Millisecond, Conns: 16},
		CalibrateConns: []int{8, 16},
	}
}

// progressLog records the calls to SuiteConfig.Progress.
type progressLog struct {
	calls []progressCall
}

type progressCall struct {
	done, total time.Duration
	now         string
}

func (p *progressLog) record(done, total time.Duration, now string) {
	p.calls = append(p.calls, progressCall{done, total, now})
}

// check asserts that the progress went forward, within its total, to its
// end.
func (p *progressLog) check(t *testing.T) {
	t.Helper()
	require.NotEmpty(t, p.calls)
	total := p.calls[0].total
	assert.Positive(t, total)
	var last time.Duration
	for i, c := range p.calls {
		assert.Equal(t, total, c.total, "call %d: the total does not change", i)
		assert.LessOrEqual(t, c.done, c.total, "call %d", i)
		assert.GreaterOrEqual(t, c.done, last, "call %d: progress goes forward", i)
		assert.NotEmpty(t, c.now, "call %d", i)
		last = c.done
	}
	assert.Equal(t, total, last, "done reaches the total at the end")
}

func TestSuiteScenarios(t *testing.T) {
	cfg := tinySuite()
	cfg.Scenarios = []string{ScenarioSweep, ScenarioSlowdown, ScenarioMix, ScenarioStep}
	cfg.ShapeMultiples = []float64{0.2}
	cfg.SlowdownFactor = 3
	cfg.SlowdownMultiple = 0.15
	cfg.Step = StepConfig{Low: 0.1, High: 0.2, Before: 200 * time.Millisecond, During: 200 * time.Millisecond, After: 200 * time.Millisecond, Bucket: 100 * time.Millisecond}
	cfg.Command = "bench -test"
	var progress progressLog
	cfg.Progress = progress.record

	start := time.Now()
	rep, err := RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	t.Logf("suite ran in %v", time.Since(start))
	progress.check(t)

	assert.Equal(t, "bench -test", rep.Command)
	assert.Equal(t, 1, rep.Repeats)
	assert.Equal(t, DefaultDeadline, rep.Deadline)
	assert.NotEmpty(t, rep.Machine)
	assert.False(t, rep.Started.IsZero())

	// Per target, in the order of the config, the scenarios in theirs.
	type key struct{ target, scenario string }
	want := []key{}
	for _, tgt := range cfg.Targets {
		for _, sc := range cfg.Scenarios {
			want = append(want, key{tgt, sc})
		}
	}
	got := []key{}
	for _, s := range rep.Samples {
		got = append(got, key{s.Target, s.Scenario})
	}
	require.Equal(t, want, got)

	capacity := map[string]float64{}
	for _, s := range rep.Samples {
		what := s.Target + " " + s.Scenario
		t.Logf("%s: C %.0f/s, offered %.0f/s, goodput %.0f/s, p50 %.2f ms, target CPU %.2f, generator CPU %.2f, behind %v",
			what, s.Capacity, s.Rates.Offered, s.Rates.Goodput, s.Latency.P50, s.TargetCPU, s.GeneratorCPU, s.Behind)
		assert.Equal(t, "light", s.Shape, what)
		assert.Equal(t, 0, s.Repeat, what)
		assert.Positive(t, s.Capacity, what)
		if c, ok := capacity[s.Target]; ok {
			assert.Equal(t, c, s.Capacity, "%s: one calibration per target and shape", what)
		}
		capacity[s.Target] = s.Capacity
		assert.GreaterOrEqual(t, s.CapacityCPU, 0.0, what)
		assert.Positive(t, s.Requests, what)
		assert.Positive(t, s.Rates.Goodput, what)
		assert.Positive(t, s.Latency.P50, what)
		assert.GreaterOrEqual(t, s.TargetCPU, 0.0, what)
		assert.GreaterOrEqual(t, s.GeneratorCPU, 0.0, what)
		if s.Target == "sluice" {
			require.NotNil(t, s.Server, what)
			assert.True(t, json.Valid(s.Server), what)
		} else {
			assert.Nil(t, s.Server, what)
		}
		if s.Behind {
			t.Logf("%s: generator behind (max lag %v)", what, s.MaxLag)
		}

		switch s.Scenario {
		case ScenarioSweep:
			assert.Equal(t, 0.2, s.Multiple, what)
			assert.Equal(t, suiteShape.Spec, s.Handler, what)
			assert.InEpsilon(t, 0.2*s.Capacity, s.Rates.Offered, 0.5, what)
			assert.Nil(t, s.Step, what)
			assert.Empty(t, s.Series, what)
			assert.Empty(t, s.Classes, what)
		case ScenarioSlowdown:
			assert.Equal(t, 0.15, s.Multiple, what)
			spec := suiteShape.Spec
			spec.DB *= 3
			assert.Equal(t, spec, s.Handler, what)
			assert.InEpsilon(t, 0.15*s.Capacity, s.Rates.Offered, 0.5, what)
		case ScenarioMix:
			assert.Equal(t, 0.2, s.Multiple, what)
			assert.Equal(t, suiteShape.Spec, s.Handler, what)
			require.Len(t, s.Classes, 2, what)
			kept, fresh := s.Classes["kept"], s.Classes["new"]
			assert.Positive(t, kept.Rates.Goodput, what)
			assert.Positive(t, fresh.Rates.Goodput, what)
			// Every other request on a new connection: the two
			// classes differ by one request at most.
			assert.InDelta(t, kept.Rates.Offered, fresh.Rates.Offered, 1/cfg.Duration.Seconds()+1e-9, "%s: half the requests on new connections", what)
			assert.InDelta(t, s.Rates.Offered, kept.Rates.Offered+fresh.Rates.Offered, 1e-6, what)
		case ScenarioStep:
			assert.Equal(t, 0.2, s.Multiple, what)
			assert.Equal(t, suiteShape.Spec, s.Handler, what)
			require.NotNil(t, s.Step, what)
			assert.Equal(t, StepInfo{Low: 0.1, High: 0.2, Up: 200 * time.Millisecond, Down: 400 * time.Millisecond, End: 600 * time.Millisecond}, *s.Step, what)
			require.Len(t, s.Series, 6, what)
			var offered int64
			for i, b := range s.Series {
				assert.Equal(t, time.Duration(i)*100*time.Millisecond, b.Start, what)
				offered += b.Offered
			}
			assert.Equal(t, s.Requests, offered, "%s: the buckets count every request", what)
			assert.Empty(t, s.Classes, what)
		}
	}
}

func TestSuiteRotatesTargets(t *testing.T) {
	cfg := tinySuite()
	cfg.Repeats = 2
	var progress progressLog
	cfg.Progress = progress.record
	rep, err := RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	progress.check(t)
	assert.Equal(t, 2, rep.Repeats)

	type key struct {
		repeat int
		target string
	}
	var got []key
	for _, s := range rep.Samples {
		got = append(got, key{s.Repeat, s.Target})
		assert.Equal(t, ScenarioSweep, s.Scenario)
		assert.Positive(t, s.Capacity)
		assert.Positive(t, s.Rates.Goodput)
	}
	assert.Equal(t, []key{{0, "nethttp"}, {0, "sluice"}, {1, "sluice"}, {1, "nethttp"}}, got, "the order rotates every repeat")
	// Each repeat calibrates again.
	var calibrations []string
	for _, c := range progress.calls {
		if strings.HasSuffix(c.now, "calibrating") && !slices.Contains(calibrations, c.now) {
			calibrations = append(calibrations, c.now)
		}
	}
	assert.Len(t, calibrations, 4, "%q", calibrations)
}

func TestSuiteSplitsCPUs(t *testing.T) {
	a, b := twoCPUs(t)
	before := threadMasks(t, "self")
	cfg := tinySuite()
	cfg.Targets = []string{"sluice"}
	cfg.TargetCPUs, cfg.GeneratorCPUs = []int{b, b}, []int{a}
	var during map[string]int
	cfg.Progress = func(time.Duration, time.Duration, string) {
		if during == nil {
			during = threadMasks(t, "self")
		}
	}
	rep, err := RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	assert.Equal(t, []int{b}, rep.TargetCPUs, "sorted, without duplicates")
	assert.Equal(t, []int{a}, rep.GeneratorCPUs)
	require.Len(t, rep.Samples, 1)
	assert.Positive(t, rep.Samples[0].Rates.Goodput)
	assert.Equal(t, map[string]int{FormatCPUList([]int{a}): during[FormatCPUList([]int{a})]}, during, "the generator ran on CPU %d only", a)
	assert.Equal(t, before, mapKeysOnly(threadMasks(t, "self"), before), "unpinned at the end")
}

func TestSuiteRefusesBadConfig(t *testing.T) {
	var launched atomic.Int64
	launch := func() (*exec.Cmd, error) {
		launched.Add(1)
		return selfLauncher()
	}
	for name, change := range map[string]func(*SuiteConfig){
		"unknown target":          func(c *SuiteConfig) { c.Targets = []string{"nethttp", "apache"} },
		"unknown scenario":        func(c *SuiteConfig) { c.Scenarios = []string{ScenarioSweep, "chaos"} },
		"soak of half a bucket":   func(c *SuiteConfig) { c.Scenarios = []string{ScenarioSoak}; c.Soak.Duration = 1500 * time.Millisecond },
		"zero multiple":           func(c *SuiteConfig) { c.Multiples = []float64{0.2, 0} },
		"negative multiple":       func(c *SuiteConfig) { c.Multiples = []float64{-1} },
		"NaN multiple":            func(c *SuiteConfig) { c.Multiples = []float64{math.NaN()} },
		"infinite multiple":       func(c *SuiteConfig) { c.Multiples = []float64{math.Inf(1)} },
		"negative shape multiple": func(c *SuiteConfig) { c.ShapeMultiples = []float64{2, -0.5} },
		"zero calibration conns":  func(c *SuiteConfig) { c.CalibrateConns = []int{16, 0} },
		"target CPUs alone":       func(c *SuiteConfig) { c.TargetCPUs = []int{0} },
		"generator CPUs alone":    func(c *SuiteConfig) { c.GeneratorCPUs = []int{0} },
		"overlapping CPU sets":    func(c *SuiteConfig) { c.TargetCPUs, c.GeneratorCPUs = []int{0}, []int{0} },
		"CPU out of range":        func(c *SuiteConfig) { c.TargetCPUs, c.GeneratorCPUs = []int{maxCPU}, []int{0} },
		"TLS in the lanes":        func(c *SuiteConfig) { c.TLS, c.Scenarios = true, []string{ScenarioLanes} },
		"new conns in the mix":    func(c *SuiteConfig) { c.NewConns, c.Scenarios = true, []string{ScenarioMix} },
		"negative clients":        func(c *SuiteConfig) { c.Clients = -1 },
		"clients and new conns":   func(c *SuiteConfig) { c.Clients, c.NewConns = 8, true },
		"clients in the mix":      func(c *SuiteConfig) { c.Clients, c.Scenarios = 8, []string{ScenarioMix} },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := tinySuite()
			cfg.Launch = launch
			called := false
			cfg.Progress = func(time.Duration, time.Duration, string) { called = true }
			change(&cfg)
			rep, err := RunSuite(context.Background(), cfg)
			assert.Error(t, err)
			assert.Nil(t, rep)
			assert.False(t, called, "no progress before the config is checked")
		})
	}
	assert.Zero(t, launched.Load(), "no target started")
}

func TestSuiteContextCancel(t *testing.T) {
	// Cancelled before it starts: nothing runs.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	rep, err := RunSuite(ctx, tinySuite())
	assert.ErrorIs(t, err, context.Canceled)
	require.NotNil(t, rep)
	assert.Empty(t, rep.Samples)
	assert.Less(t, time.Since(start), 10*time.Second)

	// Cancelled once the first sample is in: the suite stops with it.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	cfg := tinySuite()
	cfg.Multiples = []float64{0.2, 0.3}
	measured := 0
	cfg.Progress = func(done, _ time.Duration, now string) {
		if strings.Contains(now, "sweep") && done > 0 {
			measured++
			if measured == 2 { // the progress before and after the first point
				cancel()
			}
		}
	}
	rep, err = RunSuite(ctx, cfg)
	assert.ErrorIs(t, err, context.Canceled)
	require.NotNil(t, rep)
	require.NotEmpty(t, rep.Samples, "the samples so far")
	assert.Less(t, len(rep.Samples), 4, "stopped early")
	assert.Equal(t, "nethttp", rep.Samples[0].Target)
	assert.Equal(t, 0.2, rep.Samples[0].Multiple)
}
