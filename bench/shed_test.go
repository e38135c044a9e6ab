//go:build linux

package bench

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/examples/weather"
	"github.com/sluice-go/sluice/gate"
)

// The short form of the shed scenario, for CI: both targets through the
// three phases, in a second and a half each. Too short for the CPU
// average to act (it spans 10 s): what it checks is the plumbing (the
// targets, the phases, the series, the counters); the long form's figures
// are in docs/benchmarks.md and the lag itself is pinned down by
// gate.TestCPULagsAStep on scripted readings.
func TestSuiteShed(t *testing.T) {
	cfg := tinySuite()
	cfg.Targets = []string{TargetSluiceBusy, TargetSluiceCPU}
	cfg.Scenarios = []Scenario{builtIn(ScenarioShed)}
	cfg.Shed = ShedConfig{Low: 0.2, High: 1.5, Before: 300 * time.Millisecond, During: 800 * time.Millisecond, After: 400 * time.Millisecond, Bucket: 100 * time.Millisecond}
	var progress progressLog
	cfg.Progress = progress.record
	rep, err := RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	progress.check(t)
	require.Len(t, rep.Samples, 2)
	for _, c := range progress.calls {
		assert.NotContains(t, c.now, "calibrating", "the reference is calibrated within each point")
	}
	for i, s := range rep.Samples {
		what := s.Target
		assert.Equal(t, cfg.Targets[i], s.Target)
		assert.Equal(t, ScenarioShed, s.Scenario, what)
		assert.Equal(t, "light", s.Shape, what)
		assert.Positive(t, s.Capacity, what)
		assert.Equal(t, 1.5, s.Multiple, what)
		require.NotNil(t, s.Step, what)
		assert.Equal(t, StepInfo{Low: 0.2, High: 1.5, Up: 300 * time.Millisecond, Down: 1100 * time.Millisecond, End: 1500 * time.Millisecond}, *s.Step, what)
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
		require.NotNil(t, s.Shed, what)
		assert.Positive(t, s.Shed.HostCPU, "%s: the machine's CPU, read", what)
		assert.GreaterOrEqual(t, s.Shed.OtherCPU, 0.0, what)
		var st admit.Stats
		require.NoError(t, json.Unmarshal(s.Server, &st), what)
		assert.Positive(t, st.Admitted, what)
		for reason := range st.RejectedBy {
			want := map[string]string{TargetSluiceBusy: "busy", TargetSluiceCPU: "cpu"}[s.Target]
			assert.Equal(t, want, reason, "%s: refused by its one signal only (no age limit, no queue)", what)
		}
		t.Logf("%s: C %.0f/s, %+v, refused %v", what, s.Capacity, s.Rates, st.RejectedBy)
	}
}

// The two targets serve, and the CPU gate's refresher stops with its
// target (goleak checks it at the end of the package's tests).
func TestShedTargets(t *testing.T) {
	for _, name := range []string{TargetSluiceBusy, TargetSluiceCPU} {
		tg, ok := TargetByName(name)
		require.True(t, ok, name)
		rn, err := tg.Serve(weather.Handler(weather.Options{CPU: 10 * time.Microsecond}))
		require.NoError(t, err, name)
		tr := &http.Transport{}
		resp, err := (&http.Client{Transport: tr}).Get(rn.URL + WeatherPath)
		require.NoError(t, err, name)
		_ = resp.Body.Close()
		tr.CloseIdleConnections()
		assert.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, resp.StatusCode, name)
		require.NoError(t, rn.Stop(), name)
	}
	for _, tg := range Targets() {
		assert.NotContains(t, []string{TargetSluiceBusy, TargetSluiceCPU}, tg.Name, "not in the other scenarios' default set")
	}
	cfg, cpu := SluiceCPUConfig()
	defer cpu.Close()
	assert.Equal(t, []admit.Policy{cpu}, cfg.Admission.Policies)
	assert.Negative(t, cfg.Admission.MaxAge, "no age limit")
	assert.Nil(t, cfg.Admission.Queue)
	busy := SluiceBusyConfig()
	require.Len(t, busy.Admission.Gates, 1)
	assert.IsType(t, &gate.Busy{}, busy.Admission.Gates[0])
	assert.Negative(t, busy.Admission.MaxAge)
}

func TestShedConfigDefaults(t *testing.T) {
	var c ShedConfig
	require.NoError(t, c.defaults())
	assert.Equal(t, ShedConfig{Low: 0.3, High: 3, Before: 10 * time.Second, During: 15 * time.Second, After: 10 * time.Second, Bucket: 250 * time.Millisecond}, c)
	assert.Equal(t, 35*time.Second, c.window())
	assert.ErrorContains(t, (&ShedConfig{High: -1}).defaults(), "shed high multiple -1")
	assert.ErrorContains(t, (&ShedConfig{During: -time.Second}).defaults(), "shed during -1s")
	cfg := tinySuite()
	cfg.Scenarios = []Scenario{builtIn(ScenarioShed)}
	cfg.Shed.Low = math.NaN()
	assert.ErrorContains(t, cfg.defaults(), "shed low multiple NaN")
	assert.Equal(t, "shed", Point{}.describe(ScenarioShed))
}
