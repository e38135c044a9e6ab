// Package redisopt holds what sluice's Redis users (ratelimit, tenant)
// check of the go-redis clients they are given.
package redisopt

import "github.com/redis/go-redis/v9"

// ContextTimeoutEnabled reports whether client applies a context's
// deadline to its network reads and writes: go-redis's own clients say so
// in their options; any other UniversalClient is trusted to.
func ContextTimeoutEnabled(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}
