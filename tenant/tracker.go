package tenant

import (
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/keys"
)

// Reason is the rejection reason of a request dropped for its tenant's
// share, in Sluice-Reject-Reason and in the pipeline's counters.
const Reason = "tenant-share"

// MaxNameLen bounds a tenant's name as the tracker keeps and reports it: a
// longer name (the header's value is the client's choice) becomes its
// first bytes and a hash of the whole, the same on every server. Names are
// also made valid UTF-8 (each invalid byte sequence becomes U+FFFD), so
// that they can be Prometheus labels and JSON strings.
const MaxNameLen = 256

// Config configures a Tracker. The zero value works: tenants named by the
// X-Tenant header, the 128 heaviest tracked by name, enforcement on.
type Config struct {
	// Key names a request's tenant; zero means admit.HeaderKey("X-Tenant").
	// A request without one counts under Other.
	Key admit.Key
	// Tenants is how many tenants the tracker follows by name; the rest
	// are pooled under Other. Those followed are the ones the drop table
	// names, then the ones with the most requests in the last period.
	// Zero means 128. Memory is bounded by it, whatever names arrive.
	Tenants int
	// RetryAfter is the Retry-After of a drop's answer; zero means 1 s
	// (about one control period), negative means none.
	RetryAfter time.Duration
	// Off starts the tracker with enforcement off: it counts and
	// reports, but drops nothing until SetEnforce(true).
	Off bool
	// HashSeed seeds the hash that places the names not followed yet in
	// their candidate cells. Zero picks a random one, so that clients
	// cannot choose names that collide; a simulation that must replay
	// exactly gives its own.
	HashSeed uint64
}

// Tracker is the tenant policy of an admission pipeline. In the pipeline
// (admit.Config.Policies) it counts each tenant's requests, admissions,
// rejections and blame, and drops each tenant's share of requests that the
// drop table gives it, before they start: answered 429 with Retry-After
// and the reason "tenant-share", not started, safe to retry later.
//
// Drops are spread evenly: a tenant with a drop fraction f has about
// n·f of its next n requests refused (a count of the drops it owes, not a
// coin flip), so small fractions are exact too. The refusals of the stages
// before the tracker count: a request the age limit refuses pays for a
// drop the tenant owes, so that the tenant loses f of its requests in all,
// not f of what the age limit left. While an overload's line stands, the
// dropped tenant's requests get the standing line's short limit, which
// refuses most of them already: dropping f of the few young enough on top
// left a worker with none to start, idle while the line was refused.
//
// An Agent runs the tracker's period: it collects a Report, pushes it to
// the store, reads the drop table and applies it. Without an agent, call
// Collect and Apply yourself.
//
// The hot path takes no lock and allocates nothing: the tenant's key,
// compared with the tenant of the Attempt's last request (a keep-alive
// connection's requests are usually one tenant's) or else looked up, and
// two atomic additions on the tenant's counters of the request's shard:
// one as it arrives, one as it ends.
type Tracker struct {
	key      admit.Key
	size     int
	refusal  *admit.Refusal
	enforce  atomic.Bool
	dropping atomic.Bool // the table applied drops some tenant
	roster   atomic.Pointer[roster]
	other    atomic.Pointer[slot]
	cands    []candidate
	seed     uint64       // of the names' hash
	shards   atomic.Int64 // the counter shards of the slots made from now on (Env.Shards)

	attached atomic.Bool
	mu       sync.Mutex           // Collect, Apply, Stats, Attach
	closed   func() time.Duration // the pipeline's gates-closed time, or nil
	closedAt time.Duration        // its reading at the last Collect
	trims    bool                 // the pipeline trims a dropped tenant's excess (admit.Env.TrimsShares)
	table    Table
	retired  []*slot
	totals   map[string]Usage
}

// roster is the set of tenants followed by name; it is replaced whole
// (copy on write) and read without a lock.
type roster struct {
	slots map[string]*slot
}

