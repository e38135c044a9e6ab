//go:build linux

package bench

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench/load"
)

// suiteShape is a light handler: a suite of it on a small machine stays
// short and never overloads anything at the multiples used here.
var suiteShape = Shape{Name: "light", Spec: HandlerSpec{CPU: 100 * time.Microsecond, DB: time.Millisecond}}

// tinySuite is a suite small enough for a test: short windows, one repeat,
// loads well below capacity.
func tinySuite() SuiteConfig {
	return SuiteConfig{
		Targets:        []string{"nethttp", "sluice"},
		Scenarios:      []Scenario{&offer{multiples: []float64{0.2}}},
		Shape:          suiteShape,
		Duration:       300 * time.Millisecond,
		Repeats:        1,
		Constant:       true,
		Calibrate:      load.CalibrateConfig{Warmup: 100 * time.Millisecond, Duration: 300 * time.Millisecond, Conns: 16},
		CalibrateConns: []int{8, 16},
	}
}

// offer is a scenario for the tests of the suite itself: it offers each
// of its multiples of the capacity of the suite's Shape, open loop, for the
// suite's Duration (package scenario's sweep, which this package cannot
// import).
type offer struct{ multiples []float64 }

func (*offer) Name() string             { return "offer" }
func (*offer) Check(*SuiteConfig) error { return nil }
func (o *offer) Points(s *SuiteConfig) []Point {
	var ps []Point
	for _, m := range o.multiples {
		ps = append(ps, Point{Shape: s.Shape, Spec: s.Shape.Spec, Multiple: m})
	}
	return ps
}

func (*offer) Run(ctx context.Context, t *Trial) (*Sample, error) {
	proc, err := t.Start(ctx, t.Child())
	if err != nil {
		return nil, err
	}
	rc, err := t.Generator(proc)
	if err != nil {
		return nil, errors.Join(err, proc.Stop())
	}
	rc.Rate, rc.Duration = t.Point.Multiple*t.Capacity, t.Suite.Duration
	return t.Measure(ctx, proc, rc, t.Sample())
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
		assert.Equal(t, "offer", s.Scenario)
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
		"unknown target":         func(c *SuiteConfig) { c.Targets = []string{"nethttp", "apache"} },
		"no scenario":            func(c *SuiteConfig) { c.Scenarios = nil },
		"a scenario twice":       func(c *SuiteConfig) { c.Scenarios = []Scenario{&offer{}, &offer{}} },
		"zero calibration conns": func(c *SuiteConfig) { c.CalibrateConns = []int{16, 0} },
		"target CPUs alone":      func(c *SuiteConfig) { c.TargetCPUs = []int{0} },
		"generator CPUs alone":   func(c *SuiteConfig) { c.GeneratorCPUs = []int{0} },
		"overlapping CPU sets":   func(c *SuiteConfig) { c.TargetCPUs, c.GeneratorCPUs = []int{0}, []int{0} },
		"CPU out of range":       func(c *SuiteConfig) { c.TargetCPUs, c.GeneratorCPUs = []int{maxCPU}, []int{0} },
		"negative clients":       func(c *SuiteConfig) { c.Clients = -1 },
		"clients and new conns":  func(c *SuiteConfig) { c.Clients, c.NewConns = 8, true },
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
	cfg.Scenarios = []Scenario{&offer{multiples: []float64{0.2, 0.3}}}
	measured := 0
	cfg.Progress = func(done, _ time.Duration, now string) {
		if strings.Contains(now, "offer") && done > 0 {
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

// supplier is offer with a target of its own hook's (TargetSupplier).
type supplier struct{ offer }

func (*supplier) Name() string              { return "supplier" }
func (*supplier) SuppliedTargets() []string { return []string{"own"} }

func TestSuiteTakesASuppliedTarget(t *testing.T) {
	cfg := tinySuite()
	cfg.Targets = []string{"nethttp", "own"}
	assert.ErrorContains(t, cfg.defaults(), `unknown target "own"`, "no scenario supplies it")

	cfg.Scenarios = []Scenario{&offer{multiples: []float64{0.2}}, &supplier{offer{multiples: []float64{0.2}}}}
	require.NoError(t, cfg.defaults())
	_, points := cfg.plan()
	for _, p := range points[cfg.Shape.Name] {
		assert.Equal(t, p.sc.Name() == "supplier", p.runsOn("own"), "only the supplier's points run on its target: %s", p.sc.Name())
		assert.True(t, p.runsOn("nethttp"), p.sc.Name())
	}

	cfg.Targets = nil
	require.NoError(t, cfg.defaults())
	assert.Contains(t, cfg.Targets, "own", "all targets: the supplied ones too")
	assert.Contains(t, cfg.Targets, "sluice")
}

// A suite measures the Spinner's rate once and gives it to every child it
// starts, unless the child has its own; a negative rate lets each child
// measure its own.
func TestSuiteGivesItsChildrenOneSpinRate(t *testing.T) {
	cfg := tinySuite()
	require.NoError(t, cfg.defaults())
	require.Positive(t, cfg.SpinRate, "measured when the suite starts")
	cs := cfg.spun(cfg.child("sluice", suiteShape.Spec, nil))
	assert.Equal(t, cfg.SpinRate, cs.SpinRate)
	assert.Equal(t, cfg.SpinRate, cs.Spinner().Rate(), "the child's Spinner is at the suite's rate")
	assert.Equal(t, 7.0, cfg.spun(ChildSpec{SpinRate: 7}).SpinRate, "a child's own rate is kept")

	own := tinySuite()
	own.SpinRate = -1
	require.NoError(t, own.defaults())
	assert.Zero(t, own.spun(ChildSpec{}).SpinRate)
	assert.Positive(t, ChildSpec{}.Spinner().Rate(), "without a rate, the child measures its own")
}
