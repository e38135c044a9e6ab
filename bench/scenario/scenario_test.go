package scenario

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
)

func TestAllNamesEachScenarioOnce(t *testing.T) {
	names := Names()
	seen := make(map[string]bool)
	for _, n := range names {
		assert.False(t, seen[n], "%s listed twice", n)
		seen[n] = true
	}
	for _, n := range Default() {
		assert.True(t, seen[n], "the default %s is listed", n)
	}
	assert.True(t, seen["closed"])
	assert.True(t, seen["soak"])
}

func TestSelect(t *testing.T) {
	all := All()
	got, err := Select(all, []string{"closed", "sweep"})
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "closed", got[0].Name(), "in the order named")
	assert.Equal(t, "sweep", got[1].Name())

	_, err = Select(all, []string{"sweep", "chaos"})
	assert.ErrorContains(t, err, `unknown scenario "chaos"`)
	assert.ErrorContains(t, err, "closed", "the error lists what there is")
	_, err = Select(all, []string{"sweep", "sweep"})
	assert.ErrorContains(t, err, "twice")
}

// detail decodes s's detail, which every sample of a scenario here
// records.
func detail[T any](t *testing.T, s *bench.Sample) T {
	t.Helper()
	d, err := bench.DetailOf[T](s)
	require.NoError(t, err)
	require.NotNil(t, d, "%s %s: the sample records its detail", s.Scenario, s.Target)
	return *d
}

// The command's help lists every scenario, and describes each one outside
// the default set: a new scenario is one file and one line in All.
func TestUsageNamesEveryScenario(t *testing.T) {
	u := Usage()
	for _, s := range All() {
		assert.Contains(t, u, s.Name(), "the help names it")
		if slices.Contains(Default(), s.Name()) {
			continue
		}
		d, ok := s.(Describer)
		if assert.True(t, ok, "%s says what it does", s.Name()) {
			assert.NotEmpty(t, d.Describe(), s.Name())
			assert.Contains(t, u, s.Name()+" ("+d.Describe()+")")
		}
	}
}

// asOldSample returns s as a report written before its scenario kept its
// figures in Sample.Detail had it: the detail under field.
func asOldSample(t *testing.T, s bench.Sample, field string) bench.Sample {
	t.Helper()
	js, err := json.Marshal(s)
	require.NoError(t, err)
	var fields map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(js, &fields))
	fields[field] = fields["detail"]
	delete(fields, "detail")
	old, err := json.Marshal(fields)
	require.NoError(t, err)
	var back bench.Sample
	require.NoError(t, json.Unmarshal(old, &back))
	return back
}
