package ratelimit

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redistest"
)

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
