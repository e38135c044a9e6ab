package await

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/sched"
)

// The package documentation's recipe with a real client and server: a
// go-redis call wrapped in sched.Await waits off the worker. BLPOP blocks in
// the server until another client pushes, so the coroutine waits for as
// long as the test wants; meanwhile the only worker is free and runs a plain
// task. Errors, such as redis.Nil for a missing key, come back unchanged.
func TestRedisRecipe(t *testing.T) {
	schedtest.SkipWithoutExecutor(t) // before starting a Redis server for nothing
	addr := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { assert.NoError(t, rdb.Close()) })
	s := schedtest.Start(t, 1)

	type result struct {
		popped       []string
		greeting     string
		missing      error
		popErr, gErr error
	}
	res := make(chan result, 1)
	require.NoError(t, s.Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
		var r result
		r.popped, r.popErr = sched.Await(ctx, func(ctx context.Context) ([]string, error) {
			return rdb.BLPop(ctx, waitFor, "jobs").Result()
		})
		_, r.gErr = sched.Await(ctx, func(ctx context.Context) (string, error) {
			return rdb.Set(ctx, "greeting", "hello", time.Minute).Result()
		})
		if r.gErr == nil {
			r.greeting, r.gErr = sched.Await(ctx, func(ctx context.Context) (string, error) {
				return rdb.Get(ctx, "greeting").Result()
			})
		}
		_, r.missing = sched.Await(ctx, func(ctx context.Context) (string, error) {
			return rdb.Get(ctx, "no such key").Result()
		})
		res <- r
	}))

	schedtest.WorkersIdle(t, s, 1)
	ran := make(chan struct{})
	require.NoError(t, s.Submit(lanes.Upstream, func() { close(ran) }))
	schedtest.Recv(t, ran, "a plain task while BLPOP waits")
	select {
	case r := <-res:
		t.Fatalf("BLPOP returned before the push: %+v", r)
	default:
	}

	require.NoError(t, rdb.RPush(context.Background(), "jobs", "job-1").Err())
	r := schedtest.Recv(t, res, "the coroutine")
	require.NoError(t, r.popErr)
	assert.Equal(t, []string{"jobs", "job-1"}, r.popped)
	require.NoError(t, r.gErr)
	assert.Equal(t, "hello", r.greeting)
	assert.ErrorIs(t, r.missing, redis.Nil)
}
