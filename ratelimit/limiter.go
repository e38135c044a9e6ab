package ratelimit

import (
	"github.com/sluice-go/sluice/internal/keys"

	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"runtime"
	"sync/atomic"
	"time"
)

// Unlimited is the quota of a key that is never limited (a quota table or
// Config.Overrides can exempt keys with it). Its decisions count nothing.
const Unlimited int64 = -1

// Defaults for the zero values of Config.
const (
	// DefaultMaxKeys bounds the number of keys a Limiter counts at once.
	DefaultMaxKeys = 1 << 16
	// MaxKeyLen is the longest key kept as it is: a longer one is counted
	// under its first bytes and a hash of the whole (see Limiter.Allow),
	// so that a flood of long keys cannot grow memory beyond
	// MaxKeys × MaxKeyLen bytes of keys.
	MaxKeyLen = 256
)

// Config configures a Limiter.
type Config struct {
	// Window is the length of the sliding window the quotas are counted
	// over: Quota requests (or units) per Window per key. It must be
	// positive. With a distributed store, every process must use the same
	// Window, and clocks that agree to well within it.
	Window time.Duration
	// Quota is the default quota per window of a key that has no override:
	// a positive number of units, 0 to refuse every key without an
	// override, or Unlimited. The zero Config is not valid: Quota must be
	// set explicitly, so it is an error when it is zero and Overrides is
	// empty (nothing could ever be admitted).
	Quota int64
	// Overrides are per-key quotas that replace Quota for their keys; they
	// form the Limiter's first quota table (SetTable replaces it, and a
	// Reloader keeps replacing it from a file).
	Overrides map[string]int64
	// MaxKeys bounds the number of keys counted at once, spread over the
	// shards (each holds MaxKeys/Shards, rounded up). A new key that
	// finds its shard full takes the place of the shard's stalest key if
	// that key is idle (nothing counted in the sliding window, nothing
	// waiting for the store); otherwise it is counted in the shard's
	// overflow bucket (see Overflow). Zero means DefaultMaxKeys.
	MaxKeys int
	// Overflow is the quota per window of each shard's overflow bucket,
	// which counts together the new keys that find their shard full of
	// keys in use: a flood of new keys shares it, while the keys already
	// counted keep their own counts. Zero means Quota (the bucket then
	// behaves like one more key); Unlimited lets overflowed keys through
	// uncounted.
	Overflow int64
	// Shards is the number of independently locked parts of the key
	// table, rounded up to a power of two. Zero means 8 per CPU
	// (GOMAXPROCS), at least 16, and no more than MaxKeys allows.
	Shards int
	// Clock returns the time in nanoseconds; nil means Unix time read at
	// construction and advanced by the monotonic clock (so windows line up
	// across processes, and a wall-clock step does not move them). Window
	// indexes are Clock()/Window. Tests pass a fake clock.
	Clock func() int64
}

// Limiter counts requests (or any units) per key under a sliding window and
// says whether one more fits its key's quota. It is the chapter's
// algorithm: each key has two counters, for the current window and the
// previous one, and the count under the sliding window is the current
// counter plus the previous counter weighted by the part of the previous
// window still inside the sliding window. Memory is O(1) per key and the
// number of keys is bounded (Config.MaxKeys).
//
// A Limiter is safe for concurrent use. A decision takes one clock read,
// one hash, the lock of one shard of the key table and a probe of its hash
// table, and allocates nothing for a key already counted.
//
// On its own a Limiter counts one process's requests. A store adapter
// (this package's Redis syncer) adds the other processes' counts through
// TakePending, SetGlobal and FlushFailed; decisions then count the store's
// last counts plus this process's increments not yet in them.
type Limiter struct {
	window    int64   // ns
	inv       float64 // 1 / window
	quota     int64   // default
	overQuota int64
	clock     func() int64
	seed      maphash.Seed
	shift     uint // a key's shard is its hash >> shift
	shards    []shard
	table     atomic.Pointer[Table]
	mark      atomic.Pointer[windowMark] // the latest window seen
}

// windowMark is a window's index and start, kept so that a decision in the
// current window divides nothing.
type windowMark struct{ index, start int64 }

