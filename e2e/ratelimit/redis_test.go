// Package ratelimit_test measures ratelimit's limiter synced over Redis
// against github.com/go-redis/redis_rate (GCRA in a Redis script, one round
// trip per decision): the Redis load table and the cost per decision of
// docs/benchmarks.md ("Rate limits: distributed over Redis").
package ratelimit_test

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/ratelimit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// redisReport runs the Redis load measurement of docs/benchmarks.md and
// prints its table (ratelimit's TestRedisReport, with the same flag,
// prints the accuracy tables):
//
//	go test -run TestRedisLoadReport -v ./e2e/ratelimit/ -args -ratelimit.redis-report
var redisReport = flag.Bool("ratelimit.redis-report", false, "run the Redis load measurement (about 20 s) and print its table")

// redisRuns numbers the runs, for their key prefixes.
var redisRuns atomic.Int64

// redisClient returns a client of addr as RedisSync wants it (the
// context's deadline bounds each flush; the next flush is the retry),
// closed when the test ends.
func redisClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// redisLimiter returns a limiter on the real clock.
func redisLimiter(t testing.TB, window time.Duration, quota int64) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(ratelimit.Config{Window: window, Quota: quota})
	require.NoError(t, err)
	return l
}

// redisSync returns l's RedisSync through client, closed when the test
// ends.
func redisSync(t testing.TB, l *ratelimit.Limiter, client redis.UniversalClient, opts ratelimit.RedisConfig) *ratelimit.RedisSync {
	t.Helper()
	s, err := ratelimit.NewRedisSync(l, client, opts)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// TestRedisLoadReport prints docs/benchmarks.md's table of the Redis load
// of a synced limiter and of redis_rate; it runs only with
// -ratelimit.redis-report.
func TestRedisLoadReport(t *testing.T) {
	if !*redisReport {
		t.Skip("the long measurements run with -ratelimit.redis-report")
	}
	addr := redistest.Start(t)
	var b strings.Builder
	b.WriteString("\nRedis load, one process, 100 ms interval (2 s per row):\n\n")
	b.WriteString("| decider | keys | requests / s (offered) | decisions / s | round trips / s | commands / s (sent) | commands / s (Redis INFO) |\n|---|---|---|---|---|---|---|\n")
	for _, keys := range []int{1, 100} {
		for _, rate := range []int{1_000, 10_000, 100_000} {
			b.WriteString(redisLoad(t, addr, false, keys, rate))
		}
	}
	for _, keys := range []int{1, 100} {
		b.WriteString(redisLoad(t, addr, true, keys, 1_000))
	}
	t.Log(b.String())
}

// redisLoad offers rate decisions a second over keys for 2 s to one process
// (a synced limiter, or redis_rate when rate is set) and returns its row of
// the load table: what it sent, and what Redis counted.
func redisLoad(t testing.TB, addr string, useRate bool, keys, rate int) string {
	t.Helper()
	const length = 2 * time.Second
	check := redisClient(t, addr)
	ctx := context.Background()
	names := make([]string, keys)
	for i := range names {
		names[i] = "load-" + strconv.Itoa(i)
	}
	var decide func(key string) bool
	var s *ratelimit.RedisSync
	name := "sliding + ratelimit.RedisSync"
	if useRate {
		name = "redis_rate"
		lim := redis_rate.NewLimiter(redisClient(t, addr))
		limit := redis_rate.Limit{Rate: 1 << 30, Burst: 1 << 30, Period: time.Minute}
		decide = func(key string) bool { r, err := lim.Allow(ctx, key, limit); return err == nil && r.Allowed > 0 }
	} else {
		l := redisLimiter(t, time.Minute, 1<<40)
		s = redisSync(t, l, redisClient(t, addr), ratelimit.RedisConfig{Prefix: "load:" + strconv.FormatInt(redisRuns.Add(1), 10) + ":"})
		decide = func(key string) bool { return l.Allow(key).Allowed }
	}
	decide(names[0]) // connect, load the script
	served := func() int64 {
		v, err := check.Info(ctx, "stats").Result()
		require.NoError(t, err)
		for line := range strings.Lines(v) {
			if n, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
				c, err := strconv.ParseInt(n, 10, 64)
				require.NoError(t, err)
				return c
			}
		}
		t.Fatal("no total_commands_processed in INFO")
		return 0
	}
	var before ratelimit.RedisStats
	if s != nil {
		before = s.Stats()
	}
	server := served()
	start := time.Now()
	decided := 0
	for {
		now := time.Since(start)
		if now >= length {
			break
		}
		for due := int(float64(rate) * now.Seconds()); decided < due; decided++ {
			decide(names[decided%keys])
		}
		time.Sleep(200 * time.Microsecond)
	}
	secs := time.Since(start).Seconds()
	server = served() - server - 1 // less the INFO itself
	trips, sent := "–", "–"
	if s != nil {
		after := s.Stats()
		s.Close() // its keys would be read back for two more windows
		trips = fmt.Sprintf("%.0f", float64(after.Flushes-before.Flushes)/secs)
		sent = fmt.Sprintf("%.0f", float64(after.CommandsSent-before.CommandsSent)/secs)
	} else {
		trips = fmt.Sprintf("%.0f", float64(decided)/secs)
	}
	return fmt.Sprintf("| %s | %d | %d | %.0f | %s | %s | %.0f |\n", name, keys, rate, float64(decided)/secs, trips, sent, float64(server)/secs)
}