// slot holds one tenant's counters since the last Collect, one set per
// counter shard of the pipeline (admit.Env.Shards, picked by
// admit.Attempt.Shard: one per worker on the sluice server), and its drop
// state. The counters are padded and the slots allocated each on their
// own, so that requests on different workers, of the same tenant or not,
// add to no shared cache line; only the drops owed are shared, and only
// changed while the tenant has a drop fraction.
//
// A slot stays in an Attempt (admit.Attempt.Tenant) after its request
// ends, and the next request of that Attempt with the same key takes it
// again without a lookup (see Tracker.slotOf) until Collect retires it: a
// slot is followed by name, or a candidate's, from its creation until a
// Collect leaves it out of the roster, and never again after.
type slot struct {
	name    string
	owner   *Tracker
	shards  []counts
	retired atomic.Bool   // set once, when a Collect leaves it out of the roster
	drop    atomic.Uint64 // fraction of requests to drop, in 2^-32 units
	beyond  atomic.Bool   // the table drops the tenant (drop may be 0 on a trimming server)
	_       [64]byte
	owed    atomic.Int64 // drops owed, in 2^-32 requests (owe), never negative
	_       [56]byte
}

// counts are one shard's counters of a slot, a cache line's worth.
//
// A request that ends is counted with one addition: ended packs the number
// admitted (above endedShift) and their busy time (below, in ns), and is
// emptied into admitted and busy (spill) before either part can overflow,
// by the addition that takes it past half of its range; a request that
// ran longer than maxPacked is added to admitted and busy directly.
type counts struct {
	requests atomic.Int64
	ended    atomic.Uint64
	admitted atomic.Int64
	rejected atomic.Int64
	dropped  atomic.Int64
	blame    atomic.Int64
	busy     atomic.Int64
	_        [8]byte
}

const (
	endedShift = 40
	busyMask   = 1<<endedShift - 1
	// maxPacked bounds the latency packed in ended: the spill threshold
	// plus eight such additions (racing to the threshold on one shard)
	// still fit in the busy part.
	maxPacked  = 1 << (endedShift - 4)
	spillBusy  = 1 << (endedShift - 1)
	spillEnded = 1 << (64 - endedShift - 1)
	endedOne   = 1 << endedShift
)

// end counts an admitted request that ran for lat.
func (c *counts) end(lat time.Duration) {
	if lat < 0 || lat >= maxPacked {
		c.admitted.Add(1)
		c.busy.Add(int64(max(lat, 0)))
		return
	}
	if v := c.ended.Add(endedOne | uint64(lat)); v&busyMask >= spillBusy || v>>endedShift >= spillEnded {
		c.spill()
	}
}

// spill empties ended into admitted and busy.
func (c *counts) spill() {
	v := c.ended.Swap(0)
	c.admitted.Add(int64(v >> endedShift))
	c.busy.Add(int64(v & busyMask))
}

// newSlot returns empty counters for the tenant name, with as many shards
// as the tracker's pipeline has.
func (t *Tracker) newSlot(name string) *slot {
	return &slot{name: name, owner: t, shards: make([]counts, t.shards.Load())}
}

// at returns the counters of the shard a request names (admit.Attempt's
// Shard); out of range means the first.
func (s *slot) at(shard int) *counts {
	if uint(shard) < uint(len(s.shards)) {
		return &s.shards[shard]
	}
	return &s.shards[0]
}

// take returns the slot's counts since the last take, summed over its
// shards, and resets them.
func (s *slot) take() Usage {
	u := Usage{Tenant: s.name}
	for i := range s.shards {
		c := &s.shards[i]
		c.spill()
		u.Requests += c.requests.Swap(0)
		u.Admitted += c.admitted.Swap(0)
		u.Rejected += c.rejected.Swap(0)
		u.Dropped += c.dropped.Swap(0)
		u.Blame += time.Duration(c.blame.Swap(0))
		u.Busy += time.Duration(c.busy.Swap(0))
	}
	return u
}