// New returns a Limiter for cfg. It fails, naming the value, for a window
// that is not positive, a quota that is negative but not Unlimited, or a
// configuration that could never admit anything.
func New(cfg Config) (*Limiter, error) {
	var errs []error
	if cfg.Window <= 0 {
		errs = append(errs, fmt.Errorf("Config.Window is %v: it must be positive (the length of the sliding window, for example time.Minute)", cfg.Window))
	}
	if cfg.Quota < 0 && cfg.Quota != Unlimited {
		errs = append(errs, fmt.Errorf("Config.Quota is %d: use a count of units per window, 0 (refuse) or ratelimit.Unlimited", cfg.Quota))
	}
	if cfg.Quota == 0 && len(cfg.Overrides) == 0 {
		errs = append(errs, errors.New("Config.Quota is 0 and there are no Overrides: every request would be refused; set the quota per window"))
	}
	if cfg.Overflow < 0 && cfg.Overflow != Unlimited {
		errs = append(errs, fmt.Errorf("Config.Overflow is %d: use a count of units per window, zero (Quota) or ratelimit.Unlimited", cfg.Overflow))
	}
	if cfg.MaxKeys < 0 {
		errs = append(errs, fmt.Errorf("Config.MaxKeys is %d: it must not be negative (zero means %d)", cfg.MaxKeys, DefaultMaxKeys))
	}
	if cfg.Shards < 0 || cfg.Shards > 1<<16 {
		errs = append(errs, fmt.Errorf("Config.Shards is %d: use 1 to 65536, or zero for 8 per CPU", cfg.Shards))
	}
	tab, err := newTable(cfg.Overrides)
	if err != nil {
		errs = append(errs, fmt.Errorf("Config.Overrides: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("ratelimit: %w", err)
	}
	maxKeys := cfg.MaxKeys
	if maxKeys == 0 {
		maxKeys = DefaultMaxKeys
	}
	n := cfg.Shards
	if n == 0 {
		n = max(16, 8*runtime.GOMAXPROCS(0))
	}
	n = 1 << bits.Len(uint(n-1)) // round up to a power of two
	for n > 1 && n > maxKeys {
		n >>= 1
	}
	l := &Limiter{
		window:    int64(cfg.Window),
		inv:       1 / float64(cfg.Window),
		quota:     cfg.Quota,
		overQuota: cfg.Overflow,
		clock:     cfg.Clock,
		seed:      maphash.MakeSeed(),
		shift:     uint(64 - bits.Len(uint(n-1))),
		shards:    make([]shard, n),
	}
	if l.overQuota == 0 {
		l.overQuota = l.quota
	}
	if l.clock == nil {
		epoch := time.Now()
		base := epoch.UnixNano()
		l.clock = func() int64 { return base + int64(time.Since(epoch)) }
	}
	per := (maxKeys + n - 1) / n
	for i := range l.shards {
		l.shards[i].init(per)
	}
	l.table.Store(tab)
	l.mark.Store(&windowMark{index: math.MinInt64, start: math.MinInt64})
	return l, nil
}

// Result is a decision of a Limiter.
type Result struct {
	// Allowed reports whether the units fitted the quota, and were
	// counted.
	Allowed bool
	// Overflow reports that the key was counted in its shard's overflow
	// bucket (the key table was full of keys in use): Quota is then the
	// bucket's.
	Overflow bool
	// Quota is the key's quota per window, or Unlimited.
	Quota int64
	// Remaining is what is left of the quota under the sliding window
	// after this decision, rounded down (zero or more; math.MaxInt64
	// when Unlimited). It is the quota's, not this process's share of it
	// (Limiter.SetGlobalShared): a refusal by the share rule can leave
	// room, which other processes, or this one after the next sync, admit
	// into.
	Remaining int64
	// RetryAfter, for a refusal, is how long until the sliding window has
	// room for the same units again, if nothing else is counted
	// meanwhile; negative when they never fit (more units than the
	// quota). It is zero for an admission, and 1 ns for a refusal by the
	// share rule (the quota has room; the next sync gives this process
	// its share of it).
	RetryAfter time.Duration
}

// Allow decides for one unit (one request) of key, and counts it if it
// fits. Keys longer than MaxKeyLen bytes are counted under their first
// bytes and a hash of the whole, which allocates.
func (l *Limiter) Allow(key string) Result { return l.decide(key, 1, false) }

// AllowN decides for n units of key (bytes of a body, a batch of n
// operations) and counts them if they all fit; n <= 0 only reports the
// key's state.
func (l *Limiter) AllowN(key string, n int64) Result { return l.decide(key, n, false) }

// Charge counts n units of key whether or not they fit, for work already
// done (the bytes of a body read after its request was admitted): later
// decisions of key see them. It returns the state after counting.
func (l *Limiter) Charge(key string, n int64) Result { return l.decide(key, n, true) }

// Refund takes back n units counted for key in the current or the previous
// window and not yet sent to a store, for an admission that did not run
// after all (a later policy refused the request). A refund that finds
// fewer units than n in both windows does nothing.
func (l *Limiter) Refund(key string, n int64) {
	if n <= 0 {
		return
	}
	key = shorten(key)
	w, _ := l.windowOf(l.clock())
	h, s := l.shardOf(key)
	s.mu.Lock()
	e := s.find(h, key)
	if e == nil {
		e = &s.over
	}
	s.roll(e, w)
	switch {
	case e.c[0].pend >= n:
		e.c[0].pend -= n
	case e.c[1].pend >= n:
		e.c[1].pend -= n
	}
	s.mu.Unlock()
}

// Window returns the window length.
func (l *Limiter) Window() time.Duration { return time.Duration(l.window) }

// Quota returns key's quota per window: its override in the current table,
// or the default.
func (l *Limiter) Quota(key string) int64 { return l.table.Load().quotaOr(shorten(key), l.quota) }

// SetTable replaces the per-key quotas with t, atomically: decisions made
// after it returns use t (the default quota stays). A nil t removes every
// override.
func (l *Limiter) SetTable(t *Table) {
	if t == nil {
		t = emptyTable
	}
	l.table.Store(t)
}

// Table returns the per-key quotas in force.
func (l *Limiter) Table() *Table { return l.table.Load() }

// Stats are a Limiter's counters.
type Stats struct {
	// Keys is the number of keys counted now.
	Keys int
	// Allowed and Refused count decisions (Charge counts as allowed).
	Allowed, Refused int64
	// Overflowed counts decisions made in an overflow bucket because the
	// key table was full of keys in use.
	Overflowed int64
	// Expired counts idle keys removed to make room or by Sweep.
	Expired int64
}

// Stats returns the counters, summed over the shards.
func (l *Limiter) Stats() Stats {
	var st Stats
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		st.Keys += s.n
		st.Allowed += s.allowed
		st.Refused += s.refused
		st.Overflowed += s.overflowed
		st.Expired += s.expired
		s.mu.Unlock()
	}
	return st
}

// Sweep removes every idle key now (keys whose counts have all left the
// sliding window and that have nothing waiting for a store), and lets the
// memory of the removed entries go (each shard's slot array keeps its
// size). New keys remove idle ones as they come, so Sweep only matters to
// give memory back after a burst of keys: call it from a ticker if that
// matters. It holds each shard's lock while it walks that shard's keys.
func (l *Limiter) Sweep() {
	w, _ := l.windowOf(l.clock())
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for t := s.lru.prev; t != &s.lru; {
			prev := t.prev
			if t.idle(w) {
				s.remove(t)
				s.expired++
			}
			t = prev
		}
		clear(s.free)
		s.free = s.free[:0]
		s.mu.Unlock()
	}
}