// redisBenchKeys are the keys the decision benchmarks spread their requests
// over, like tenants.
var redisBenchKeys = func() []string {
	k := make([]string, 100)
	for i := range k {
		k[i] = "tenant-" + strconv.Itoa(i)
	}
	return k
}()

// redisDecider is one process's way of deciding: a limiter (synced or
// not) or a redis_rate limiter.
type redisDecider func(ctx context.Context, key string) bool

// BenchmarkRedisDecision is the cost of one decision: this package's
// limiter on its own (local), the same synced over Redis every 100 ms by
// 1 or 3 RedisSyncs (each limiter with its own client, standing in for
// processes), and github.com/go-redis/redis_rate (GCRA in a Redis script,
// one round trip per decision), with 1 or 3 clients. serial is one
// goroutine deciding after another (the latency of a decision); parallel
// runs 8 goroutines per CPU, spread over the processes (the throughput).
// Every decision is admitted (the quota is huge): this measures the cost,
// not the refusals. cmds/op is the Redis commands per decision.
//
//	go test -run '^$' -bench BenchmarkRedisDecision -benchtime 2s ./e2e/ratelimit/
func BenchmarkRedisDecision(b *testing.B) {
	addr := redistest.Start(b)
	const huge = 1 << 40
	kinds := []struct {
		name  string
		procs int
		redis bool // the limiter is synced
		rate  bool // redis_rate
	}{
		{"local", 1, false, false},
		{"sliding-redis-1", 1, true, false},
		{"sliding-redis-3", 3, true, false},
		{"redis_rate-1", 1, false, true},
		{"redis_rate-3", 3, false, true},
	}
	for _, mode := range []string{"serial", "parallel"} {
		for _, k := range kinds {
			b.Run(mode+"/"+k.name, func(b *testing.B) {
				var deciders []redisDecider
				var syncs []*ratelimit.RedisSync
				var rateCmds atomic.Int64
				for range k.procs {
					if k.rate {
						lim := redis_rate.NewLimiter(redisClient(b, addr))
						limit := redis_rate.Limit{Rate: huge, Burst: huge, Period: time.Minute}
						deciders = append(deciders, func(ctx context.Context, key string) bool {
							r, err := lim.Allow(ctx, key, limit)
							rateCmds.Add(1)
							return err == nil && r.Allowed > 0
						})
						continue
					}
					l := redisLimiter(b, time.Minute, huge)
					if k.redis {
						syncs = append(syncs, redisSync(b, l, redisClient(b, addr), ratelimit.RedisConfig{}))
					}
					deciders = append(deciders, func(_ context.Context, key string) bool { return l.Allow(key).Allowed })
				}
				ctx := context.Background()
				for _, d := range deciders { // warm: scripts loaded, connections made
					require.True(b, d(ctx, redisBenchKeys[0]))
				}
				var before int64
				for _, s := range syncs {
					before += s.Stats().CommandsSent
				}
				rateCmds.Store(0)
				b.ReportAllocs()
				b.ResetTimer()
				if mode == "serial" {
					for i := 0; b.Loop(); i++ {
						if !deciders[i%len(deciders)](ctx, redisBenchKeys[i%len(redisBenchKeys)]) {
							b.Fatal("refused")
						}
					}
				} else {
					var next atomic.Int64
					b.SetParallelism(8)
					b.RunParallel(func(pb *testing.PB) {
						g := int(next.Add(1))
						d := deciders[g%len(deciders)]
						for i := g; pb.Next(); i++ {
							if !d(ctx, redisBenchKeys[i%len(redisBenchKeys)]) {
								b.Error("refused")
								return
							}
						}
					})
				}
				b.StopTimer()
				cmds := rateCmds.Load()
				for _, s := range syncs {
					cmds += s.Stats().CommandsSent
				}
				b.ReportMetric(float64(cmds-before)/float64(b.N), "cmds/op")
			})
		}
	}
}