// candidate is a name not followed yet, counted to find the heavy ones
// (Misra-Gries: each name has two cells; a name that finds both taken
// wears down the lighter one and takes it once it is worn out). Once it
// has been seen nameAfter times its name is kept and it gets counters of
// its own (slot): its requests from then on are reported under its name
// (not pooled under Other) from the very period it came, and a cell with
// counters is not worn down before the next Collect. A flood of names that
// each come once allocates nothing.
type candidate struct {
	hash atomic.Uint64
	hits atomic.Int64
	name atomic.Pointer[string]
	slot atomic.Pointer[slot]
}

const (
	defaultTenants  = 128
	candidatesPer   = 4 // candidate cells per followed tenant
	nameAfter       = 4
	defaultKeyField = "X-Tenant"
)

// New returns a Tracker configured by opts; it fails for settings that
// cannot work.
func New(opts Config) (*Tracker, error) {
	if opts.Tenants < 0 {
		return nil, fmt.Errorf("tenant: Config.Tenants %d: must be zero (the default, %d) or positive", opts.Tenants, defaultTenants)
	}
	key := opts.Key
	if key.IsZero() {
		key = admit.HeaderKey(defaultKeyField)
	}
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("tenant: Config.Key: %w", err)
	}
	size := cmp.Or(opts.Tenants, defaultTenants)
	retry := opts.RetryAfter
	if retry == 0 {
		retry = time.Second
	}
	ncand := 1
	for ncand < size*candidatesPer {
		ncand <<= 1
	}
	t := &Tracker{
		key:     key,
		size:    size,
		refusal: &admit.Refusal{Reason: Reason, Status: 429, RetryAfter: retry},
		cands:   make([]candidate, ncand),
		seed:    opts.HashSeed,
		totals:  make(map[string]Usage),
	}
	for t.seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		t.seed = binary.LittleEndian.Uint64(b[:])
	}
	t.enforce.Store(!opts.Off)
	t.shards.Store(1)
	t.other.Store(&slot{name: Other, shards: make([]counts, 1)})
	t.roster.Store(&roster{slots: map[string]*slot{}})
	return t, nil
}

var _ interface {
	admit.Policy
	admit.BlameUser
	admit.Attacher
	admit.Unasked
} = (*Tracker)(nil)

// Attach implements admit.Attacher: the tracker reads its pipeline's
// gates-closed time for its reports, and keeps its counters in as many
// shards as the pipeline has. A Tracker serves one pipeline: give each
// server its own.
func (t *Tracker) Attach(env admit.Env) (detach func(), err error) {
	if !t.attached.CompareAndSwap(false, true) {
		return nil, errors.New("tenant: this Tracker is already in another pipeline's policies: build one Tracker per server")
	}
	t.mu.Lock()
	t.closed = env.GatesClosed
	if t.trims != env.TrimsShares {
		t.trims = env.TrimsShares
		t.setDrops()
	}
	if t.closed != nil {
		t.closedAt = t.closed()
	}
	t.reshard(max(env.Shards, 1))
	t.mu.Unlock()
	if name, ok := t.key.HeaderName(); ok && env.PickHeader != nil {
		env.PickHeader(name) // the tenant without a map lookup
	}
	return func() {
		t.mu.Lock()
		t.closed = nil
		if t.trims {
			t.trims = false
			t.setDrops()
		}
		t.mu.Unlock()
		t.attached.Store(false)
	}, nil
}

// reshard makes the slots of the tenants followed, and Other's, anew with
// n shards each; the old ones are retired (their counts are reported at the
// next Collect). The candidates' slots get n shards from the next Collect
// on. Called with mu held.
func (t *Tracker) reshard(n int) {
	if int64(n) == t.shards.Load() {
		return
	}
	t.shards.Store(int64(n))
	cur := t.roster.Load()
	next := &roster{slots: make(map[string]*slot, len(cur.slots))}
	for name, s := range cur.slots {
		ns := t.newSlot(name)
		ns.drop.Store(s.drop.Load())
		ns.beyond.Store(s.beyond.Load())
		next.slots[name] = ns
		s.retired.Store(true)
		t.retired = append(t.retired, s)
	}
	old := t.other.Load()
	other := &slot{name: Other, shards: make([]counts, n)}
	other.drop.Store(old.drop.Load())
	other.beyond.Store(old.beyond.Load())
	t.retired = append(t.retired, old)
	t.other.Store(other)
	t.roster.Store(next)
}

