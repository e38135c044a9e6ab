package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
)

func TestTenantsFlags(t *testing.T) {
	parse := func(args ...string) (*suiteFlags, error) {
		return parseSuiteFlags(t, "bench", bench.ScenarioTenants, args...)
	}
	f, err := parse()
	require.NoError(t, err)
	assert.Equal(t, []string{bench.ScenarioTenants}, scenarioNames(f.cfg.Scenarios))
	assert.Equal(t, bench.DefaultTenantsDuration, f.cfg.Tenants.Duration)
	assert.Equal(t, bench.DefaultTenantsCPU, f.cfg.Tenants.CPU)

	f, err = parse("-tenants-duration", "5s", "-tenants-cpu", "2ms")
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, f.cfg.Tenants.Duration)
	assert.Equal(t, 2*time.Millisecond, f.cfg.Tenants.CPU)

	_, err = parse("-tenants-duration", "0s")
	assert.ErrorContains(t, err, "-tenants-duration")
	_, err = parse("-tenants-cpu", "0s")
	assert.ErrorContains(t, err, "-tenants-cpu")
	f, err = parse("-tenants-utilisation", "0.85")
	require.NoError(t, err)
	assert.Equal(t, 0.85, f.cfg.Tenants.Utilisation)
	_, err = parse("-tenants-utilisation", "1.5")
	assert.ErrorContains(t, err, "-tenants-utilisation")
}
