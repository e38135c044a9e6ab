package ratelimit

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluice-go/sluice/internal/redistest"
)

// redisClock is a settable clock in nanoseconds for the Redis tests' limiters.
type redisClock struct{ ns atomic.Int64 }

func (c *redisClock) now() int64          { return c.ns.Load() }
func (c *redisClock) set(t time.Duration) { c.ns.Store(int64(t)) }

// redisClient returns a client of addr as RedisSync wants it (the
// context's deadline bounds each flush; the next flush is the retry),
// closed when the test ends.
func redisClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// redisLimiter returns a limiter on clk (a real clock when nil).
func redisLimiter(t testing.TB, window time.Duration, quota int64, clk *redisClock) *Limiter {
	t.Helper()
	cfg := Config{Window: window, Quota: quota}
	if clk != nil {
		cfg.Clock = clk.now
	}
	l, err := New(cfg)
	require.NoError(t, err)
	return l
}

// redisSync returns l's RedisSync through client, closed when the test
// ends.
func redisSync(t testing.TB, l *Limiter, client redis.UniversalClient, opts RedisConfig) *RedisSync {
	t.Helper()
	s, err := NewRedisSync(l, client, opts)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// allowed asks n times for key and returns how many were allowed.
func redisAllowed(l *Limiter, key string, n int) int {
	ok := 0
	for range n {
		if l.Allow(key).Allowed {
			ok++
		}
	}
	return ok
}

// counted is key's count under the sliding window as l sees it.
func redisCounted(l *Limiter, key string) int64 {
	r := l.AllowN(key, 0)
	return r.Quota - r.Remaining
}

// counter reads a counter from Redis, 0 when missing.
func redisCounter(t testing.TB, c *redis.Client, name string) int64 {
	t.Helper()
	v, err := c.Get(context.Background(), name).Int64()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	require.NoError(t, err)
	return v
}

// Two processes share a key: each flush sends one's increments and reads
// back everyone's, named by key and window, with a TTL of two windows and
// a second.
func TestRedisSyncSharesCounts(t *testing.T) {
	addr := redistest.Start(t)
	check := redisClient(t, addr)
	clk := &redisClock{}
	a, b := redisLimiter(t, time.Second, 10, clk), redisLimiter(t, time.Second, 10, clk)
	sa := redisSync(t, a, redisClient(t, addr), RedisConfig{Manual: true})
	sb := redisSync(t, b, redisClient(t, addr), RedisConfig{Manual: true})
	ctx := context.Background()

	assert.Equal(t, 6, redisAllowed(a, "k", 6))
	require.NoError(t, sa.Flush(ctx))
	assert.Equal(t, int64(6), redisCounter(t, check, "sluice:rl:{k}:0"))
	ttl, err := check.PTTL(ctx, "sluice:rl:{k}:0").Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, 2*time.Second)
	assert.LessOrEqual(t, ttl, 3*time.Second)

	// b has not seen k: it counts only its own until its first flush.
	assert.Equal(t, 1, redisAllowed(b, "k", 1))
	require.NoError(t, sb.Flush(ctx))
	assert.Equal(t, int64(7), redisCounted(b, "k"), "6 of a's and 1 of b's")
	assert.Equal(t, int64(2), redisCard(t, check, "sluice:rl:{k}:0:p"), "a and b are active on k")
	// The share rule: 3 left, 2 processes, 1 for b until its next flush.
	assert.Equal(t, 1, redisAllowed(b, "k", 10))
	require.NoError(t, sb.Flush(ctx))
	require.NoError(t, sa.Flush(ctx), "a has nothing to send but reads k back")
	assert.Equal(t, int64(8), redisCounted(a, "k"), "b's 2 reached a")
	assert.Equal(t, 1, redisAllowed(a, "k", 10), "2 left, 2 processes")
	require.NoError(t, sa.Flush(ctx))
	require.NoError(t, sb.Flush(ctx))
	assert.Equal(t, int64(9), redisCounted(b, "k"))
	assert.Zero(t, redisAllowed(b, "k", 10), "1 left, 2 processes: 0 each")

	// Half-way through window 1, window 0's 9 weigh 4.5: after a flush, a
	// takes its half of the 5.5 left, 2, and b, which had admitted in
	// window 0, sees them and takes its half of the 3.5 left.
	clk.set(1500 * time.Millisecond)
	require.NoError(t, sa.Flush(ctx))
	assert.Equal(t, 2, redisAllowed(a, "k", 10))
	require.NoError(t, sa.Flush(ctx))
	require.NoError(t, sb.Flush(ctx))
	assert.Equal(t, int64(7), redisCounted(b, "k"), "2 + 9 × 0.5, rounded up")
	assert.Equal(t, 1, redisAllowed(b, "k", 10))

	// Commands per flush, with the set of the processes active on k:
	// INCRBY (+ PEXPIRE the first time in a window) or GET of each
	// counter, SADD (+ PEXPIRE the first time) while this process has
	// increments in the current window or the previous one, and SCARD of
	// the sets of both windows.
	st := sa.Stats()
	assert.Equal(t, RedisStats{Flushes: 5, KeysSynced: 5, CommandsSent: 29, TrackedKeys: 1, LastSyncAt: st.LastSyncAt}, st)
	assert.Equal(t, int64(23), sb.Stats().CommandsSent)
	assert.Equal(t, int64(2), redisCounter(t, check, "sluice:rl:{k}:1"))
	ttl, err = check.PTTL(ctx, "sluice:rl:{k}:1:p").Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, 2*time.Second)
	assert.LessOrEqual(t, ttl, 3*time.Second)
}

