package ratelimit

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"net/http"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluice-go/sluice/admit"
)

// Cost per decision, a Limiter against golang.org/x/time/rate (a token
// bucket, one *rate.Limiter per key) behind the same kind of table: the
// same number of shards, each a mutex and a map, so that the comparison is
// of like with like. Single: one goroutine; parallel: b.RunParallel, every
// CPU deciding at once. Keys: 1 (every decision on the same key, the
// worst contention), 1,000 and 100,000 (spread over the shards). The
// sliding-fixed-clock rows are the same Limiter on a clock that costs
// nothing, and BenchmarkClockRead is the clock alone.
//
//	go test -run '^$' -bench 'Decision|ClockRead' -benchtime 500ms -count 5 ./ratelimit/

var benchKeyCounts = []int{1, 1000, 100_000}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant-%06d", i)
	}
	return keys
}

// tokenBuckets is x/time/rate per key in a sharded map.
type tokenBuckets struct {
	seed   maphash.Seed
	mask   uint64
	shards []tbShard
	limit  rate.Limit
	burst  int
}

type tbShard struct {
	mu   sync.Mutex
	keys map[string]*rate.Limiter
	_    [64]byte
}

func newTokenBuckets(shards int, quota int64, window time.Duration) *tokenBuckets {
	t := &tokenBuckets{seed: maphash.MakeSeed(), mask: uint64(shards - 1), shards: make([]tbShard, shards),
		limit: rate.Every(window / time.Duration(quota)), burst: int(min(quota, math.MaxInt32))}
	for i := range t.shards {
		t.shards[i].keys = map[string]*rate.Limiter{}
	}
	return t
}

func (t *tokenBuckets) Allow(key string) bool {
	s := &t.shards[maphash.String(t.seed, key)&t.mask]
	s.mu.Lock()
	l := s.keys[key]
	if l == nil {
		l = rate.NewLimiter(t.limit, t.burst)
		s.keys[key] = l
	}
	s.mu.Unlock()
	return l.Allow()
}

type decider interface{ decide(key string) bool }

type slidingDecider struct{ l *Limiter }

func (d slidingDecider) decide(key string) bool { return d.l.Allow(key).Allowed }

type bucketDecider struct{ t *tokenBuckets }

func (d bucketDecider) decide(key string) bool { return d.t.Allow(key) }

// newDeciders returns both, with a quota so high (admitted) or so low
// (refused) that every decision goes the same way, and every key counted.
func newDeciders(b *testing.B, keys []string, quota int64) map[string]decider {
	l, err := New(Config{Window: time.Minute, Quota: quota, MaxKeys: 2 * len(keys)})
	if err != nil {
		b.Fatal(err)
	}
	// The same Limiter on a clock that costs nothing: the decision's own
	// work, without the clock read (tens of ns on a VM).
	var t0 atomic.Int64
	t0.Store(time.Now().UnixNano())
	fixed, err := New(Config{Window: time.Minute, Quota: quota, MaxKeys: 2 * len(keys), Clock: t0.Load})
	if err != nil {
		b.Fatal(err)
	}
	tb := newTokenBuckets(len(l.shards), quota, time.Minute)
	for _, k := range keys {
		l.Allow(k)
		fixed.Allow(k)
		tb.Allow(k)
	}
	return map[string]decider{"sliding": slidingDecider{l}, "sliding-fixed-clock": slidingDecider{fixed}, "x-time-rate": bucketDecider{tb}}
}

// The clock read a decision makes (the default Clock), alone.
func BenchmarkClockRead(b *testing.B) {
	l, err := New(Config{Window: time.Minute, Quota: 1})
	if err != nil {
		b.Fatal(err)
	}
	var sink int64
	for b.Loop() {
		sink += l.clock()
	}
	_ = sink
}

func BenchmarkDecision(b *testing.B) {
	for _, outcome := range []struct {
		name  string
		quota int64
	}{{"admitted", 1 << 50}, {"refused", 1}} {
		for _, nk := range benchKeyCounts {
			keys := benchKeys(nk)
			ds := newDeciders(b, keys, outcome.quota)
			for _, impl := range []string{"sliding", "sliding-fixed-clock", "x-time-rate"} {
				d := ds[impl]
				prefix := fmt.Sprintf("%s/keys=%d/%s", outcome.name, nk, impl)
				b.Run(prefix+"/single", func(b *testing.B) {
					i := 0
					for b.Loop() {
						d.decide(keys[i])
						if i++; i == nk {
							i = 0
						}
					}
				})
				b.Run(prefix+"/parallel", func(b *testing.B) {
					var start atomic.Int64
					b.RunParallel(func(pb *testing.PB) {
						i := int(start.Add(7919)) % nk
						for pb.Next() {
							d.decide(keys[i])
							if i++; i == nk {
								i = 0
							}
						}
					})
				})
			}
		}
	}
}

