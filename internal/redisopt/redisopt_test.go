package redisopt

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
)

func TestContextTimeoutEnabled(t *testing.T) {
	on := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	off := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, ContextTimeoutEnabled: true})
	defer on.Close()
	defer off.Close()
	defer cluster.Close()
	defer ring.Close()
	assert.True(t, ContextTimeoutEnabled(on))
	assert.False(t, ContextTimeoutEnabled(off))
	assert.False(t, ContextTimeoutEnabled(cluster))
	assert.True(t, ContextTimeoutEnabled(ring))
}