// windowOf returns the index of the window that now falls in, and how far
// into it now is.
func (l *Limiter) windowOf(now int64) (w, elapsed int64) {
	m := l.mark.Load()
	if e := now - m.start; e >= 0 && e < l.window && m.start != math.MinInt64 {
		return m.index, e
	}
	w = now / l.window
	if now%l.window < 0 {
		w--
	}
	start := w * l.window
	if start > m.start {
		l.mark.Store(&windowMark{index: w, start: start}) // once per window
	}
	return w, now - start
}

// shardOf returns key's hash and shard: the shard is chosen by the high
// bits of the hash, the slot within it by the low ones.
func (l *Limiter) shardOf(key string) (uint64, *shard) {
	h := maphash.String(l.seed, key)
	return h, &l.shards[h>>l.shift]
}

// decide is every decision: it counts n units of key if they fit (or
// always, with force) and says what is left.
func (l *Limiter) decide(key string, n int64, force bool) Result {
	key = shorten(key)
	n = max(n, 0)
	tab := l.table.Load()
	w, elapsed := l.windowOf(l.clock())
	h, s := l.shardOf(key)
	s.mu.Lock()
	e := s.find(h, key)
	if e == nil {
		e = s.insert(h, key, w)
	}
	quota := l.overQuota
	if e != &s.over {
		if e.tab != tab {
			e.quota, e.tab = tab.quotaOr(e.key, l.quota), tab
		}
		quota = e.quota
	} else {
		s.overflowed++
	}
	if e.win > w {
		// A later clock reading rolled the key after ours was taken (or
		// the clock went back): count at the start of the key's window.
		w, elapsed = e.win, 0
	}
	s.roll(e, w)
	if quota == Unlimited {
		s.allowed++
		s.mu.Unlock()
		return Result{Allowed: true, Overflow: e == &s.over, Quota: Unlimited, Remaining: math.MaxInt64}
	}
	a, b := e.c[0].total(), e.c[1].total()
	weight := float64(l.window-elapsed) * l.inv
	count := float64(a) + float64(b)*weight
	r := Result{Overflow: e == &s.over, Quota: quota}
	fits := count+float64(n) <= float64(quota)
	// The share rule: since the last sync, this process may count 1/share
	// of the room it sees, not counting what it counted since.
	shared := e.share > 1 && fits && n > 0 &&
		float64(e.since+n)*float64(e.share) > float64(quota)-count+float64(e.since)
	if force || fits && !shared {
		if n > 0 {
			e.c[0].pend += n
			e.since += n
			s.dirty(e)
		}
		s.allowed++
		r.Allowed = true
		r.Remaining = remaining(quota, count+float64(n))
		s.mu.Unlock()
		return r
	}
	s.refused++
	s.mu.Unlock()
	r.Remaining = remaining(quota, count)
	if shared {
		// The quota has room, but this process has admitted its share of
		// it until the next sync: retry after a moment (Policy rounds it
		// up to a second).
		r.RetryAfter = 1
		return r
	}
	r.RetryAfter = time.Duration(waitFor(a, b, n, quota, elapsed, l.window))
	return r
}

