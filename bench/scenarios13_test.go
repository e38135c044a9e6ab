//go:build linux

package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	srt "github.com/sluice-go/sluice/runtime"
)

func TestSuiteNoisy(t *testing.T) {
	_, last := twoCPUs(t)
	allowed, err := srt.AffinityCPUs()
	require.NoError(t, err)
	cfg := tinySuite()
	cfg.Targets = []string{"nethttp", "sluice", "sluice-pinned"}
	cfg.Scenarios = []Scenario{builtIn(ScenarioNoisy)}
	cfg.Noisy.Rates = []float64{50, 80}
	var progress progressLog
	cfg.Progress = progress.record
	rep, err := RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	progress.check(t)
	for _, c := range progress.calls {
		assert.NotContains(t, c.now, "calibrating", "fixed rates need no capacity")
	}
	type key struct {
		target string
		rate   float64
	}
	var got []key
	for _, s := range rep.Samples {
		what := s.Target + " " + s.Scenario
		got = append(got, key{s.Target, s.Noisy.Rate})
		assert.Equal(t, ScenarioNoisy, s.Scenario)
		assert.Equal(t, "light", s.Shape, what)
		assert.Zero(t, s.Capacity, what)
		assert.Zero(t, s.Multiple, what)
		assert.InEpsilon(t, s.Noisy.Rate, s.Rates.Offered, 0.5, what)
		assert.Positive(t, s.Rates.Goodput, what)
		require.NotNil(t, s.Noisy, what)
		assert.Equal(t, allowed, s.Noisy.CPUs, "%s: the target on every CPU", what)
		assert.Equal(t, last, s.Noisy.NeighbourCPU, what)
		assert.Equal(t, TargetNice, s.Noisy.NeighbourNice, what)
		// What the neighbour and the target's threads got is a timing
		// (TestNeighbourSpinsOnItsCPU and TestRunQueueFromSchedstat check
		// the readings): logged, not asserted.
		t.Logf("%s at %v/s: neighbour %.2f CPU, run queue %+v", what, s.Noisy.Rate, s.Noisy.NeighbourUse, s.Noisy.RunQueue)
		assert.GreaterOrEqual(t, s.Noisy.NeighbourUse, 0.0, what)
		switch s.Target {
		case "nethttp":
			assert.Nil(t, s.Placement, what)
		case "sluice":
			require.NotNil(t, s.Placement, what)
			assert.Equal(t, len(allowed), s.Placement.Workers, what)
			info, err := srt.DetectCPUs()
			require.NoError(t, err)
			assert.Equal(t, info.Exclusive, s.Placement.Exclusive, what)
			assert.Equal(t, info.Exclusive, s.Placement.Pinned(), "%s: pinned by default only on an exclusive cpuset", what)
		case "sluice-pinned":
			require.NotNil(t, s.Placement, what)
			assert.Equal(t, allowed, s.Placement.CPUs, "%s: forced", what)
		}
	}
	assert.Equal(t, []key{
		{"nethttp", 50}, {"nethttp", 80}, {"sluice", 50}, {"sluice", 80}, {"sluice-pinned", 50}, {"sluice-pinned", 80},
	}, got)
}

func TestSuiteNoisyWithASplit(t *testing.T) {
	a, b := twoCPUs(t)
	cfg := tinySuite()
	cfg.Targets = []string{"sluice"}
	cfg.Scenarios = []Scenario{builtIn(ScenarioNoisy)}
	cfg.Noisy.Rates = []float64{50}
	cfg.TargetCPUs, cfg.GeneratorCPUs = []int{b}, []int{a}
	rep, err := RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	require.Len(t, rep.Samples, 1)
	s := rep.Samples[0]
	assert.Equal(t, []int{a, b}, s.Noisy.CPUs, "both sets of the split")
	assert.Equal(t, b, s.Noisy.NeighbourCPU)
	require.NotNil(t, s.Placement)
	assert.Equal(t, 2, s.Placement.Workers)
}

