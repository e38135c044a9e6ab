package ratelimit

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pending is one report of TakePending.
type pending struct {
	key    string
	window int64
	delta  int64
}

func take(l *Limiter) []pending {
	var got []pending
	l.TakePending(func(key string, window, delta int64) { got = append(got, pending{key, window, delta}) })
	return got
}

func TestTakePendingMarksInFlight(t *testing.T) {
	l, clk := newLimiter(t, Config{Window: time.Second, Quota: 10, Shards: 1})
	assert.Equal(t, 3, allowN(l, "a", 3))
	// The first take finds what was counted before it.
	assert.Equal(t, []pending{{"a", 0, 3}}, take(l))
	assert.Empty(t, take(l), "in flight, not pending: nothing more to send")
	// In-flight increments still count.
	assert.Equal(t, 7, allowN(l, "a", 10))
	assert.Equal(t, []pending{{"a", 0, 7}}, take(l))

	// Increments of two windows are reported once per window.
	l.Allow("b")
	clk.set(time.Second)
	l.Allow("b")
	l.Allow("b")
	got := take(l)
	assert.ElementsMatch(t, []pending{{"b", 1, 2}, {"b", 0, 1}}, got)

	// Older ones no longer count for anyone: dropped.
	l.Allow("c")
	clk.set(3 * time.Second)
	assert.Empty(t, take(l))
}

func TestSetGlobalReplacesInFlight(t *testing.T) {
	l, clk := newLimiter(t, Config{Window: 10 * time.Second, Quota: 100, Shards: 1})
	assert.Equal(t, 10, allowN(l, "k", 10))
	require.Equal(t, []pending{{"k", 0, 10}}, take(l))
	assert.Equal(t, 5, allowN(l, "k", 5), "pending again")

	// The store says 60 in window 0 (our 10 and 50 of others): 60 + 5
	// pending count, 35 fit.
	l.SetGlobal("k", 0, 60, 0)
	assert.Equal(t, 35, allowN(l, "k", 50))
	assert.Equal(t, []pending{{"k", 0, 40}}, take(l))

	// A late or lower answer never gives quota back.
	l.SetGlobal("k", 0, 20, 0)
	assert.Equal(t, 0, allowN(l, "k", 5))

	// Next window: the store's count of window 0 weighs like our own.
	clk.set(15 * time.Second) // 50% of window 0
	l.SetGlobal("k", 1, 10, 100)
	// 10 (window 1) + 100 × 0.5 = 60: 40 fit.
	assert.Equal(t, 40, allowN(l, "k", 100))

	// Windows out of range are ignored.
	l.SetGlobal("k", 5, 1000, 1000)
	l.SetGlobal("k", -1, 1000, 1000)
	clk.set(19 * time.Second)
	assert.Equal(t, 40, allowN(l, "k", 100), "10 + 40 in window 1 and 10% of window 0's 100: 60; the ignored counts changed nothing")
}

func TestSetGlobalAddsAKeyTheStoreCounts(t *testing.T) {
	l, _ := newLimiter(t, Config{Window: time.Second, Quota: 5, MaxKeys: 1, Shards: 1})
	l.SetGlobal("zero", 0, 0, 0)
	assert.Equal(t, 0, l.Stats().Keys, "nothing to remember")
	l.SetGlobal("remote", 0, 4, 0)
	assert.Equal(t, 1, allowN(l, "remote", 5), "other processes used 4")
	// The table is full (1 key in use): a store's count does not go to
	// the overflow bucket.
	l.SetGlobal("other", 0, 5, 0)
	assert.Equal(t, 1, l.Stats().Keys)
	r := l.Allow("other")
	assert.True(t, r.Overflow)
}

func TestFlushFailedPutsBackToPending(t *testing.T) {
	l, clk := newLimiter(t, Config{Window: time.Second, Quota: 10, Shards: 2})
	allowN(l, "a", 4)
	allowN(l, "b", 2)
	require.ElementsMatch(t, []pending{{"a", 0, 4}, {"b", 0, 2}}, take(l))
	l.Allow("a")
	l.FlushFailed()
	assert.Equal(t, 5, allowN(l, "a", 10), "still counted: 4 + 1, and 5 more")
	assert.ElementsMatch(t, []pending{{"a", 0, 10}, {"b", 0, 2}}, take(l), "sent again with the new ones")
	l.FlushFailed()
	l.FlushFailed() // nothing in flight: a no-op
	// Back to pending, then the window rolls: the next take reports them
	// under their own window.
	clk.set(time.Second)
	l.Allow("b")
	assert.ElementsMatch(t, []pending{{"b", 1, 1}, {"a", 0, 10}, {"b", 0, 2}}, take(l))
}