// remaining is quota - count, rounded down, at least zero.
func remaining(quota int64, count float64) int64 {
	left := float64(quota) - count
	if left <= 0 {
		return 0
	}
	return int64(left)
}

// waitFor returns the time from elapsed into the current window until n
// more units fit quota, with a counted in the current window and b in the
// previous one and nothing counted meanwhile; -1 when n exceeds the quota.
// The previous window's weight falls linearly to zero at the end of the
// current window; after it, the current window's weight falls the same way
// through the next one.
func waitFor(a, b, n, quota, elapsed, window int64) int64 {
	if n > quota {
		return -1
	}
	w := float64(window)
	if a+n <= quota {
		if b <= 0 {
			return 1 // only rounding stands in the way
		}
		// b × (window − t) / window ≤ quota − n − a  ⇔  t ≥ window − (quota−n−a) × window / b
		at := int64(math.Ceil(w - float64(quota-n-a)*w/float64(b)))
		return max(at-elapsed, 1)
	}
	// In the next window, a weighs a × (window − t) / window.
	at := int64(math.Ceil(w - float64(quota-n)*w/float64(a)))
	return window - elapsed + max(at, 0)
}

// shorten returns key, or for a key longer than MaxKeyLen its first bytes
// followed by "#" and a hash of the whole (keys.Shorten): the same name in
// every process, so that a store counts it as one key.
func shorten(key string) string { return keys.Shorten(key, MaxKeyLen) }
