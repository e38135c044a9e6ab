package main

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
)

func TestClusterFlags(t *testing.T) {
	parse := func(args ...string) (*suiteFlags, error) {
		f := newSuiteFlags(time.Second, 1, "sluice", bench.ScenarioCluster, "2")
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		f.register(fs)
		require.NoError(t, fs.Parse(args))
		return f, f.finish("bench", args)
	}
	f, err := parse()
	require.NoError(t, err)
	assert.Equal(t, []string{bench.ScenarioCluster}, f.cfg.Scenarios)
	assert.Equal(t, bench.DefaultClusterMultiple, f.cfg.Cluster.Multiple, "the issue's 1.5x by default")

	f, err = parse("-cluster-x", "2")
	require.NoError(t, err)
	assert.Equal(t, 2.0, f.cfg.Cluster.Multiple)

	_, err = parse("-cluster-x", "0")
	assert.ErrorContains(t, err, "-cluster-x")
}