// UsesBlame implements admit.BlameUser: the pipeline measures blame.
func (t *Tracker) UsesBlame() bool { return true }

// Admit implements admit.Policy: it finds the request's tenant and drops
// the request if the tenant's share says so.
func (t *Tracker) Admit(a *admit.Attempt) *admit.Refusal {
	s := t.slotOf(a)
	a.Tenant = s
	c := s.at(a.Shard)
	c.requests.Add(1)
	if f := s.drop.Load(); f != 0 && t.enforce.Load() && s.owe(f, false) {
		c.dropped.Add(1)
		a.Tenant = nil
		return t.refusal
	}
	return nil
}

// wholeRequest is a whole request in the 2^-32 units of drop and owed.
const wholeRequest = 1 << 32

// owe adds a request of a tenant whose drop fraction is f (2^-32 units)
// to the drops it owes, and reports whether to drop it: when a whole
// drop is owed. A request refused already (refused: by a stage before the
// tracker) pays for one instead, as far as one is owed, its own share
// included: what is owed never goes below zero, so refusals of other causes
// never earn a tenant requests beyond its share.
func (s *slot) owe(f uint64, refused bool) bool {
	for {
		o := s.owed.Load()
		n := o + int64(f)
		drop := !refused && n >= wholeRequest
		if drop || refused {
			n = max(n-wholeRequest, 0)
		}
		if s.owed.CompareAndSwap(o, n) {
			return drop
		}
	}
}

// Share implements admit.ShareKeeper: while enforcement is on and the drop
// table drops some tenant, a request of a tenant that it drops is beyond
// its share, and one of any other tenant within it. A request within its
// share keeps the full age limit while an overload's line stands, and a
// dropped tenant's requests get the lower one; on a server that trims
// (admit.Env.TrimsShares) they wait at most half the age limit in any case,
// and behind everyone else's in the queue. So when a
// drop is too small to bring its tenant within its share, the overload
// left is refused from that tenant's requests. Without drops it answers
// admit.ShareUnknown: every request gets the lower limit.
func (t *Tracker) Share(a *admit.Attempt) admit.Share {
	if !t.dropping.Load() || !t.enforce.Load() {
		return admit.ShareUnknown
	}
	if t.lookup(a).beyond.Load() {
		return admit.ShareBeyond
	}
	return admit.ShareWithin
}

// lookup returns the counters of a's tenant as slotOf does, without
// counting the request towards following its tenant by name: Share
// asks of a request that Admit or Unasked then counts.
func (t *Tracker) lookup(a *admit.Attempt) *slot {
	var buf [admit.KeyBufLen]byte
	if name, ok := t.key.Of(&buf, a); ok {
		name = keys.Label(name, MaxNameLen)
		if named := t.roster.Load().slots[name]; named != nil {
			return named
		}
		h := t.hash(name)
		mask := uint64(len(t.cands) - 1)
		for _, c := range [2]*candidate{&t.cands[h&mask], &t.cands[(h>>32)&mask]} {
			if c.hash.Load() == h {
				if s := c.slot.Load(); s != nil {
					return s
				}
			}
		}
	}
	return t.other.Load()
}

// Unasked implements admit.Unasked: a request refused before the tracker
// was asked (too old, out of time, over a quota) counts as its tenant's
// request, and as rejected.
func (t *Tracker) Unasked(a *admit.Attempt, _ *admit.Refusal) {
	s := t.slotOf(a)
	c := s.at(a.Shard)
	c.requests.Add(1)
	c.rejected.Add(1)
	if f := s.drop.Load(); f != 0 && t.enforce.Load() {
		s.owe(f, true)
	}
}

