package ratelimit_test

import (
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/ratelimit"
)

// Every process counts its requests and decides on its own; a RedisSync
// sends its increments to Redis every 100 ms and reads back everyone's, so
// the 600 a minute per key hold across the processes.
func ExampleNewRedisSync() {
	l, err := ratelimit.New(ratelimit.Config{Window: time.Minute, Quota: 600})
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:                 []string{"127.0.0.1:6379"},
		ContextTimeoutEnabled: true, // a flush gives up after its Timeout
		MaxRetries:            -1,   // the next flush is the retry
	})
	defer rdb.Close()
	sync, err := ratelimit.NewRedisSync(l, rdb, ratelimit.RedisConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer sync.Close() // stops the goroutine and flushes the last increments

	if r := l.Allow("tenant-42"); !r.Allowed {
		log.Printf("tenant-42: over its quota of %d, retry in %v", r.Quota, r.RetryAfter)
	}
	log.Printf("flushes: %+v", sync.Stats())
}
