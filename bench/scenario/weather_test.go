//go:build linux

package scenario

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
)

func TestMain(m *testing.M) {
	bench.ServeChild(ChildHooks()...) // the targets' child processes
	goleak.VerifyTestMain(m)
}

// suiteShape is a light handler: a suite of it on a small machine stays
// short and never overloads anything at the multiples used here.
var suiteShape = bench.Shape{Name: "light", Spec: bench.HandlerSpec{CPU: 100 * time.Microsecond, DB: time.Millisecond}}

// tinySuite is a suite small enough for a test: short windows, one repeat,
// loads well below capacity.
func tinySuite() bench.SuiteConfig {
	return bench.SuiteConfig{
		Targets:        []string{"nethttp", "sluice"},
		Scenarios:      []bench.Scenario{&Sweep{Multiples: []float64{0.2}}},
		Shape:          suiteShape,
		Duration:       300 * time.Millisecond,
		Repeats:        1,
		Constant:       true,
		Calibrate:      load.CalibrateConfig{Warmup: 100 * time.Millisecond, Duration: 300 * time.Millisecond, Conns: 16},
		CalibrateConns: []int{8, 16},
	}
}

func TestSuiteScenarios(t *testing.T) {
	cfg := tinySuite()
	cfg.Scenarios = []bench.Scenario{
		&Sweep{Multiples: []float64{0.2}},
		&Slowdown{Factor: 3, Multiple: 0.15},
		&Mix{Multiples: []float64{0.2}},
		&Step{Low: 0.1, High: 0.2, Before: 200 * time.Millisecond, During: 200 * time.Millisecond, After: 200 * time.Millisecond, Bucket: 100 * time.Millisecond},
	}
	cfg.Command = "bench -test"

	start := time.Now()
	rep, err := bench.RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	t.Logf("suite ran in %v", time.Since(start))

	assert.Equal(t, "bench -test", rep.Command)
	assert.Equal(t, 1, rep.Repeats)
	assert.Equal(t, load.DefaultDeadline, rep.Deadline)
	assert.NotEmpty(t, rep.Machine)
	assert.False(t, rep.Started.IsZero())

	// Per target, in the order of the config, the scenarios in theirs.
	type key struct{ target, scenario string }
	want := []key{}
	for _, tgt := range cfg.Targets {
		for _, sc := range cfg.Scenarios {
			want = append(want, key{tgt, sc.Name()})
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
		case "sweep":
			assert.Equal(t, 0.2, s.Multiple, what)
			assert.Equal(t, suiteShape.Spec, s.Handler, what)
			assert.InEpsilon(t, 0.2*s.Capacity, s.Rates.Offered, 0.5, what)
			assert.Nil(t, s.Step, what)
			assert.Empty(t, s.Series, what)
			assert.Empty(t, s.Classes, what)
		case "slowdown":
			assert.Equal(t, 0.15, s.Multiple, what)
			spec := suiteShape.Spec
			spec.DB *= 3
			assert.Equal(t, spec, s.Handler, what)
			assert.InEpsilon(t, 0.15*s.Capacity, s.Rates.Offered, 0.5, what)
		case "mix":
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
		case "step":
			assert.Equal(t, 0.2, s.Multiple, what)
			assert.Equal(t, suiteShape.Spec, s.Handler, what)
			require.NotNil(t, s.Step, what)
			assert.Equal(t, bench.StepInfo{Low: 0.1, High: 0.2, Up: 200 * time.Millisecond, Down: 400 * time.Millisecond, End: 600 * time.Millisecond}, *s.Step, what)
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

func TestClientModesAlternate(t *testing.T) {
	s := bench.SuiteConfig{Shape: bench.ShapeIO, ClientModes: load.ClientModes()}
	sw := &Sweep{Multiples: []float64{2, 5}}
	var got []string
	for _, sc := range []bench.Scenario{sw, &Shapes{Shapes: []bench.Shape{bench.ShapeIO}, Multiples: []float64{5}}} {
		for _, p := range sc.Points(&s) {
			got = append(got, fmt.Sprintf("%s %gx %s", sc.Name(), p.Multiple, p.Client))
		}
	}
	assert.Equal(t, []string{"sweep 2x reconnect", "sweep 2x keep", "sweep 5x reconnect", "sweep 5x keep", "shapes 5x reconnect", "shapes 5x keep"}, got)

	s.ClientModes = nil
	assert.Empty(t, sw.Points(&s)[0].Client, "no mode named: samples as before")
}

func TestWeatherSettings(t *testing.T) {
	var s bench.SuiteConfig
	s.Shape = bench.ShapeIO

	// Zero values take the defaults.
	sw, sh, sl, mx, st := &Sweep{}, &Shapes{}, &Slowdown{}, &Mix{}, &Step{}
	for _, sc := range []bench.Scenario{sw, sh, sl, mx, st} {
		require.NoError(t, sc.Check(&s), sc.Name())
	}
	assert.Equal(t, DefaultSweepMultiples(), sw.Multiples)
	assert.Equal(t, DefaultShapes(), sh.Shapes)
	assert.Equal(t, DefaultShapeMultiples(), sh.Multiples)
	assert.Equal(t, &Slowdown{Factor: DefaultSlowdownFactor, Multiple: DefaultSlowdownMultiple}, sl)
	assert.Equal(t, DefaultMixMultiples(), mx.Multiples)
	assert.Equal(t, DefaultMixNewFraction, mx.NewFraction)
	d := DefaultStep()
	assert.Equal(t, &d, st)
	assert.Equal(t, []bench.Point{{Shape: bench.ShapeIO, Spec: bench.HandlerSpec{CPU: time.Millisecond, DB: 20 * time.Millisecond}, Multiple: 0.8}}, sl.Points(&s))

	// Flags set them, and show what a value set in code gave.
	sw, sh, sl, mx, st = &Sweep{Multiples: []float64{2, 5}}, &Shapes{}, &Slowdown{}, &Mix{}, &Step{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	for _, f := range []Flagger{sw, sh, sl, mx, st} {
		f.Flags(fs)
	}
	assert.Equal(t, "2,5", fs.Lookup("x").DefValue)
	require.NoError(t, fs.Parse([]string{"-x", "1,3", "-shapes", "cpu,blocking", "-shape-x", "4", "-slowdown-factor", "3",
		"-slowdown-x", "0.5", "-mix-x", "6", "-mix-new", "0.25", "-step-low", "0.2", "-step-high", "4", "-step-during", "1s"}))
	for _, sc := range []bench.Scenario{sw, sh, sl, mx, st} {
		require.NoError(t, sc.Check(&s), sc.Name())
	}
	assert.Equal(t, []float64{1, 3}, sw.Multiples)
	assert.Equal(t, []bench.Shape{bench.ShapeCPU, bench.ShapeBlocking}, sh.Shapes)
	assert.Equal(t, []float64{4}, sh.Multiples)
	assert.Equal(t, &Slowdown{Factor: 3, Multiple: 0.5}, sl)
	assert.Equal(t, []float64{6}, mx.Multiples)
	assert.Equal(t, 0.25, mx.NewFraction)
	assert.Equal(t, &Step{Low: 0.2, High: 4, Before: d.Before, During: time.Second, After: d.After, Bucket: d.Bucket}, st)

	// Bad values are refused, naming the setting.
	for name, sc := range map[string]bench.Scenario{
		"sweep, zero multiple":     &Sweep{Multiples: []float64{0.2, 0}},
		"sweep, NaN multiple":      &Sweep{Multiples: []float64{math.NaN()}},
		"sweep, infinite multiple": &Sweep{Multiples: []float64{math.Inf(1)}},
		"sweep, bad flag":          &Sweep{x: "2,lots"},
		"shapes, negative":         &Shapes{Multiples: []float64{2, -0.5}},
		"shapes, unknown shape":    &Shapes{shapes: "cpu,gpu"},
		"shapes, a shape twice":    &Shapes{shapes: "io,io"},
		"slowdown, negative":       &Slowdown{Factor: -2},
		"mix, fraction over 1":     &Mix{NewFraction: 1.5},
		"step, negative high":      &Step{High: -3},
		"step, negative bucket":    &Step{Bucket: -time.Second},
	} {
		assert.Error(t, sc.Check(&s), name)
	}
}

func TestMixRefusesWhatItChoosesItself(t *testing.T) {
	for name, change := range map[string]func(*bench.SuiteConfig){
		"new conns": func(c *bench.SuiteConfig) { c.NewConns = true },
		"clients":   func(c *bench.SuiteConfig) { c.Clients = 8 },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := tinySuite()
			cfg.Scenarios = []bench.Scenario{&Mix{}}
			change(&cfg)
			rep, err := bench.RunSuite(context.Background(), cfg)
			assert.ErrorContains(t, err, "mix")
			assert.Nil(t, rep)
		})
	}
}

func TestSpreadPutsTheFractionEvenly(t *testing.T) {
	isNew := spread(0.25)
	var got []bool
	for i := range 8 {
		got = append(got, isNew(i))
	}
	assert.Equal(t, []bool{false, false, false, true, false, false, false, true}, got)
}