// slotOf returns the counters of a's tenant: followed by name, a
// candidate's own, or Other's. The slot that a's last request had
// (a.Tenant) is taken again when it is this tracker's, has a's key for
// name and is not retired: what the roster or the candidate cells would
// give, without looking.
func (t *Tracker) slotOf(a *admit.Attempt) *slot {
	var buf [admit.KeyBufLen]byte
	if name, ok := t.key.Of(&buf, a); ok {
		name = keys.Label(name, MaxNameLen)
		if last, _ := a.Tenant.(*slot); last != nil && last.owner == t && last.name == name && !last.retired.Load() {
			return last
		}
		if named := t.roster.Load().slots[name]; named != nil {
			return named
		}
		if c := t.observe(name); c != nil {
			return c
		}
	}
	return t.other.Load()
}

// Done implements admit.Policy: it adds the request's outcome and blame
// to its tenant.
func (t *Tracker) Done(a *admit.Attempt, o admit.Outcome) {
	s, _ := a.Tenant.(*slot)
	if s == nil {
		return
	}
	c := s.at(a.Shard)
	if o.Canceled {
		c.rejected.Add(1)
		return
	}
	if o.Blame > 0 {
		c.blame.Add(int64(o.Blame))
	}
	c.end(o.Latency)
}

// hash hashes a name with the tracker's HashSeed (FNV-1a over its bytes
// and the name's, then splitmix64's finisher, so that both halves of the
// result spread); it is never zero, the mark of an empty candidate cell.
func (t *Tracker) hash(name string) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for i := range 8 {
		h = (h ^ (t.seed >> (8 * i) & 0xff)) * prime
	}
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * prime
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h | 1
}

// observe counts a name that is not followed, in its candidate cells,
// and returns the counters it has there, or nil (its request then counts
// under Other).
func (t *Tracker) observe(name string) *slot {
	h := t.hash(name)
	mask := uint64(len(t.cands) - 1)
	c1, c2 := &t.cands[h&mask], &t.cands[(h>>32)&mask]
	for _, c := range [2]*candidate{c1, c2} {
		if c.hash.Load() != h {
			continue
		}
		if s := c.slot.Load(); s != nil {
			return s
		}
		if c.hits.Add(1) >= nameAfter {
			n := strings.Clone(name)
			s := t.newSlot(n)
			if c.slot.CompareAndSwap(nil, s) {
				c.name.Store(&n)
			}
			return c.slot.Load()
		}
		return nil
	}
	for _, c := range [2]*candidate{c1, c2} {
		if c.hash.Load() == 0 && c.hash.CompareAndSwap(0, h) {
			c.hits.Store(1)
			return nil
		}
	}
	lighter := c1
	if c2.slot.Load() == nil && (c1.slot.Load() != nil || c2.hits.Load() < c1.hits.Load()) {
		lighter = c2
	}
	if lighter.slot.Load() == nil && lighter.hits.Add(-1) <= 0 {
		if old := lighter.hash.Load(); old != h && lighter.hash.CompareAndSwap(old, h) {
			lighter.hits.Store(1)
		}
	}
	return nil
}

// SetEnforce switches enforcement on or off, live: off, the tracker still
// counts and reports, and drops nothing.
func (t *Tracker) SetEnforce(on bool) { t.enforce.Store(on) }

// Enforcing reports whether enforcement is on.
func (t *Tracker) Enforcing() bool { return t.enforce.Load() }