func TestOverflowIsNeverSent(t *testing.T) {
	l, _ := newLimiter(t, Config{Window: time.Second, Quota: 10, MaxKeys: 1, Shards: 1})
	take(l) // start tracking
	l.Allow("a")
	r := l.Allow("b")
	require.True(t, r.Overflow)
	assert.Equal(t, []pending{{"a", 0, 1}}, take(l))
}

func TestRefundDoesNotTouchInFlight(t *testing.T) {
	l, _ := newLimiter(t, Config{Window: time.Second, Quota: 3, Shards: 1})
	allowN(l, "k", 3)
	take(l)
	l.Refund("k", 1)
	assert.False(t, l.Allow("k").Allowed, "sent increments stay counted")
	assert.Empty(t, take(l), "deltas are never negative")
}

// A reused entry keeps its place on the dirty list, which then reports its
// new key.
func TestEvictedEntryOnTheDirtyList(t *testing.T) {
	l, clk := newLimiter(t, Config{Window: time.Second, Quota: 5, MaxKeys: 1, Shards: 1})
	take(l)
	l.Allow("old") // listed dirty
	clk.set(2 * time.Second)
	l.Allow("new") // takes old's entry
	assert.Equal(t, []pending{{"new", 2, 1}}, take(l))
}

// store is a fake shared store: counts per key and window, with the
// increments applied atomically under one lock, as a batch of INCRBY.
type store struct {
	mu     sync.Mutex
	counts map[string]int64
	fail   atomic.Bool
}

func (s *store) name(key string, window int64) string { return fmt.Sprintf("%s:%d", key, window) }

// flush is one syncer round: take, send, read back or fail.
func (s *store) flush(l *Limiter) {
	var batch []pending
	l.TakePending(func(key string, window, delta int64) { batch = append(batch, pending{key, window, delta}) })
	if s.fail.Load() {
		l.FlushFailed()
		return
	}
	s.mu.Lock()
	type kw struct {
		key string
		w   int64
	}
	read := map[kw][2]int64{}
	for _, p := range batch {
		s.counts[s.name(p.key, p.window)] += p.delta
	}
	for _, p := range batch {
		read[kw{p.key, p.window}] = [2]int64{s.counts[s.name(p.key, p.window)], s.counts[s.name(p.key, p.window-1)]}
	}
	s.mu.Unlock()
	for k, c := range read {
		l.SetGlobal(k.key, k.w, c[0], c[1])
	}
}

// Three processes share one key through a fake store while their workers
// decide and their syncers flush, with failures: no increment is lost or
// counted twice, and what was allowed stays near the quota.
func TestThreeProcessesShareAKey(t *testing.T) {
	clk := &fakeClock{}
	st := &store{counts: map[string]int64{}}
	const quota = 3000
	var lims []*Limiter
	for range 3 {
		l, err := New(Config{Window: time.Hour, Quota: quota, Shards: 4, Clock: clk.now})
		require.NoError(t, err)
		lims = append(lims, l)
	}
	var allowed atomic.Int64
	var workers, syncers sync.WaitGroup
	stop := make(chan struct{})
	for _, l := range lims {
		syncers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					st.flush(l)
					return
				default:
				}
				st.fail.Store(i%5 == 4) // every fifth flush fails
				st.flush(l)
				time.Sleep(100 * time.Microsecond)
			}
		})
		for range 2 {
			workers.Go(func() {
				for i := range 4000 {
					if l.Allow("shared").Allowed {
						allowed.Add(1)
					}
					l.Allow(fmt.Sprint("own", i%7))
					if i%20 == 19 {
						time.Sleep(50 * time.Microsecond) // let the syncers run
					}
				}
			})
		}
	}
	workers.Wait()
	close(stop)
	syncers.Wait()
	st.fail.Store(false)
	for _, l := range lims {
		st.flush(l) // whatever a failed last flush put back
	}
	assert.Equal(t, allowed.Load(), st.counts["shared:0"], "every allowed request reached the store once")
	assert.GreaterOrEqual(t, allowed.Load(), int64(quota))
	assert.LessOrEqual(t, allowed.Load(), int64(3*quota), "at worst each process its own quota")
	t.Logf("allowed %d against a quota of %d (overshoot %.1f%%)", allowed.Load(), quota, 100*float64(allowed.Load()-quota)/quota)
}

