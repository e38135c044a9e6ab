package ratelimit

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewNamesTheBadValue(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Quota: 1}, "Config.Window is 0s"},
		{Config{Window: -time.Second, Quota: 1}, "Config.Window is -1s"},
		{Config{Window: time.Second, Quota: -5}, "Config.Quota is -5"},
		{Config{Window: time.Second}, "Config.Quota is 0 and there are no Overrides"},
		{Config{Window: time.Second, Quota: 1, Overflow: -2}, "Config.Overflow is -2"},
		{Config{Window: time.Second, Quota: 1, MaxKeys: -1}, "Config.MaxKeys is -1"},
		{Config{Window: time.Second, Quota: 1, Shards: -3}, "Config.Shards is -3"},
		{Config{Window: time.Second, Quota: 1, Overrides: map[string]int64{"a b": 1}}, `key "a b": spaces`},
		{Config{Window: time.Second, Quota: 1, Overrides: map[string]int64{"k": -7}}, `key "k": quota -7`},
	} {
		_, err := New(tc.cfg)
		if assert.Error(t, err, "%+v", tc.cfg) {
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "ratelimit: "), err.Error())
		}
	}
	_, err := New(Config{Window: time.Second, Overrides: map[string]int64{"vip": 5}})
	assert.NoError(t, err, "quota 0 with overrides: only the listed keys get through")
}

// The chapter's weighting: the count under the sliding window is the
// current bucket plus the previous bucket times the part of the previous
// window still inside the sliding window.
func TestSlidingWindowWeighting(t *testing.T) {
	l, clk := newLimiter(t, Config{Window: 10 * time.Second, Quota: 10, Shards: 1})

	assert.Equal(t, 10, allowN(l, "k", 15), "a fresh key gets its whole quota")
	clk.set(9 * time.Second)
	assert.False(t, l.Allow("k").Allowed, "same window")

	// 2.5 s into the next window, 75% of the previous one is still
	// inside: 7.5 counted, 2 more fit (9.5), a third would make 10.5.
	clk.set(12500 * time.Millisecond)
	r := l.Allow("k")
	assert.True(t, r.Allowed)
	assert.Equal(t, int64(1), r.Remaining, "10 − (7.5 + 1) = 1.5, rounded down")
	assert.True(t, l.Allow("k").Allowed)
	r = l.Allow("k")
	assert.False(t, r.Allowed)
	assert.Equal(t, int64(0), r.Remaining, "10 − 9.5 rounds down to 0")
	assert.Equal(t, int64(10), r.Quota)

	// 7.5 s in: 25% of 10 = 2.5, plus the current 2 = 4.5: 5 more fit.
	clk.set(17500 * time.Millisecond)
	assert.Equal(t, 5, allowN(l, "k", 10))

	// Two windows later nothing of the old counts is inside.
	clk.set(30 * time.Second)
	assert.Equal(t, 10, allowN(l, "k", 15), "window 3: window 1 (7 counted) has left the sliding window")
}

func TestWindowBoundaries(t *testing.T) {
	l, clk := newLimiter(t, Config{Window: time.Second, Quota: 4, Shards: 1})
	clk.set(time.Second - 1) // the last nanosecond of window 0
	assert.Equal(t, 4, allowN(l, "k", 9))
	clk.set(time.Second) // the first of window 1: the previous weighs 100%
	assert.False(t, l.Allow("k").Allowed)
	clk.set(time.Second + 250*time.Millisecond) // 75%: 3 counted
	assert.Equal(t, 1, allowN(l, "k", 9))
	clk.set(2*time.Second - 1) // 1 ns of window 0 is left inside: 4e-9 counted
	assert.Equal(t, 2, allowN(l, "k", 9), "1 + 2 fit; a fourth would make 4.000000004")
	clk.set(2 * time.Second) // window 2: window 1 (3) weighs 100%
	assert.Equal(t, 1, allowN(l, "k", 9))
	clk.set(3 * time.Second) // window 3: window 2 (1) weighs 100%
	assert.Equal(t, 3, allowN(l, "k", 9))
	clk.set(5 * time.Second) // window 5: nothing in window 4
	assert.Equal(t, 4, allowN(l, "k", 9))
	// A clock that goes back counts in the window the key is in.
	clk.set(4500 * time.Millisecond)
	assert.False(t, l.Allow("k").Allowed)
}