// Collect returns the counts since the last Collect, as the server's
// report for a period of the given length (Server and Seq are the
// agent's), and chooses the tenants followed by name for the next period:
// those the drop table names first, then the most requested, up to
// Config.Tenants.
func (t *Tracker) Collect(period time.Duration) Report {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := Report{Period: period}
	if t.closed != nil {
		c := t.closed()
		r.Closed, t.closedAt = max(c-t.closedAt, 0), c
	}
	cur := t.roster.Load()
	type ranked struct {
		name     string
		requests int64
		pinned   bool
	}
	var rank []ranked
	add := func(u Usage) {
		if u.Requests == 0 && u.Blame == 0 && u.Busy == 0 {
			return
		}
		for i := range r.Tenants {
			if r.Tenants[i].Tenant == u.Tenant {
				r.Tenants[i] = sum(r.Tenants[i], u)
				return
			}
		}
		r.Tenants = append(r.Tenants, u)
	}
	for name, s := range cur.slots {
		u := s.take()
		add(u)
		_, pinned := t.table.Drops[name]
		rank = append(rank, ranked{name, u.Requests, pinned})
	}
	for _, s := range t.retired {
		add(s.take()) // requests that ended after their tenant was retired
	}
	add(t.other.Load().take())
	// The candidates' first requests are in Other's counts, the rest in
	// their own, reported under their names; the heavy ones are followed
	// by name from now on, keeping their counters (requests still running
	// hold them). A cell that gets its counters between the reading and
	// the reset below loses the few requests counted in them.
	mask := uint64(len(t.cands) - 1)
	fresh := map[string]*slot{}
	var cleared []*slot // every candidate's counters, to retire those not kept
	for i := range t.cands {
		c := &t.cands[i]
		h := c.hash.Load()
		p, sl := c.name.Load(), c.slot.Load()
		if sl != nil {
			cleared = append(cleared, sl)
		}
		if p != nil && sl != nil && h != 0 && t.hash(*p) == h && (h&mask == uint64(i) || (h>>32)&mask == uint64(i)) {
			if _, ok := cur.slots[*p]; !ok && fresh[*p] == nil {
				u := sl.take()
				add(u)
				fresh[*p] = sl
				rank = append(rank, ranked{*p, max(c.hits.Load(), u.Requests), false})
			}
		}
		c.hash.Store(0)
		c.hits.Store(0)
		c.name.Store(nil)
		c.slot.Store(nil)
	}
	for name := range t.table.Drops {
		if _, ok := cur.slots[name]; !ok && name != Other {
			rank = append(rank, ranked{name, 0, true})
		}
	}
	slices.SortFunc(rank, func(a, b ranked) int {
		if a.pinned != b.pinned {
			if a.pinned {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(b.requests, a.requests), strings.Compare(a.name, b.name))
	})
	next := &roster{slots: make(map[string]*slot, min(len(rank), t.size))}
	for _, k := range rank[:min(len(rank), t.size)] {
		s := cur.slots[k.name]
		if s == nil {
			s = fresh[k.name]
		}
		if s == nil {
			s = t.newSlot(k.name)
		}
		t.setDrop(s, t.table.Drops[k.name])
		next.slots[k.name] = s
	}
	t.retired = t.retired[:0]
	for name, s := range cur.slots {
		if next.slots[name] == nil {
			t.retired = append(t.retired, s)
		}
	}
	for name, s := range fresh {
		if next.slots[name] == nil {
			t.retired = append(t.retired, s)
		}
	}
	for _, s := range t.retired {
		s.retired.Store(true)
	}
	for _, s := range cleared {
		if next.slots[s.name] != s {
			s.retired.Store(true)
		}
	}
	t.roster.Store(next)
	for _, u := range r.Tenants {
		t.totals[u.Tenant] = sum(t.totals[u.Tenant], u)
	}
	if len(t.totals) > 4*t.size {
		t.trimTotals()
	}
	slices.SortFunc(r.Tenants, func(a, b Usage) int { return strings.Compare(a.Tenant, b.Tenant) })
	return r
}

// trimTotals keeps the running totals of the tenants still followed and
// folds the others into Other. Called with mu held.
func (t *Tracker) trimTotals() {
	cur := t.roster.Load()
	for name, u := range t.totals {
		if _, ok := cur.slots[name]; !ok && name != Other {
			t.totals[Other] = sum(t.totals[Other], u)
			delete(t.totals, name)
		}
	}
}

func sum(a, b Usage) Usage {
	a.Tenant = cmp.Or(a.Tenant, b.Tenant)
	a.Requests += b.Requests
	a.Admitted += b.Admitted
	a.Rejected += b.Rejected
	a.Dropped += b.Dropped
	a.Blame += b.Blame
	a.Busy += b.Busy
	return a
}

// fraction converts a drop fraction to the slots' fixed point.
func fraction(f float64) uint64 {
	if !(f > 0) {
		return 0
	}
	if f >= 1 {
		return 1 << 32
	}
	return uint64(math.Round(f * (1 << 32)))
}

// Apply makes table the drop table: each tenant it names is dropped by its
// fraction from now on, Other's fraction applies to the tenants pooled
// under Other, and the rest are not dropped. Tenants it names that are not
// followed yet are followed from the next Collect. A table with a version
// older than the one applied is ignored, so that a store that answers late
// cannot go back in time; the zero Table (version 0) always applies and
// clears every drop (the agent's fail-open).
func (t *Tracker) Apply(table Table) error {
	for name, f := range table.Drops {
		if math.IsNaN(f) || f < 0 || f > 1 {
			return fmt.Errorf("tenant: drop table version %d: tenant %q has drop fraction %v, want one in [0, 1]", table.Version, name, f)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if table.Version != 0 && table.Version < t.table.Version {
		return nil
	}
	t.table = table
	dropping := false
	for _, f := range table.Drops {
		dropping = dropping || fraction(f) != 0
	}
	t.dropping.Store(dropping)
	t.setDrops()
	return nil
}

// trimmedKeep is how many times the share of a dropped tenant's requests
// that the table keeps a trimming server lets through (admit.Env.TrimsShares).
// A table is right only on average, and one that keeps exactly a tenant's
// share leaves the server idle whenever the requests kept come in a lull:
// a server held near its capacity by random arrivals waits for work a few
// per cent of the time. Letting a quarter more through keeps it busy, and
// the server refuses their excess itself, from that tenant's requests
// alone, once they have waited half its age limit, and queues them behind
// everyone else's (docs/design.md, "What the server does between two
// tables").
const trimmedKeep = 1.25

// setDrops sets the drop of every slot from the table applied. Called with
// mu held.
func (t *Tracker) setDrops() {
	for name, s := range t.roster.Load().slots {
		t.setDrop(s, t.table.Drops[name])
	}
	t.setDrop(t.other.Load(), t.table.Drops[Other])
}

// setDrop gives s the drop fraction f of the table, or on a trimming
// server the fraction that keeps trimmedKeep times as many of its
// requests. Called with mu held.
func (t *Tracker) setDrop(s *slot, f float64) {
	s.beyond.Store(fraction(f) != 0)
	if t.trims {
		f = 1 - min((1-f)*trimmedKeep, 1) // 0 stays 0, 1 stays 1
	}
	s.drop.Store(fraction(f))
}

// Stats is what a Tracker says of itself.
type Stats struct {
	// Enforcing reports whether enforcement is on.
	Enforcing bool
	// Version is the version of the drop table applied (0: none, or
	// cleared).
	Version uint64
	// Drops is the drop table applied.
	Drops map[string]float64
	// Tracked is the number of tenants followed by name.
	Tracked int
	// Totals are each tenant's counts over every Collect so far (tenants
	// no longer followed are folded into Other).
	Totals []Usage
}

// Stats returns the tracker's state.
func (t *Tracker) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := Stats{
		Enforcing: t.enforce.Load(),
		Version:   t.table.Version,
		Tracked:   len(t.roster.Load().slots),
	}
	if len(t.table.Drops) > 0 {
		st.Drops = maps.Clone(t.table.Drops)
	}
	for _, u := range t.totals {
		st.Totals = append(st.Totals, u)
	}
	slices.SortFunc(st.Totals, func(a, b Usage) int { return strings.Compare(a.Tenant, b.Tenant) })
	return st
}
