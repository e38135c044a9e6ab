package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
)

func TestClusterFlags(t *testing.T) {
	parse := func(args ...string) (*suiteFlags, error) {
		return parseSuiteFlags(t, "bench", bench.ScenarioCluster, args...)
	}
	f, err := parse()
	require.NoError(t, err)
	assert.Equal(t, []string{bench.ScenarioCluster}, scenarioNames(f.cfg.Scenarios))
	assert.Equal(t, bench.DefaultClusterMultiple, f.cfg.Cluster.Multiple, "the issue's 1.5x by default")

	f, err = parse("-cluster-x", "2")
	require.NoError(t, err)
	assert.Equal(t, 2.0, f.cfg.Cluster.Multiple)

	_, err = parse("-cluster-x", "0")
	assert.ErrorContains(t, err, "-cluster-x")
}