func TestRetryAfter(t *testing.T) {
	l, clk := newLimiter(t, Config{Window: 10 * time.Second, Quota: 10, Shards: 1})
	allowN(l, "k", 10)
	// Window 0 is full: room comes in window 1 once 10 × (10 − t)/10 ≤ 9,
	// at t = 1 s: 10 s − 2 s + 1 s = 9 s from 2 s.
	clk.set(2 * time.Second)
	r := l.Allow("k")
	require.False(t, r.Allowed)
	assert.Equal(t, 9*time.Second, r.RetryAfter)
	clk.set(11 * time.Second)
	assert.True(t, l.Allow("k").Allowed, "it is right: room at 11 s")
	assert.False(t, l.Allow("k").Allowed)

	// Five units: 10 × (10 − 1)/10 = 9 plus 1 counted now; 5 fit when
	// the previous weighs 4 or less: at t = 6 s, 5 s from now.
	r = l.AllowN("k", 5)
	require.False(t, r.Allowed)
	assert.Equal(t, 5*time.Second, r.RetryAfter)

	// More than the quota never fits.
	r = l.AllowN("k", 11)
	assert.False(t, r.Allowed)
	assert.Equal(t, time.Duration(-1), r.RetryAfter)
}

func TestOverridesUnlimitedAndZero(t *testing.T) {
	l, _ := newLimiter(t, Config{Window: time.Minute, Quota: 3, Shards: 1,
		Overrides: map[string]int64{"gold": 5, "free": Unlimited, "banned": 0}})
	assert.Equal(t, 3, allowN(l, "anyone", 10))
	assert.Equal(t, 5, allowN(l, "gold", 10))
	assert.Equal(t, 1000, allowN(l, "free", 1000))
	r := l.Allow("free")
	assert.Equal(t, Unlimited, r.Quota)
	assert.Equal(t, int64(math.MaxInt64), r.Remaining)
	r = l.Allow("banned")
	assert.False(t, r.Allowed)
	assert.Equal(t, time.Duration(-1), r.RetryAfter)
	assert.Equal(t, int64(5), l.Quota("gold"))
	assert.Equal(t, int64(3), l.Quota("other"))

	// A new table takes effect at the next decision, for keys already
	// counted too.
	tab, err := NewTable(map[string]int64{"anyone": 6})
	require.NoError(t, err)
	l.SetTable(tab)
	assert.Equal(t, 3, allowN(l, "anyone", 10), "3 more under its new quota of 6")
	assert.Equal(t, 0, allowN(l, "gold", 10), "gold is back to the default 3, and used 5")
	l.SetTable(nil)
	assert.Equal(t, 0, l.Table().Len())
}

// Idle keys expire: a new key takes the place of the stalest idle one.
// When the table is full of keys in use, new keys share the overflow
// bucket and the keys in use keep their counts.
func TestBoundedKeysEvictIdleElseOverflow(t *testing.T) {
	l, clk := newLimiter(t, Config{Window: time.Second, Quota: 2, MaxKeys: 2, Overflow: 3, Shards: 1})
	assert.Equal(t, 2, allowN(l, "a", 5))
	assert.Equal(t, 2, allowN(l, "b", 5))

	// Full of keys in use: c and d share the overflow bucket (3).
	r := l.Allow("c")
	assert.True(t, r.Allowed)
	assert.True(t, r.Overflow)
	assert.Equal(t, int64(3), r.Quota)
	assert.Equal(t, 2, allowN(l, "d", 5))
	assert.Equal(t, 0, allowN(l, "c", 5), "the bucket is shared")
	assert.Equal(t, 0, allowN(l, "a", 5), "a kept its count")
	st := l.Stats()
	assert.Equal(t, 2, st.Keys)
	assert.Equal(t, int64(0), st.Expired)
	assert.Equal(t, int64(11), st.Overflowed)

	// One window on, a and b still count (their window weighs 100%):
	// still no room.
	clk.set(time.Second)
	assert.True(t, l.Allow("c").Overflow)

	// Two windows on, both are idle: c takes a slot of its own, and the
	// idle keys go (up to two per new key).
	clk.set(2 * time.Second)
	r = l.Allow("c")
	assert.False(t, r.Overflow)
	assert.Equal(t, int64(2), r.Quota)
	st = l.Stats()
	assert.Equal(t, 1, st.Keys)
	assert.Equal(t, int64(2), st.Expired)
	assert.Equal(t, 2, allowN(l, "a", 5), "a starts afresh")
}

// A key that is kept busy is never evicted, whatever else arrives; the
// stalest idle key goes first.
func TestStalestIdleKeyGoesFirst(t *testing.T) {
	l, clk := newLimiter(t, Config{Window: time.Second, Quota: 10, MaxKeys: 3, Shards: 1})
	l.Allow("old")
	clk.set(time.Second)
	l.Allow("mid")
	clk.set(2 * time.Second)
	l.Allow("busy")
	// At window 3, "old" (window 0) and "mid" (window 1) are idle, "busy"
	// (window 2) is not. A new key removes both idle ones.
	clk.set(3 * time.Second)
	l.Allow("busy")
	l.Allow("new")
	st := l.Stats()
	assert.Equal(t, 2, st.Keys)
	assert.Equal(t, int64(2), st.Expired)
	assert.Equal(t, 8, allowN(l, "busy", 20), "busy kept its counts: 1 in window 2, 1 in window 3")
}