// redisCard reads the size of a set from Redis, 0 when missing.
func redisCard(t testing.TB, c *redis.Client, name string) int64 {
	t.Helper()
	n, err := c.SCard(context.Background(), name).Result()
	require.NoError(t, err)
	return n
}

// redisCountHook counts what a client sends: pipelines and single commands.
type redisCountHook struct{ pipelines, singles, commands atomic.Int64 }

func (h *redisCountHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *redisCountHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.singles.Add(1)
		return next(ctx, cmd)
	}
}
func (h *redisCountHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipelines.Add(1)
		h.commands.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// However many requests, a flush is one pipeline of a few commands per key;
// a process whose keys have gone quiet sends nothing.
func TestRedisSyncOneRoundTripPerFlush(t *testing.T) {
	addr := redistest.Start(t)
	client, check := redisClient(t, addr), redisClient(t, addr)
	ctx := context.Background()
	// Connect first, so that the counts leave out the handshake.
	_, err := client.Pipelined(ctx, func(p redis.Pipeliner) error { return p.Ping(ctx).Err() })
	require.NoError(t, err)
	var hook redisCountHook
	client.AddHook(&hook)
	clk := &redisClock{}
	l := redisLimiter(t, time.Second, 1<<40, clk)
	s := redisSync(t, l, client, RedisConfig{Manual: true})

	for i := range 100_000 {
		l.Allow("tenant-" + strconv.Itoa(i%50))
	}
	require.NoError(t, s.Flush(ctx))
	assert.Equal(t, int64(1), hook.pipelines.Load())
	assert.Zero(t, hook.singles.Load())
	assert.Equal(t, int64(350), hook.commands.Load(), "INCRBY, PEXPIRE, GET of the previous window, SADD, PEXPIRE, 2 SCARD, per key")
	assert.Equal(t, int64(2000), redisCounter(t, check, "sluice:rl:{tenant-7}:0"))

	// Nothing new: the keys are read back (GET, GET, SADD, 2 SCARD), in one
	// pipeline.
	require.NoError(t, s.Flush(ctx))
	assert.Equal(t, int64(2), hook.pipelines.Load())
	assert.Equal(t, int64(600), hook.commands.Load())

	// Keys are read back while they have increments in the current window
	// or the two before it: in window 2 still, not in window 3.
	clk.set(2 * time.Second)
	require.NoError(t, s.Flush(ctx))
	assert.Equal(t, int64(3), hook.pipelines.Load())
	clk.set(3 * time.Second)
	require.NoError(t, s.Flush(ctx))
	assert.Equal(t, int64(3), hook.pipelines.Load(), "nothing to send or read")
	st := s.Stats()
	assert.Equal(t, int64(800), st.CommandsSent, "window 2: GET, GET, 2 SCARD (no SADD: no increments since window 0)")
	assert.Equal(t, int64(3), st.Flushes)
	assert.Zero(t, st.TrackedKeys)
}

// Redis stopped mid-test: decisions go on, at once, on the last global
// counts plus local ones; failures are counted; when Redis is back (empty)
// the increments of the outage reach it and flushes succeed again.
func TestRedisSyncFailOpen(t *testing.T) {
	srv := redistest.StartServer(t)
	check := redisClient(t, srv.Addr())
	clk := &redisClock{}
	a, b := redisLimiter(t, time.Minute, 1000, clk), redisLimiter(t, time.Minute, 1000, clk)
	// Frequent flushes, with a timeout (25 ms) that a loaded machine under
	// the race detector still meets.
	opts := RedisConfig{Interval: 50 * time.Millisecond}
	sa := redisSync(t, a, redisClient(t, srv.Addr()), opts)
	sb := redisSync(t, b, redisClient(t, srv.Addr()), opts)

	require.Equal(t, 100, redisAllowed(a, "k", 100))
	require.Equal(t, 1, redisAllowed(b, "k", 1))
	require.Eventually(t, func() bool { return redisCounted(a, "k") == 101 && redisCounted(b, "k") == 101 },
		5*time.Second, time.Millisecond, "both see both")

	srv.Stop()
	start := time.Now()
	assert.Equal(t, 50, redisAllowed(a, "k", 50))
	assert.Less(t, time.Since(start), time.Second, "50 decisions waited for Redis")
	// Two failures after these decisions: the second at least had them
	// in its batch.
	fa, fb := sa.Stats().Failures, sb.Stats().Failures
	require.Eventually(t, func() bool {
		return sa.Stats().Failures >= fa+2 && sb.Stats().Failures >= fb+2
	}, 5*time.Second, time.Millisecond)
	assert.Equal(t, int64(151), redisCounted(a, "k"), "a counts its own on top of the last global count")
	assert.Equal(t, int64(101), redisCounted(b, "k"), "b keeps the last global count")
	st := sa.Stats()
	require.Error(t, st.LastError) // connection refused, or the timeout while the client waits to dial again
	assert.Contains(t, st.LastError.Error(), "ratelimit: flushing 1 keys to Redis, 1 failed (1 to send again)")
	assert.False(t, st.LastErrorAt.Before(start))
	assert.GreaterOrEqual(t, st.ConsecutiveFailures, int64(2))

	srv.Restart() // empty: Redis lost the counts
	require.Eventually(t, func() bool {
		return sa.Stats().ConsecutiveFailures == 0 && sb.Stats().ConsecutiveFailures == 0
	}, 5*time.Second, time.Millisecond)
	assert.Equal(t, int64(50), redisCounter(t, check, "sluice:rl:{k}:0"), "the outage's increments, sent again")
	// A store that lost its counts gives no quota back: a keeps its 151
	// (the 101 it had seen and its 50 since), b the 101 it had seen, until
	// the new counts pass them.
	assert.Equal(t, int64(151), redisCounted(a, "k"))
	assert.Equal(t, int64(101), redisCounted(b, "k"))
	// The counter the restart lost was made again by an INCRBY with no
	// PEXPIRE after it (a had given it its TTL before): the next flush does.
	require.Eventually(t, func() bool {
		ttl, err := check.PTTL(context.Background(), "sluice:rl:{k}:0").Result()
		return err == nil && ttl > time.Minute
	}, 5*time.Second, time.Millisecond, "the remade counter has no TTL")
	after := sa.Stats()
	assert.Greater(t, after.Flushes, st.Flushes)
	assert.True(t, after.LastSyncAt.After(after.LastErrorAt))
}

// A Redis that hangs (SIGSTOP): a flush gives up at its Timeout, decisions
// never wait for it, and the next flush after it answers again succeeds.
func TestRedisSyncSlowRedis(t *testing.T) {
	srv := redistest.StartServer(t)
	clk := &redisClock{}
	l := redisLimiter(t, time.Minute, 1000, clk)
	s := redisSync(t, l, redisClient(t, srv.Addr()), RedisConfig{Manual: true, Interval: 400 * time.Millisecond, Timeout: 200 * time.Millisecond})
	ctx := context.Background()
	require.Equal(t, 5, redisAllowed(l, "k", 5))
	require.NoError(t, s.Flush(ctx))

	srv.Pause()
	require.Equal(t, 3, redisAllowed(l, "k", 3))
	start := time.Now()
	err := s.Flush(ctx)
	took := time.Since(start)
	require.Error(t, err)
	var netErr net.Error
	assert.True(t, errors.As(err, &netErr) && netErr.Timeout(), "%v", err)
	assert.GreaterOrEqual(t, took, 150*time.Millisecond)
	assert.Less(t, took, 2*time.Second, "the flush outlasted its timeout")
	assert.Equal(t, int64(8), redisCounted(l, "k"), "the flush's 3 still count")

	srv.Resume()
	require.NoError(t, s.Flush(ctx))
	// Redis may have run the timed-out batch after all, on resuming: the 3
	// then count twice, which errs toward refusing.
	assert.Contains(t, []int64{8, 11}, redisCounted(l, "k"))
	st := s.Stats()
	assert.Equal(t, int64(3), st.Flushes)
	assert.Equal(t, int64(1), st.Failures)
	assert.Zero(t, st.ConsecutiveFailures)
}

// While the goroutine's flushes hang on a paused Redis, decisions take no
// longer than without it.
func TestRedisSyncNeverBlocksDecisions(t *testing.T) {
	srv := redistest.StartServer(t)
	l := redisLimiter(t, time.Minute, 1<<40, nil)
	s := redisSync(t, l, redisClient(t, srv.Addr()), RedisConfig{Interval: 200 * time.Millisecond, Timeout: 200 * time.Millisecond})
	l.Allow("k")
	require.Eventually(t, func() bool { return s.Stats().Flushes > 0 }, 5*time.Second, time.Millisecond)

	srv.Pause()
	var slowest time.Duration
	for end := time.Now().Add(600 * time.Millisecond); time.Now().Before(end); {
		start := time.Now()
		l.Allow("k")
		slowest = max(slowest, time.Since(start))
		time.Sleep(50 * time.Microsecond)
	}
	srv.Resume()
	assert.Less(t, slowest, 100*time.Millisecond, "a decision waited for a flush")
	assert.Positive(t, s.Stats().Failures, "the flushes timed out meanwhile")
}

// A key whose counter is not a number in Redis fails alone: the other keys
// are synced, its increments go back to pending and are sent once it can
// be counted again. A key whose increments Redis took but whose other
// counter it could not read is not sent again.
func TestRedisSyncPartialFailure(t *testing.T) {
	addr := redistest.Start(t)
	check := redisClient(t, addr)
	clk := &redisClock{}
	l := redisLimiter(t, time.Second, 100, clk)
	s := redisSync(t, l, redisClient(t, addr), RedisConfig{Manual: true})
	ctx := context.Background()
	require.NoError(t, check.Set(ctx, "sluice:rl:{bad}:0", "not a number", time.Minute).Err())
	require.NoError(t, check.Set(ctx, "sluice:rl:{prev}:-1", "nor this", time.Minute).Err())

	redisAllowed(l, "good", 2)
	redisAllowed(l, "bad", 3)
	redisAllowed(l, "prev", 4)
	err := s.Flush(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ratelimit: flushing 3 keys to Redis, 2 failed (1 to send again): ")
	assert.Regexp(t, `ERR value is not an integer|parsing "nor this"`, err.Error(), "the first key's error")
	assert.Equal(t, int64(2), redisCounter(t, check, "sluice:rl:{good}:0"))
	assert.Equal(t, int64(4), redisCounter(t, check, "sluice:rl:{prev}:0"))
	assert.Equal(t, int64(3), redisCounted(l, "bad"), "still counted, as pending")
	assert.Equal(t, int64(4), redisCounted(l, "prev"))
	st := s.Stats()
	assert.Equal(t, int64(1), st.KeysSynced)
	assert.Equal(t, int64(1), st.Failures)

	require.NoError(t, check.Del(ctx, "sluice:rl:{bad}:0", "sluice:rl:{prev}:-1").Err())
	require.NoError(t, s.Flush(ctx))
	assert.Equal(t, int64(2), redisCounter(t, check, "sluice:rl:{good}:0"), "sent once")
	assert.Equal(t, int64(3), redisCounter(t, check, "sluice:rl:{bad}:0"))
	assert.Equal(t, int64(4), redisCounter(t, check, "sluice:rl:{prev}:0"), "sent once")
	assert.Equal(t, int64(3), redisCounted(l, "bad"))
	assert.Equal(t, int64(4), redisCounted(l, "prev"))
	assert.Equal(t, int64(4), s.Stats().KeysSynced)
}

// Past MaxBatch keys, a flush sends the keys with increments first and
// leaves the rest for later: nothing is lost or sent twice.
func TestRedisSyncMaxBatch(t *testing.T) {
	addr := redistest.Start(t)
	check := redisClient(t, addr)
	clk := &redisClock{}
	l := redisLimiter(t, time.Second, 100, clk)
	s := redisSync(t, l, redisClient(t, addr), RedisConfig{Manual: true, MaxBatch: 10})
	ctx := context.Background()
	for i := range 25 {
		redisAllowed(l, "k"+strconv.Itoa(i), i+1)
	}
	require.NoError(t, s.Flush(ctx))
	st := s.Stats()
	assert.Equal(t, int64(15), st.Deferred)
	assert.Equal(t, int64(70), st.CommandsSent, "10 keys, 7 commands each")
	assert.Equal(t, 25, st.TrackedKeys)
	names := make([]string, 25)
	for i := range names {
		names[i] = "sluice:rl:{k" + strconv.Itoa(i) + "}:0"
	}
	n, err := check.Exists(ctx, names...).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(10), n, "10 counters in Redis")

	require.NoError(t, s.Flush(ctx))
	require.NoError(t, s.Flush(ctx))
	for i := range 25 {
		key := "k" + strconv.Itoa(i)
		assert.Equal(t, int64(i+1), redisCounter(t, check, "sluice:rl:{"+key+"}:0"), key)
		assert.Equal(t, int64(i+1), redisCounted(l, key), key)
	}
	assert.Zero(t, s.Stats().Failures)
}

// Close stops the goroutine, flushes what is left and leaves no goroutine
// behind; after it, Flush does nothing.
func TestRedisSyncClose(t *testing.T) {
	addr := redistest.Start(t)
	check := redisClient(t, addr)
	require.NoError(t, check.Ping(context.Background()).Err())
	ignore := goleak.IgnoreCurrent()

	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	l := redisLimiter(t, time.Minute, 100, &redisClock{})
	s, err := NewRedisSync(l, client, RedisConfig{Interval: time.Hour})
	require.NoError(t, err)
	redisAllowed(l, "k", 5)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "twice")
	assert.Equal(t, int64(5), redisCounter(t, check, "sluice:rl:{k}:0"), "the last interval's increments")

	redisAllowed(l, "k", 1)
	require.NoError(t, s.Flush(context.Background()))
	assert.Equal(t, int64(5), redisCounter(t, check, "sluice:rl:{k}:0"), "nothing after Close")
	require.NoError(t, client.Close())
	goleak.VerifyNone(t, ignore)
}