// The share rule: after SetGlobalShared with n processes, the units a
// process counts until the next sync may not exceed 1/n of the room it
// sees without them (the quota less the sliding count).
func TestSetGlobalSharedBudget(t *testing.T) {
	l, clk := newLimiter(t, Config{Window: time.Second, Quota: 100, Shards: 1})
	take(l) // synced from now on

	// 40 counted cluster-wide, 3 processes: 60 of room, 20 for this one.
	l.SetGlobalShared("k", 0, 40, 0, 3)
	assert.Equal(t, 20, allowN(l, "k", 30))
	r := l.Allow("k")
	assert.False(t, r.Allowed, "share used up")
	assert.Equal(t, int64(40), r.Remaining, "the quota's remaining, not the share's")
	assert.Equal(t, time.Duration(1), r.RetryAfter, "room after the next sync")
	assert.True(t, l.Charge("k", 5).Allowed, "Charge is never refused")
	assert.False(t, l.AllowN("k", 1).Allowed)
	assert.True(t, l.AllowN("k", 0).Allowed, "0 units fit any share")

	// The next sync: 90 counted (this one's 25 and 25 elsewhere): 10 of
	// room, 3 of it for this one, counted afresh.
	assert.Equal(t, []pending{{"k", 0, 25}}, take(l))
	l.SetGlobalShared("k", 0, 90, 0, 3)
	assert.Equal(t, 3, allowN(l, "k", 10))
	assert.Equal(t, []pending{{"k", 0, 3}}, take(l))

	// Half-way through window 1, window 0's 93 weigh 46.5 and 10 are
	// counted in window 1: room 43.5, 21 for this one.
	clk.set(1500 * time.Millisecond)
	l.SetGlobalShared("k", 1, 10, 93, 2)
	assert.Equal(t, 21, allowN(l, "k", 30))
	// A late answer for the previous window still sets a budget: window
	// 0's count stays 93 (counts never go down), room 43.5 − 21 = 22.5,
	// 11 for this one.
	take(l)
	l.SetGlobalShared("k", 0, 93, 0, 2)
	assert.Equal(t, 11, allowN(l, "k", 30))

	// One process: no share, the quota alone (room 22.5 − 11 = 11.5).
	take(l)
	l.SetGlobal("k", 1, 0, 0)
	assert.Equal(t, 11, allowN(l, "k", 30))
	// No room at the sync: nothing.
	take(l)
	l.SetGlobalShared("k", 1, 0, 0, 5)
	assert.Zero(t, allowN(l, "k", 5))
}

// The share rule lapses when no sync can end it: after FlushFailed (the
// store did not answer). A key that went quiet keeps it: a burst is shared
// from its first unit. An Unlimited key never has one.
func TestSetGlobalSharedLapses(t *testing.T) {
	l, clk := newLimiter(t, Config{Window: time.Second, Quota: 100, Overrides: map[string]int64{"free": Unlimited}, Shards: 1})
	l.Allow("k")
	take(l)
	l.SetGlobalShared("k", 0, 1, 0, 4) // room 99, 24 for this one
	assert.Equal(t, 24, allowN(l, "k", 30))
	take(l)
	l.FlushFailed()
	assert.Equal(t, 75, allowN(l, "k", 100), "the whole quota, as before the rule")

	take(l)
	clk.set(time.Second)
	l.SetGlobalShared("k", 1, 0, 100, 4)
	assert.Zero(t, allowN(l, "k", 10), "no room")
	clk.set(3 * time.Second)
	assert.Equal(t, 25, allowN(l, "k", 200), "quiet for a window: a quarter of the quota")
	take(l)
	l.SetGlobalShared("k", 3, 25, 0, 1)
	assert.Equal(t, 75, allowN(l, "k", 200), "alone now")

	l.Allow("free")
	l.SetGlobalShared("free", 3, 0, 0, 4)
	assert.Equal(t, 200, allowN(l, "free", 200))

	// A limiter never synced, or synced with one process, decides as
	// before, whatever it counted since.
	local, _ := newLimiter(t, Config{Window: time.Second, Quota: 100, Shards: 1})
	assert.Equal(t, 100, allowN(local, "k", 200))
}

// A decision under the share rule allocates nothing.
func TestSetGlobalSharedAllocs(t *testing.T) {
	l, _ := newLimiter(t, Config{Window: time.Second, Quota: 1 << 40, Shards: 1})
	take(l)
	l.SetGlobalShared("k", 0, 0, 0, 3)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { l.Allow("k") }))
}