func TestFloodOfRandomKeysIsBounded(t *testing.T) {
	l, _ := newLimiter(t, Config{Window: time.Minute, Quota: 5, MaxKeys: 256, Shards: 4})
	require.Equal(t, 5, allowN(l, "victim", 10))
	for i := range 100_000 {
		l.Allow(fmt.Sprintf("random-%d", i))
	}
	st := l.Stats()
	assert.LessOrEqual(t, st.Keys, 256)
	assert.Greater(t, st.Overflowed, int64(99_000))
	assert.False(t, l.Allow("victim").Allowed, "the flood did not reset the victim's count")
	// The flood got at most the overflow buckets' quota: 4 shards × 5,
	// plus the keys that found room.
	assert.LessOrEqual(t, st.Allowed, int64(5+4*5+256))
}

func TestChargeAndRefund(t *testing.T) {
	l, clk := newLimiter(t, Config{Window: time.Second, Quota: 100, Shards: 1})
	r := l.Charge("k", 150)
	assert.True(t, r.Allowed, "a charge is counted whatever it makes")
	assert.Equal(t, int64(0), r.Remaining)
	assert.False(t, l.Allow("k").Allowed)
	l.Refund("k", 60)
	assert.Equal(t, 10, allowN(l, "k", 20))
	l.Refund("k", 1000) // more than counted: nothing
	assert.False(t, l.Allow("k").Allowed)
	// A refund after the window rolled takes from the previous window.
	clk.set(time.Second)
	l.Refund("k", 100)
	assert.Equal(t, 100, allowN(l, "k", 200))
	r = l.AllowN("k", 0)
	assert.True(t, r.Allowed, "zero units always fit: AllowN(k, 0) only reports")
	assert.Equal(t, int64(0), r.Remaining)
}

func TestLongKeysAreShortened(t *testing.T) {
	l, _ := newLimiter(t, Config{Window: time.Second, Quota: 2, Shards: 1})
	long := strings.Repeat("x", 1000)
	other := strings.Repeat("x", 999) + "y"
	assert.Equal(t, 2, allowN(l, long, 5))
	assert.Equal(t, 2, allowN(l, other, 5), "a different long key with the same start is another key")
	k := shorten(long)
	assert.Len(t, k, MaxKeyLen)
	assert.Equal(t, k, shorten(long), "the same name each time")
	assert.Equal(t, strings.Repeat("x", MaxKeyLen-17)+"#", k[:MaxKeyLen-16])
}

// Under contention every unit is counted once: with the clock stopped,
// exactly the quota is allowed across all goroutines.
func TestConcurrentDecisionsCountExactly(t *testing.T) {
	l, _ := newLimiter(t, Config{Window: time.Minute, Quota: 1000, Shards: 4})
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := map[string]int{}
	for g := range 8 {
		wg.Go(func() {
			got := map[string]int{}
			for i := range 3000 {
				k := fmt.Sprintf("k%d", (i+g)%3)
				if l.Allow(k).Allowed {
					got[k]++
				}
			}
			mu.Lock()
			for k, n := range got {
				allowed[k] += n
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	assert.Equal(t, map[string]int{"k0": 1000, "k1": 1000, "k2": 1000}, allowed)
}

func TestDecisionsDoNotAllocate(t *testing.T) {
	l, _ := newLimiter(t, Config{Window: time.Minute, Quota: math.MaxInt32})
	l.Allow("tenant-42")
	assert.Zero(t, testing.AllocsPerRun(1000, func() { l.Allow("tenant-42") }))
	assert.Zero(t, testing.AllocsPerRun(1000, func() { l.AllowN("tenant-42", 10) }))
	assert.Zero(t, testing.AllocsPerRun(1000, func() { l.Refund("tenant-42", 1) }))
}

func TestSweepRemovesIdleKeys(t *testing.T) {
	l, clk := newLimiter(t, Config{Window: time.Second, Quota: 2, Shards: 2})
	for i := range 50 {
		l.Allow(fmt.Sprint(i))
	}
	clk.set(time.Second)
	l.Allow("7")
	l.Sweep()
	assert.Equal(t, 50, l.Stats().Keys, "nothing is idle yet")
	clk.set(2 * time.Second)
	l.Sweep()
	st := l.Stats()
	assert.Equal(t, 1, st.Keys, "only 7, counted in window 1, still weighs")
	assert.Equal(t, int64(49), st.Expired)
}
