package ratelimit

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/redistest"
)

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
//	go test -run '^$' -bench BenchmarkRedisDecision -benchtime 2s ./ratelimit/
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
				var syncs []*RedisSync
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
					l := redisLimiter(b, time.Minute, huge, nil)
					if k.redis {
						syncs = append(syncs, redisSync(b, l, redisClient(b, addr), RedisConfig{}))
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

// BenchmarkRedisFlush is one flush's time (one pipelined round trip) by
// the number of keys it sends (MaxBatch lifted): every key has new
// increments each time (INCRBY, GET of the previous window, SADD and two
// SCARD of the sets of active processes). A flush must end within
// RedisConfig.Timeout (50 ms by default), which is what
// RedisConfig.MaxBatch (2048 keys by default) keeps it to.
//
//	go test -run '^$' -bench BenchmarkRedisFlush ./ratelimit/
func BenchmarkRedisFlush(b *testing.B) {
	addr := redistest.Start(b)
	for _, keys := range []int{1, 100, 1000, 10_000, 50_000} {
		b.Run(strconv.Itoa(keys)+"-keys", func(b *testing.B) {
			names := make([]string, keys)
			for i := range names {
				names[i] = "tenant-" + strconv.Itoa(i)
			}
			l := redisLimiter(b, time.Minute, 1<<40, nil)
			s := redisSync(b, l, redisClient(b, addr), RedisConfig{Manual: true, Interval: 10 * time.Second, MaxBatch: keys})
			ctx := context.Background()
			for b.Loop() {
				b.StopTimer()
				for _, k := range names {
					l.Allow(k)
				}
				b.StartTimer()
				if err := s.Flush(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(s.Stats().CommandsSent)/float64(s.Stats().Flushes), "cmds/flush")
		})
	}
}
