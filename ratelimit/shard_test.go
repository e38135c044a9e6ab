package ratelimit

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The open-addressing table against a map, with hashes that collide a lot
// (few distinct values, clustered slots, wrap-around at the end of the
// array), through growth and deletions.
func TestShardTableAgainstAMap(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	var s shard
	s.init(1 << 20)
	want := map[string]*entry{}
	hashOf := func(k string) uint64 {
		var h uint64
		for _, c := range []byte(k) {
			h = h*31 + uint64(c)
		}
		return h % 13 * 0x9E3779B97F4A7C15 >> 3 // 13 distinct hashes
	}
	for step := range 20_000 {
		k := fmt.Sprint("k", r.IntN(300))
		h := hashOf(k)
		if e := want[k]; e != nil {
			require.Same(t, e, s.find(h, k), "step %d: %s", step, k)
			if r.IntN(2) == 0 {
				s.drop(e)
				delete(want, k)
				require.Nil(t, s.find(h, k))
			}
		} else {
			require.Nil(t, s.find(h, k), "step %d: %s", step, k)
			e := &entry{hash: h, key: k}
			s.put(e)
			want[k] = e
		}
		require.Equal(t, len(want), s.n)
	}
	for k, e := range want {
		require.Same(t, e, s.find(hashOf(k), k))
	}
	require.LessOrEqual(t, 2*s.n, len(s.slots))
}
