package bench

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSampleReadsAnOldScenarioFieldAsItsDetail(t *testing.T) {
	var s Sample
	require.NoError(t, json.Unmarshal([]byte(`{"scenario": "noisy", "target": "sluice", "noisy": {"rate": 800}}`), &s))
	assert.Equal(t, "sluice", s.Target)
	d, err := DetailOf[struct {
		Rate float64 `json:"rate"`
	}](&s)
	require.NoError(t, err)
	require.NotNil(t, d, "the old field is the detail")
	assert.Equal(t, 800.0, d.Rate)

	var both Sample
	require.NoError(t, json.Unmarshal([]byte(`{"scenario": "noisy", "noisy": {"rate": 1}, "detail": {"rate": 2}}`), &both))
	assert.JSONEq(t, `{"rate": 2}`, string(both.Detail), "a detail written as such wins")

	var sweep Sample
	require.NoError(t, json.Unmarshal([]byte(`{"scenario": "sweep", "noisy": {"rate": 1}}`), &sweep))
	assert.Empty(t, sweep.Detail, "only the scenario's own field")
	var none Sample
	require.NoError(t, json.Unmarshal([]byte(`{"scenario": "noisy", "noisy": null}`), &none))
	assert.Empty(t, none.Detail)

	var bad Sample
	assert.Error(t, json.Unmarshal([]byte(`{"scenario": 3}`), &bad))
}

func TestSampleDetailRoundTrips(t *testing.T) {
	s := Sample{Scenario: "noisy", Target: "sluice"}
	require.NoError(t, s.SetDetail(map[string]int{"n": 3}))
	b, err := json.Marshal(s)
	require.NoError(t, err)
	var back Sample
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, s, back)
}