func TestSuiteStray(t *testing.T) {
	cfg := tinySuite()
	cfg.Targets = []string{"nethttp", "sluice"}
	cfg.Scenarios = []Scenario{builtIn(ScenarioStray)}
	cfg.Duration = 400 * time.Millisecond
	cfg.Stray = StrayConfig{
		Delay: 100 * time.Millisecond, Rate: 5, TrivialRate: 100, TrivialConns: 4, Multiple: 0.2,
		Shape: Shape{Name: "spin", Spec: HandlerSpec{CPU: 100 * time.Microsecond}},
	}
	var progress progressLog
	cfg.Progress = progress.record
	rep, err := RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	progress.check(t)

	type key struct{ target, part string }
	var got []key
	capacity := map[string]float64{}
	for _, s := range rep.Samples {
		what := s.Target + " " + s.Stray.Part
		got = append(got, key{s.Target, s.Stray.Part})
		assert.Equal(t, ScenarioStray, s.Scenario, what)
		assert.Equal(t, "spin", s.Shape, what)
		assert.Equal(t, 100*time.Millisecond, s.Stray.Delay, what)
		assert.Positive(t, s.Rates.Goodput, what)
		switch s.Stray.Part {
		case StrayTrivial:
			assert.Zero(t, s.Capacity, what)
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
		if s.Stray.Part == StrayCPU {
			assert.Zero(t, s.Stray.Rate, what)
			assert.Zero(t, s.Stray.Calls, what)
		} else {
			assert.Equal(t, 5.0, s.Stray.Rate, what)
			assert.InDelta(t, 5, s.Stray.Calls.Offered, 2.5, "%s: 2 calls in 0.4 s", what)
			assert.Positive(t, s.Stray.Calls.Goodput, "%s: the stray calls are answered", what)
			assert.GreaterOrEqual(t, s.Stray.CallLatency.P50, 100.0, "%s: each waits for the slow service", what)
		}
	}
	assert.Equal(t, []key{
		{"nethttp", StrayTrivial}, {"nethttp", StrayCPU}, {"nethttp", StrayCPUWith},
		{"sluice", StrayTrivial}, {"sluice", StrayCPU}, {"sluice", StrayCPUWith},
	}, got)
}

func TestStrayHandler(t *testing.T) {
	slow := httptest.NewServer(slowService(50 * time.Millisecond))
	defer slow.Close()
	srv := httptest.NewServer(childHandler(ChildSpec{Handler: HandlerSpec{CPU: 10 * time.Microsecond}, StrayURL: slow.URL + "/slow"}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	get := func(path string) (int, string, time.Duration) {
		start := time.Now()
		resp, err := client.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b), time.Since(start)
	}
	code, body, took := get(StrayPath)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "done\n", body)
	assert.GreaterOrEqual(t, took, 50*time.Millisecond, "it waits for the slow service")
	code, body, _ = get(TrivialPath)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body)
	code, body, _ = get(WeatherPath)
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"city":"Lisbon"`)

	// The slow service gone: the stray call fails with 502.
	slow.Close()
	code, _, _ = get(StrayPath)
	assert.Equal(t, http.StatusBadGateway, code)
}

func TestNoisyAndStrayConfigs(t *testing.T) {
	var n NoisyConfig
	require.NoError(t, n.defaults())
	assert.Equal(t, DefaultNoisyRates, n.Rates)
	n.Rates[0] = 1 // a copy: the defaults stay
	assert.Equal(t, []float64{800, 1200}, DefaultNoisyRates)
	assert.Error(t, (&NoisyConfig{Rates: []float64{100, -1}}).defaults())

	var s StrayConfig
	require.NoError(t, s.defaults())
	assert.Equal(t, StrayConfig{Delay: time.Second, Rate: 2, TrivialRate: 500, TrivialConns: 32, Multiple: 2, Shape: ShapeCPU}, s)
	assert.Error(t, (&StrayConfig{Rate: -2}).defaults())
	assert.Error(t, (&StrayConfig{Multiple: -1}).defaults())

	for _, sc := range []Scenario{builtIn(ScenarioNoisy), builtIn(ScenarioStray)} {
		cfg := tinySuite()
		cfg.Scenarios = []Scenario{sc}
		require.NoError(t, cfg.defaults(), sc.Name())
	}
	cfg := tinySuite()
	cfg.Scenarios = []Scenario{builtIn(ScenarioNoisy)}
	cfg.Noisy.Rates = []float64{0, 5}
	assert.ErrorContains(t, cfg.defaults(), "noisy rate")
}

func TestPointDescribe(t *testing.T) {
	assert.Equal(t, "sweep 2x", Point{Multiple: 2}.describe(ScenarioSweep))
	assert.Equal(t, "noisy 800/s", Point{Rate: 800}.describe(ScenarioNoisy))
	assert.Equal(t, "stray trivial", Point{Part: StrayTrivial}.describe(ScenarioStray))
	assert.True(t, strings.HasPrefix(Point{Part: StrayCPUWith, Multiple: 2}.describe(ScenarioStray), "stray cpu+stray 2x"))
}

func TestSuiteNoisyQuiet(t *testing.T) {
	twoCPUs(t)
	cfg := tinySuite()
	cfg.Targets = []string{"sluice"}
	cfg.Scenarios = []Scenario{builtIn(ScenarioNoisy)}
	cfg.Noisy = NoisyConfig{Rates: []float64{50}, Quiet: true}
	rep, err := RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	require.Len(t, rep.Samples, 1)
	s := rep.Samples[0]
	assert.Equal(t, -1, s.Noisy.NeighbourCPU, "no neighbour")
	assert.Zero(t, s.Noisy.NeighbourUse)
	assert.Positive(t, s.Rates.Goodput)
}
