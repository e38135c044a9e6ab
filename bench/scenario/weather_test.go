//go:build linux

package scenario

import (
	"context"
	"encoding/json"
	"fmt"
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
		Scenarios:      []bench.Scenario{&Sweep{}},
		Shape:          suiteShape,
		Multiples:      []float64{0.2},
		Duration:       300 * time.Millisecond,
		Repeats:        1,
		Constant:       true,
		Calibrate:      load.CalibrateConfig{Warmup: 100 * time.Millisecond, Duration: 300 * time.Millisecond, Conns: 16},
		CalibrateConns: []int{8, 16},
	}
}

func TestSuiteScenarios(t *testing.T) {
	cfg := tinySuite()
	cfg.Scenarios = []bench.Scenario{&Sweep{}, &Slowdown{}, &Mix{}, &Step{}}
	cfg.ShapeMultiples = []float64{0.2}
	cfg.SlowdownFactor = 3
	cfg.SlowdownMultiple = 0.15
	cfg.Step = bench.StepConfig{Low: 0.1, High: 0.2, Before: 200 * time.Millisecond, During: 200 * time.Millisecond, After: 200 * time.Millisecond, Bucket: 100 * time.Millisecond}
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
	s := bench.SuiteConfig{Shape: bench.ShapeIO, Multiples: []float64{2, 5}, ShapeMultiples: []float64{5}, Shapes: []bench.Shape{bench.ShapeIO}, ClientModes: load.ClientModes}
	var got []string
	for _, sc := range []bench.Scenario{&Sweep{}, &Shapes{}} {
		for _, p := range sc.Points(&s) {
			got = append(got, fmt.Sprintf("%s %gx %s", sc.Name(), p.Multiple, p.Client))
		}
	}
	assert.Equal(t, []string{"sweep 2x reconnect", "sweep 2x keep", "sweep 5x reconnect", "sweep 5x keep", "shapes 5x reconnect", "shapes 5x keep"}, got)

	s.ClientModes = nil
	assert.Empty(t, (&Sweep{}).Points(&s)[0].Client, "no mode named: samples as before")
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
