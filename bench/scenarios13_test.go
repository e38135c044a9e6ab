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
)

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

func TestStrayConfig(t *testing.T) {
	var s StrayConfig
	require.NoError(t, s.defaults())
	assert.Equal(t, StrayConfig{Delay: time.Second, Rate: 2, TrivialRate: 500, TrivialConns: 32, Multiple: 2, Shape: ShapeCPU}, s)
	assert.Error(t, (&StrayConfig{Rate: -2}).defaults())
	assert.Error(t, (&StrayConfig{Multiple: -1}).defaults())

	cfg := tinySuite()
	cfg.Scenarios = []Scenario{builtIn(ScenarioStray)}
	require.NoError(t, cfg.defaults())
}

func TestPointDescribe(t *testing.T) {
	assert.Equal(t, "sweep 2x", Point{Multiple: 2}.describe(ScenarioSweep))
	assert.Equal(t, "noisy 800/s", Point{Rate: 800}.describe("noisy"))
	assert.Equal(t, "stray trivial", Point{Part: StrayTrivial}.describe(ScenarioStray))
	assert.True(t, strings.HasPrefix(Point{Part: StrayCPUWith, Multiple: 2}.describe(ScenarioStray), "stray cpu+stray 2x"))
}
