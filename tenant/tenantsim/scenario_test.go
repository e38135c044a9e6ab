package tenantsim

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuiltinScenariosAreValid(t *testing.T) {
	var names []string
	for _, sc := range Builtin() {
		n, err := sc.Normalize()
		require.NoError(t, err, sc.Name)
		assert.NotEmpty(t, n.Targets, sc.Name)
		assert.NotEmpty(t, n.Description, sc.Name)
		names = append(names, sc.Name)
	}
	assert.Equal(t, []string{"flood", "alice-bob", "weighted", "arrive-leave", "off-then-on", "no-false-drops", "store-outage"}, names)
}

func TestLoadReadsAScenarioWithItsDefaults(t *testing.T) {
	list, err := Load(strings.NewReader(`{
		"name": "mine",
		"servers": 2,
		"duration": "12s",
		"store_delay": 0.005,
		"tenants": [
			{"name": "big", "rate": 2, "cost": 3, "start": "2s", "end": "9s"},
			{"name": "small", "rate": 0.1, "count": 12, "weight": 2}
		],
		"outage": {"from": "4s", "to": "6s"},
		"controller": {"hold": 0.5},
		"targets": [{"kind": "converge", "from": "2s", "max": 3}]
	}`))
	require.NoError(t, err)
	require.Len(t, list, 1)
	sc := list[0]
	assert.Equal(t, 2, sc.Servers)
	assert.Equal(t, DefaultWorkers, sc.Workers)
	assert.Equal(t, Duration(12*time.Second), sc.Duration)
	assert.Equal(t, Duration(5*time.Millisecond), sc.StoreDelay, "a number is seconds")
	assert.Equal(t, Duration(DefaultCost), sc.Cost)
	assert.Equal(t, Duration(50*time.Millisecond), sc.Stagger, "period/20")
	assert.Equal(t, BalanceRandom, sc.Balancer)
	assert.Equal(t, 1.0, sc.Tenants[0].Weight)
	assert.Equal(t, 12, sc.Tenants[1].Count)
	assert.Equal(t, 1.0, sc.Tenants[1].Cost)
	assert.Equal(t, 0.5, sc.Controller.Hold)
	assert.Equal(t, Duration(2*time.Second), sc.Tenants[0].Start)
	names := sc.tenantNames()
	assert.Len(t, names, 13)
	assert.Equal(t, "small-01", names[1])
	assert.Equal(t, "small-12", names[12])

	list, err = Load(strings.NewReader(`[{"name": "a", "tenants": [{"name": "x", "rate": 1}]},
		{"name": "b", "tenants": [{"name": "y", "rate": 0.5}]}]`))
	require.NoError(t, err)
	assert.Len(t, list, 2)
}

func TestLoadSaysWhatIsWrong(t *testing.T) {
	for _, c := range []struct{ json, want string }{
		{`{"name": "x", "tenants": [{"name": "a", "rate": 1}], "speed": 3}`, `unknown field "speed"`},
		{`{"name": "x", "tenants": []}`, "no tenants"},
		{`{"name": "x", "tenants": [{"name": "a", "rate": -1}]}`, "rate -1"},
		{`{"name": "x", "tenants": [{"name": "a", "rate": 1}, {"name": "a", "rate": 1}]}`, "used twice"},
		{`{"name": "x", "duration": "soon", "tenants": [{"name": "a", "rate": 1}]}`, `duration "soon"`},
		{`{"name": "x", "store_delay": "1s", "tenants": [{"name": "a", "rate": 1}]}`, "store_delay 1s"},
		{`{"name": "x", "balancer": "least", "tenants": [{"name": "a", "rate": 1}]}`, `balancer "least"`},
		{`{"name": "x", "tenants": [{"name": "a", "rate": 1, "start": "5s", "end": "2s"}]}`, "start 5s and end 2s"},
		{`{"name": "x", "tenants": [{"name": "a", "rate": 1}], "targets": [{"kind": "magic"}]}`, `kind "magic"`},
		{`{"name": "x", "tenants": [{"name": "a", "rate": 1}], "targets": [{"kind": "share", "tenant": "b", "max": 1}]}`, `tenant "b"`},
		{`{"name": "x", "tenants": [{"name": "a", "rate": 1}], "outage": {"from": "3s", "to": "1s"}}`, "outage"},
		{`[]`, "no scenarios"},
	} {
		_, err := Load(strings.NewReader(c.json))
		require.Error(t, err, c.json)
		assert.Contains(t, err.Error(), c.want, c.json)
	}
}

func TestScaledKeepsTheStoryInProportion(t *testing.T) {
	sc := builtin(t, "arrive-leave", 0)
	short := sc.Scaled(6 * time.Second)
	assert.Equal(t, Duration(6*time.Second), short.Duration)
	var heavy TenantSpec
	for _, tn := range short.Tenants {
		if tn.Name == "heavy" {
			heavy = tn
		}
	}
	assert.Equal(t, Duration(2*time.Second), heavy.Start)
	assert.Equal(t, Duration(4*time.Second), heavy.End)
	for i, tg := range short.Targets {
		assert.Equal(t, sc.Targets[i].From/5, tg.From)
		assert.Equal(t, sc.Targets[i].Max, tg.Max, "limits in periods stay")
	}
	assert.Equal(t, sc.Period, short.Period)
	for _, tn := range sc.Tenants {
		if tn.Name == "heavy" {
			assert.Equal(t, Duration(10*time.Second), tn.Start, "the original is left alone")
		}
	}
	assert.Equal(t, sc, sc.Scaled(0))
}

func TestDurationJSON(t *testing.T) {
	b, err := Duration(1500 * time.Millisecond).MarshalJSON()
	require.NoError(t, err)
	assert.Equal(t, `"1.5s"`, string(b))
	var d Duration
	require.NoError(t, d.UnmarshalJSON([]byte(`2.5`)))
	assert.Equal(t, Duration(2500*time.Millisecond), d)
	err = d.UnmarshalJSON([]byte(`true`))
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "tenantsim: duration true: "), err.Error())
}

func TestNormalizeSaysWhichScenario(t *testing.T) {
	_, err := Scenario{Name: "x"}.Normalize()
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), `tenantsim: scenario "x": `), err.Error())
}

func TestWaterFill(t *testing.T) {
	// Weighted max-min: a and b are met; c and d share the rest 1:3.
	got := waterFill([]float64{0.1, 0.15, 2, 2}, []float64{1, 1, 1, 3}, 1)
	assert.InDeltaSlice(t, []float64{0.1, 0.15, 0.1875, 0.5625}, got, 1e-9)
	// Below capacity: everyone is met.
	assert.Equal(t, []float64{0.3, 0.4, 0}, waterFill([]float64{0.3, 0.4, 0}, []float64{1, 1, 1}, 1))
}
