package ratelimit

import (
	"strings"
	"sync"
)

// slot is one window's count of a key, in three parts: the store's count
// (distributed mode), this process's increments sent and not yet confirmed
// in it, and those not yet sent. In local mode only pend is ever set.
type slot struct {
	global int64 // the store's count, as last read
	fly    int64 // taken by TakePending, not yet in global
	pend   int64 // not yet taken
}

func (s *slot) total() int64 { return s.global + s.fly + s.pend }

// entry is one key's counts: two windows, the chapter's two buckets.
type entry struct {
	hash  uint64 // of key, with the Limiter's seed
	key   string
	win   int64   // index of the window c[0] counts
	c     [2]slot // c[0]: window win; c[1]: window win−1
	quota int64   // the key's quota, read from tab
	tab   *Table  // the table quota was read from: a new table rereads it

	prev, next *entry // in the shard's list, most recently rolled first
	dirty      bool   // in the shard's dirty list (pend set since the last take)

	// The share rule (distributed mode, Limiter.SetGlobalShared): with
	// share > 1 processes active on the key at its last sync, the units
	// counted since then (since) may not exceed 1/share of the room this
	// process sees, not counting them. share ≤ 1 (local mode, one
	// process) applies nothing.
	share int32
	since int64
}

// idle reports whether nothing of e counts any more at window w: its
// windows have left the sliding window, or everything in them is zero.
// An idle key can be forgotten without changing any decision or losing
// anything a store has not been sent.
func (e *entry) idle(w int64) bool {
	switch d := w - e.win; {
	case d >= 2:
		return true
	case d == 1:
		return e.c[0].total() == 0
	default:
		return e.c[0].total() == 0 && e.c[1].total() == 0
	}
}

// shard is one lock's part of the key table: an open-addressing hash
// table of its entries (linear probing, at most half full, the hash kept
// in each slot so that a probe reads no entry but the one it finds). Its
// entries are also on a list in the order of their last window, most
// recent first, so that the tail is the stalest key: the one to take when
// a new key needs room.
type shard struct {
	mu     sync.Mutex
	slots  []ref    // len a power of two; grows up to twice max
	n      int      // entries in slots
	max    int      // entries at most
	lru    entry    // the list's sentinel
	free   []*entry // removed entries, for reuse
	over   entry    // the overflow bucket
	dirt   []*entry // entries with pend set since the last TakePending
	flying []*entry // entries taken by the last TakePending
	// tracked is set by the first TakePending: from then on, decisions
	// list the entries they make dirty (a Limiter never synced lists
	// nothing).
	tracked bool

	allowed, refused, overflowed, expired int64

	_ [64]byte // the next shard's lock on another cache line
}

// ref is a slot of the table: an entry and its hash, or nil.
type ref struct {
	hash uint64
	e    *entry
}

func (s *shard) init(max int) {
	s.max = max
	s.slots = make([]ref, 8)
	s.lru.prev, s.lru.next = &s.lru, &s.lru
}

// find returns key's entry, or nil.
func (s *shard) find(h uint64, key string) *entry {
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		r := &s.slots[i]
		if r.e == nil {
			return nil
		}
		if r.hash == h && r.e.key == key {
			return r.e
		}
	}
}

// put adds e, which is not in the table, growing it when half full.
func (s *shard) put(e *entry) {
	if 2*(s.n+1) > len(s.slots) {
		old := s.slots
		s.slots = make([]ref, 2*len(old))
		for _, r := range old {
			if r.e != nil {
				s.place(r)
			}
		}
	}
	s.place(ref{e.hash, e})
	s.n++
}

func (s *shard) place(r ref) {
	mask := uint64(len(s.slots) - 1)
	i := r.hash & mask
	for s.slots[i].e != nil {
		i = (i + 1) & mask
	}
	s.slots[i] = r
}

// drop takes e out of the table, shifting back the entries after it that
// probed past its slot (no tombstones).
func (s *shard) drop(e *entry) {
	mask := uint64(len(s.slots) - 1)
	i := e.hash & mask
	for s.slots[i].e != e {
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; s.slots[j].e != nil; j = (j + 1) & mask {
		home := s.slots[j].hash & mask
		// The entry at j may move to i unless its home lies cyclically
		// in (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			s.slots[i] = s.slots[j]
			i = j
		}
	}
	s.slots[i] = ref{}
	s.n--
}

// insert adds key (hash h) at window w and returns its entry, first
// removing up to two idle keys from the tail (idle keys expire as new ones
// come). When the shard is full of keys in use it returns the overflow
// bucket.
func (s *shard) insert(h uint64, key string, w int64) *entry {
	for range 2 {
		t := s.lru.prev
		if t == &s.lru || !t.idle(w) {
			break
		}
		s.remove(t)
		s.expired++
	}
	if s.n >= s.max {
		return &s.over
	}
	var e *entry
	if n := len(s.free); n > 0 {
		e = s.free[n-1]
		s.free[n-1] = nil
		s.free = s.free[:n-1]
	} else {
		e = new(entry)
	}
	// An entry may still be on the dirty list from its last key: it
	// stays there, and the list reports the new key's increments.
	*e = entry{hash: h, key: strings.Clone(key), win: w, dirty: e.dirty}
	s.put(e)
	s.pushFront(e)
	return e
}

// remove forgets e and keeps it for reuse.
func (s *shard) remove(e *entry) {
	s.drop(e)
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	e.key, e.tab = "", nil
	s.free = append(s.free, e)
}

func (s *shard) pushFront(e *entry) {
	e.prev, e.next = &s.lru, s.lru.next
	s.lru.next.prev = e
	s.lru.next = e
}

// roll moves e to window w: the current window becomes the previous one,
// or both are dropped after a gap, and e goes to the front of the list. A
// window before e's (a clock that went back) changes nothing.
func (s *shard) roll(e *entry, w int64) {
	d := w - e.win
	if d <= 0 {
		return
	}
	if d == 1 {
		e.c[1] = e.c[0]
		e.c[0] = slot{}
	} else {
		e.c = [2]slot{}
		e.since = 0 // its units have left the sliding window
	}
	e.win = w
	if e != &s.over && e.prev != nil && s.lru.next != e {
		e.prev.next, e.next.prev = e.next, e.prev
		s.pushFront(e)
	}
}

// dirty lists e for the next TakePending, once a store syncs this Limiter.
// The overflow bucket is this process's own and never goes to a store.
func (s *shard) dirty(e *entry) {
	if s.tracked && !e.dirty && e != &s.over {
		e.dirty = true
		s.dirt = append(s.dirt, e)
	}
}
