//go:build linux

package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/client"
)

// tinyCluster is the cluster scenario small enough for a test: a light
// handler, short parts, a breaker that probes after 200 ms.
func tinyCluster() SuiteConfig {
	cfg := tinySuite()
	cfg.Targets = []string{"sluice"}
	cfg.Scenarios = []Scenario{builtIn(ScenarioCluster)}
	cfg.Duration = 400 * time.Millisecond
	cfg.Constant = false
	cfg.Cluster = ClusterConfig{
		CPU: 200 * time.Microsecond, KillMultiple: 0.3,
		KillAfter: 300 * time.Millisecond, Down: 300 * time.Millisecond, After: 600 * time.Millisecond,
		Breaker: client.BreakerConfig{OpenFor: 200 * time.Millisecond},
	}
	return cfg
}

func TestSuiteCluster(t *testing.T) {
	cfg := tinyCluster()
	var progress progressLog
	cfg.Progress = progress.record
	rep, err := RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	progress.check(t)

	var parts []string
	var capacity float64
	for _, s := range rep.Samples {
		require.NotNil(t, s.Cluster)
		ci := s.Cluster
		what := ci.Part
		parts = append(parts, ci.Part)
		assert.Equal(t, ScenarioCluster, s.Scenario, what)
		assert.Equal(t, ClusterShape, s.Shape, what)
		assert.Equal(t, "sluice", s.Target, what)
		assert.Positive(t, s.Capacity, what)
		if capacity > 0 {
			assert.Equal(t, capacity, s.Capacity, "%s: one calibration of the cluster for every part", what)
		}
		capacity = s.Capacity
		assert.Positive(t, s.Rates.Goodput, what)
		assert.InEpsilon(t, s.Multiple*s.Capacity, s.Rates.Offered, 0.5, what)

		require.Len(t, ci.Backends, 3, what)
		for i, b := range ci.Backends {
			assert.Equal(t, i == 2, b.Slow, "%s: the slow backend is the last", what)
			assert.Equal(t, b.Sent-b.Rejected-b.Failed, b.Served, what)
			if ci.Part != ClusterKill || i > 0 {
				assert.NotEmpty(t, b.Server, "%s: backend %d's counters", what, i)
			}
		}
		assert.Equal(t, 3*ci.Backends[0].Handler.CPU, ci.Backends[2].Handler.CPU, what)
		assert.Equal(t, ci.Requests-ci.NoBackend+ci.Retries, ci.Attempts, "%s: a first attempt for each request not failed fast, and one per retry", what)
		assert.InDelta(t, float64(ci.Attempts)/float64(ci.Requests), ci.Amplification, 1e-9, what)
		switch ci.Part {
		case ClusterNone:
			assert.Zero(t, ci.Retries, "no retry")
			assert.Equal(t, 1.0, ci.Amplification)
		case ClusterNaive:
			assert.Zero(t, ci.BudgetDenied, "no budget")
		case ClusterSluice:
			// The default budget: 10% of the requests, or 10 a second
			// over its 10 s window when that is more.
			assert.LessOrEqual(t, ci.Retries, max(ci.Requests/10, 100)+1)
		}
		if ci.Part != ClusterKill {
			assert.Nil(t, ci.Kill, what)
			assert.Empty(t, s.Classes, what)
			continue
		}
		k := ci.Kill
		require.NotNil(t, k)
		assert.True(t, ci.Backends[0].Killed)
		assert.GreaterOrEqual(t, k.KilledAt, cfg.Cluster.KillAfter)
		assert.GreaterOrEqual(t, k.ReturnedAt, k.KilledAt+cfg.Cluster.Down)
		assert.Equal(t, 200*time.Millisecond, k.ProbeInterval)
		t.Logf("kill: %+v", *k)
		// The one loose property: with 5 errors in a row enough to trip
		// it, the dead backend's breaker opens (when is a timing, logged).
		assert.True(t, k.Opened, "the breaker opens on the dead backend")
		if k.Opened {
			assert.Contains(t, s.Classes, KillOpen)
		}
		assert.Contains(t, s.Classes, KillBefore)
		for _, tr := range k.Transitions {
			assert.NotEqual(t, tr.From, tr.To)
		}
	}
	assert.Equal(t, ClusterParts, parts)
}

func TestClusterConfig(t *testing.T) {
	var c ClusterConfig
	require.NoError(t, c.defaults())
	assert.Equal(t, ClusterConfig{
		CPU: time.Millisecond, Slow: 3, Multiple: 1.5, KillMultiple: 0.4,
		KillAfter: client.DefaultBreakerWindow, Down: 2 * time.Second, After: 2*client.DefaultBreakerOpenFor + time.Second,
		NaiveAttempts: 1000,
	}, c)
	assert.Equal(t, HandlerSpec{CPU: 3 * time.Millisecond}, c.spec(2))
	assert.Equal(t, HandlerSpec{CPU: time.Millisecond}, c.spec(0))

	c = ClusterConfig{Breaker: client.BreakerConfig{Window: 2 * time.Second, OpenFor: time.Second}}
	require.NoError(t, c.defaults())
	assert.Equal(t, 2*time.Second, c.KillAfter, "a full window of the breaker's")
	assert.Equal(t, 3*time.Second, c.After, "two probe intervals and a second")

	assert.ErrorContains(t, (&ClusterConfig{Multiple: -1}).defaults(), "multiple")
	assert.ErrorContains(t, (&ClusterConfig{Down: -time.Second}).defaults(), "negative")
	assert.ErrorContains(t, (&ClusterConfig{NaiveAttempts: -1}).defaults(), "naive")

	cfg := tinySuite()
	cfg.Scenarios = []Scenario{builtIn(ScenarioCluster)}
	cfg.Cluster.Slow = -3
	assert.ErrorContains(t, cfg.defaults(), "slow factor")
}

func TestBackendCPUs(t *testing.T) {
	assert.Nil(t, backendCPUs(nil, 3, 1), "shared: the parent's CPUs")
	assert.Equal(t, []int{1}, backendCPUs([]int{1}, 3, 2), "fewer CPUs than backends: all share them")
	assert.Equal(t, []int{1, 2}, backendCPUs([]int{1, 2}, 3, 0))
	assert.Equal(t, [][]int{{1, 2}, {3, 4, 5}, {6, 7, 8}}, [][]int{
		backendCPUs([]int{1, 2, 3, 4, 5, 6, 7, 8}, 3, 0),
		backendCPUs([]int{1, 2, 3, 4, 5, 6, 7, 8}, 3, 1),
		backendCPUs([]int{1, 2, 3, 4, 5, 6, 7, 8}, 3, 2),
	}, "disjoint, as even as can be")
}

func TestPointDescribeCluster(t *testing.T) {
	assert.Equal(t, "cluster naive 1.5x", Point{Part: ClusterNaive, Multiple: 1.5}.describe(ScenarioCluster))
}