func TestNewRedisSyncRefuses(t *testing.T) {
	l := redisLimiter(t, time.Second, 1, &redisClock{})
	good := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	t.Cleanup(func() { good.Close() })
	plain := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { plain.Close() })
	for _, tc := range []struct {
		l      *Limiter
		client redis.UniversalClient
		opts   RedisConfig
		want   string
	}{
		{nil, good, RedisConfig{}, "needs a limiter and a client"},
		{l, nil, RedisConfig{}, "needs a limiter and a client"},
		{l, good, RedisConfig{Interval: -time.Second}, "negative Redis interval (-1s), timeout (0s) or batch (0)"},
		{l, good, RedisConfig{MaxBatch: -1}, "negative Redis interval (0s), timeout (0s) or batch (-1)"},
		{l, good, RedisConfig{Interval: 10 * time.Millisecond, Timeout: 20 * time.Millisecond}, "timeout 20ms is longer than the interval 10ms"},
		{l, plain, RedisConfig{}, "needs ContextTimeoutEnabled for flushes to end within 50ms"},
	} {
		_, err := NewRedisSync(tc.l, tc.client, tc.opts)
		if assert.Error(t, err, tc.want) {
			assert.Contains(t, err.Error(), tc.want)
		}
	}
	s, err := NewRedisSync(l, good, RedisConfig{Manual: true})
	require.NoError(t, err)
	assert.Equal(t, RedisStats{}, s.Stats())
	require.NoError(t, s.Close(), "nothing to flush: no round trip")
}
