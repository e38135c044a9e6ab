package ratelimit

import "math"

// The seam for store adapters (the distributed mode: this package's Redis
// syncer):
// a syncer goroutine takes this process's increments, sends them to a
// shared store in one batch of atomic increments, and records the
// cluster-wide counts it reads back, while workers keep deciding. Each
// window of a key then counts three parts: the store's count as last read
// (global), increments sent and not yet confirmed in it (in flight), and
// increments not yet sent (pending). A decision counts all three; a
// Limiter that no store syncs has only pending increments, never taken.
//
// The protocol, one flush at a time:
//
//	l.TakePending(add)         // increments → batch, now in flight
//	err := store.Flush(batch)  // INCRBY key:window delta, EXPIRE, ...
//	if err != nil {
//		l.FlushFailed()        // back to pending, sent with the next flush
//	} else {
//		for each key: l.SetGlobalShared(key, window, cur, prev, processes)
//	}
//
// None of these allocates once the Limiter has listed its dirty keys, and
// each holds one shard's lock at a time, for as long as its callback runs
// on that shard's keys: callbacks must be quick and must not call the
// Limiter.

// TakePending calls fn for each key with local increments not yet sent to
// the store, with the window index (Clock()/Window) they belong to and
// their sum, and marks them in flight. A key with increments in both the
// current window and the previous one is reported once per window; older
// increments no longer count for anyone and are dropped. delta is always
// positive. Increments counted in an overflow bucket are never reported:
// the bucket is this process's own.
//
// The first call also starts the listing of dirty keys by the decisions
// (before it, a Limiter lists nothing, so a local-only Limiter keeps no
// list), and so finds the keys counted before it by a walk of the whole
// table.
func (l *Limiter) TakePending(fn func(key string, window int64, delta int64)) {
	w, _ := l.windowOf(l.clock())
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		if !s.tracked {
			s.tracked = true
			for _, r := range s.slots {
				if e := r.e; e != nil && !e.dirty && (e.c[0].pend > 0 || e.c[1].pend > 0) {
					e.dirty = true
					s.dirt = append(s.dirt, e)
				}
			}
		}
		clear(s.flying)
		s.flying = s.flying[:0]
		for _, e := range s.dirt {
			e.dirty = false
			if e.key == "" {
				continue // removed since, and not reused
			}
			s.roll(e, w)
			took := false
			for j := range e.c {
				if d := e.c[j].pend; d > 0 {
					fn(e.key, e.win-int64(j), d)
					e.c[j].fly += d
					e.c[j].pend = 0
					took = true
				}
			}
			if took {
				s.flying = append(s.flying, e)
			}
		}
		clear(s.dirt)
		s.dirt = s.dirt[:0]
		s.mu.Unlock()
	}
}

// SetGlobal records the store's cluster-wide counts of key for window and
// window−1, read after a flush that included this process's in-flight
// increments for that key; in-flight increments of key for those windows
// are then no longer counted separately (they are in the store's counts).
// It is SetGlobalShared with one process: no share rule.
//
// A count never goes below the last one recorded plus the increments then
// in flight: a late answer, or a store that lost its data, cannot give back
// quota that was used. Counts for a
// window older than the previous one, or ahead of this process's clock,
// are ignored. A key this process does not count yet is added if its
// counts are not zero and its shard has room (an idle key may make room;
// the overflow bucket never takes the store's counts).
func (l *Limiter) SetGlobal(key string, window int64, cur, prev int64) {
	l.SetGlobalShared(key, window, cur, prev, 1)
}

// SetGlobalShared is SetGlobal for a key that n processes are admitting
// into (as the store counts them), and it applies the share rule until the
// next sync of key: with n > 1, the units this process counts from now on
// may not exceed 1/n of the room it sees, not counting them: the quota
// less the sliding window's count without them, which is the room at this
// sync plus what the sliding window has let go of since. The processes,
// each admitting its share of the same room, then cannot together exceed
// it before they see each other's increments, which without the rule they
// can by up to (n−1) × room. Charge counts against the share but is never
// refused.
//
// With n ≤ 1 (or an Unlimited quota) the rule is lifted. It also lapses
// when the key's increments go back to pending (FlushFailed: the store
// did not answer, and no sync would end the share). A key that goes quiet
// keeps its n: a burst after a pause is shared from its first unit.
func (l *Limiter) SetGlobalShared(key string, window int64, cur, prev int64, n int) {
	key = shorten(key)
	tab := l.table.Load()
	w, _ := l.windowOf(l.clock())
	if window > w || window < w-1 {
		return
	}
	h, s := l.shardOf(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.find(h, key)
	if e == nil {
		if cur <= 0 && prev <= 0 {
			return
		}
		if e = s.insert(h, key, w); e == &s.over {
			return
		}
	}
	s.roll(e, w)
	switch e.win - window {
	case 0:
		e.c[0].confirm(cur)
		e.c[1].confirm(prev)
	case 1:
		e.c[1].confirm(cur)
	}
	e.since = 0
	if e.tab != tab {
		e.quota, e.tab = tab.quotaOr(e.key, l.quota), tab
	}
	e.share = 0
	if n > 1 && e.quota != Unlimited {
		e.share = int32(min(n, math.MaxInt32))
	}
}

// confirm records the store's count n, read after the increments in flight
// were added to it. The store then holds at least what it held before plus
// those increments: a lower count (a store that lost its data, an answer
// overtaken by a later one) cannot give back quota that was used.
func (s *slot) confirm(n int64) {
	s.global = max(s.global+s.fly, n)
	s.fly = 0
}

// FlushFailed puts the increments in flight back to pending (the store did
// not take them), so that the next TakePending reports them again;
// decisions keep counting them meanwhile. Increments whose window has left
// the sliding window are dropped.
func (l *Limiter) FlushFailed() {
	w, _ := l.windowOf(l.clock())
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for _, e := range s.flying {
			if e.key == "" {
				continue
			}
			s.roll(e, w)
			for j := range e.c {
				if f := e.c[j].fly; f > 0 {
					e.c[j].pend += f
					e.c[j].fly = 0
					e.share = 0 // no sync comes to end the share
					s.dirty(e)
				}
			}
		}
		clear(s.flying)
		s.flying = s.flying[:0]
		s.mu.Unlock()
	}
}
