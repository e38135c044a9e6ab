package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/tenant"
)

// TestControllerCommand runs sluice controller against a real Redis with
// an overloaded server's report in it: it takes the lease and writes a
// drop table that drops only the heavy tenant.
func TestControllerCommand(t *testing.T) {
	addr := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer client.Close()
	store, err := tenant.NewRedisStore(client, tenant.RedisConfig{Fleet: "cmdtest"})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, store.Push(ctx, tenant.Report{Server: "s1", Seq: 1, Period: time.Second, Closed: time.Second, Tenants: []tenant.Usage{
		{Tenant: "heavy", Requests: 5400, Admitted: 900, Rejected: 4500, Blame: 900 * time.Millisecond},
		{Tenant: "light", Requests: 60, Admitted: 10, Rejected: 50, Blame: 10 * time.Millisecond},
	}}, time.Minute))

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stdout, stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		// A period of 400 ms gives each round trip 100 ms: a local Redis
		// answers within that even on a loaded CI machine, so stderr
		// stays empty.
		done <- run(runCtx, []string{"controller", "-redis", addr, "-fleet", "cmdtest", "-period", "400ms", "-id", "c1"}, &stdout, &stderr)
	}()
	var table tenant.Table
	require.Eventually(t, func() bool {
		table, err = store.Table(ctx)
		return err == nil && table.Version > 0
	}, 10*time.Second, 20*time.Millisecond, "the controller writes a table")
	cancel()
	require.NoError(t, <-done)
	assert.Contains(t, table.Drops, "heavy")
	assert.NotContains(t, table.Drops, "light")
	assert.Contains(t, stdout.String(), "leading")
	assert.Contains(t, stdout.String(), "overloaded")
	assert.Empty(t, stderr.String())
}

func TestControllerCommandErrors(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"controller"}, &stdout, &stderr)
	require.ErrorContains(t, err, "-redis is required")
	err = run(context.Background(), []string{"controller", "-redis", "127.0.0.1:1", "-weights", "gold=x"}, &stdout, &stderr)
	require.ErrorContains(t, err, `"gold=x"`)
}