// The admission policy around a decision: the key from the client's
// address (no allocation) or from a header field.
//
//	go test -run '^$' -bench 'PolicyAdmit' -count 5 ./ratelimit/
func BenchmarkPolicyAdmit(b *testing.B) {
	l, err := New(Config{Window: time.Minute, Quota: 1 << 50})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		key  admit.Key
		a    func(i int) *admit.Attempt
	}{
		{"client-ipv4", admit.ClientIP(), func(i int) *admit.Attempt {
			return &admit.Attempt{Peer: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 4000)}
		}},
		{"client-ipv6", admit.ClientIP(), func(i int) *admit.Attempt {
			return &admit.Attempt{Peer: netip.AddrPortFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 6: byte(i >> 8), 7: byte(i), 15: 1}), 4000)}
		}},
		{"remote-addr", admit.ClientIP(), func(i int) *admit.Attempt {
			return &admit.Attempt{RemoteAddr: fmt.Sprintf("10.1.%d.%d:4000", i>>8&255, i&255)}
		}},
		{"header", admit.HeaderKey("X-Api-Key"), func(i int) *admit.Attempt {
			return &admit.Attempt{Header: http.Header{"X-Api-Key": {fmt.Sprintf("key-%d", i)}}}
		}},
	} {
		p, err := NewPolicy(l, PolicyConfig{Key: tc.key})
		if err != nil {
			b.Fatal(err)
		}
		as := make([]*admit.Attempt, 1000)
		for i := range as {
			as[i] = tc.a(i)
			p.Admit(as[i])
		}
		b.Run(tc.name, func(b *testing.B) {
			var start atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				i := int(start.Add(7919)) % len(as)
				for pb.Next() {
					p.Admit(as[i])
					if i++; i == len(as) {
						i = 0
					}
				}
			})
		})
	}
}

// Constant work: reloading a table of N = 100,000 keys costs the same
// whether one quota changed or all of them, since every reload reads,
// checks and parses the whole table and swaps it in whole. Each iteration
// alternates between two tables that differ by one key, or by every key.
//
//	go test -run '^$' -bench 'Reload' -count 5 ./ratelimit/
func BenchmarkReload(b *testing.B) {
	const n = DefaultMaxTableKeys
	base := make(map[string]int64, n)
	one := make(map[string]int64, n)
	all := make(map[string]int64, n)
	for i := range n {
		k := fmt.Sprintf("tenant-%06d", i)
		base[k] = int64(100 + i%1000)
		one[k] = base[k]
		all[k] = base[k] + 1
	}
	one["tenant-050000"]++
	enc := func(q map[string]int64) []byte {
		data, err := AppendTable(nil, q)
		if err != nil {
			b.Fatal(err)
		}
		return data
	}
	tables := map[string][2][]byte{
		"changed=0":      {enc(base), enc(base)},
		"changed=1":      {enc(base), enc(one)},
		"changed=100000": {enc(base), enc(all)},
	}
	for _, name := range []string{"changed=0", "changed=1", "changed=100000"} {
		pair := tables[name]
		b.Run(name, func(b *testing.B) {
			l, err := New(Config{Window: time.Minute, Quota: 1})
			if err != nil {
				b.Fatal(err)
			}
			src := &memSource{}
			r, err := NewReloader(l, src, ReloadConfig{})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(pair[0])))
			i := 0
			for b.Loop() {
				src.data = pair[i&1]
				if err := r.Reload(context.Background()); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// Memory per key: the heap a Limiter holds for 100,000 keys, each counted
// once (entry, key bytes, table slots), divided by the keys.
//
//	go test -run '^$' -bench 'MemoryPerKey' ./ratelimit/
func BenchmarkMemoryPerKey(b *testing.B) {
	const n = 100_000
	keys := benchKeys(n)
	var perKey float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		l, err := New(Config{Window: time.Minute, Quota: 10, MaxKeys: 2 * n})
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range keys {
			l.Allow(k)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if l.Stats().Keys != n {
			b.Fatalf("%d keys counted, want %d", l.Stats().Keys, n)
		}
		perKey = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(l)
	}
	b.ReportMetric(perKey, "B/key")
}
