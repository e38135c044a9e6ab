// Package lanes defines the priority lanes of the sluice executor and the
// policy that picks which lane a worker serves next.
//
// Two lanes always exist: Continuation (work of requests already accepted:
// resumed handlers, reads of a request already started, response writes) and
// Upstream (new work: accepts, new requests). Users register more lanes, for
// example a Background lane, each with a priority and a number of shares.
//
// The package is pure logic: a Set holds the lane definitions, shared by every
// worker and safe to tune while running; a Picker holds one worker's
// scheduling state and is used by that worker only. Nothing here reads a clock:
// the caller charges each lane with the time its tasks ran.
package lanes

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// ID identifies a lane within a Set. IDs are small integers assigned in
// registration order, so they can index arrays.
type ID uint8

const (
	// Continuation is the lane of work that belongs to requests already
	// accepted. Under the default policy it runs before every other lane.
	Continuation ID = 0
	// Upstream is the lane of new work: accepting connections and starting
	// new requests. New work can still be rejected; accepted work cannot.
	Upstream ID = 1
)

// MaxLanes is the largest number of lanes a Set can hold, built-in lanes
// included.
const MaxLanes = 16

// Policy selects how a Picker chooses among lanes that have work.
type Policy uint8

const (
	// Strict serves the lanes with the best (lowest) priority first. Lanes
	// of equal priority share the worker by their shares. A registered
	// lane of worse priority is guaranteed a floor while it has work:
	// shares / (shares + DefaultShares) of the worker (11 shares, about
	// 10%; 100 shares, half), over FloorWindow, and it takes any room the
	// better lanes leave. The built-in Upstream lane has a starvation
	// guard instead: it runs one task once better lanes have run for
	// Guard without it. This is the default: continuations of accepted
	// requests go ahead of new work.
	Strict Policy = iota
	// Shares ignores priorities: every lane with work gets the worker in
	// proportion to its shares, by virtual runtime (as Seastar and Glommio
	// schedule their task queues).
	Shares
)

// String returns the policy's name.
func (p Policy) String() string {
	switch p {
	case Strict:
		return "strict"
	case Shares:
		return "shares"
	default:
		return fmt.Sprintf("Policy(%d)", uint8(p))
	}
}

// Spec describes a lane.
type Spec struct {
	// Name identifies the lane in counters and lookups; it must be unique
	// and non-empty.
	Name string
	// Priority orders lanes under the Strict policy: lower runs first.
	// Continuation has priority 0 and Upstream priority 1; a registered
	// lane with priority 1 shares the worker with Upstream by shares, one
	// with priority 2 runs only when both built-in lanes are empty (or
	// when the starvation guard lets it).
	Priority int32
	// Shares is the lane's weight against other lanes it competes with:
	// lanes of equal priority (and every lane under the Shares policy)
	// divide the worker in proportion to their shares. Under Strict, a
	// registered lane of worse priority is also guaranteed shares /
	// (shares + DefaultShares) of the worker while it has work (see
	// Strict). Zero means DefaultShares.
	Shares uint32
}

// Defaults for the built-in lanes and the guard.
const (
	// DefaultShares is the weight of a lane registered with zero shares.
	DefaultShares = 100
	// ContinuationShares is the default weight of the Continuation lane,
	// which matters under the Shares policy: accepted work gets 8 parts
	// of the worker for every part of Upstream work when both wait.
	ContinuationShares = 800
	// DefaultGuard is the default starvation guard: under the Strict
	// policy, a waiting lane runs a task after at most this much worker
	// time given to better lanes.
	DefaultGuard = 500 * time.Microsecond
	// MaxShares bounds a lane's shares so that virtual runtime arithmetic
	// cannot overflow in practice.
	MaxShares = 1 << 20
)

// Errors returned by Set.
var (
	ErrTooManyLanes = errors.New("lanes: too many lanes")
	ErrDuplicate    = errors.New("lanes: duplicate lane name")
	ErrNoSuchLane   = errors.New("lanes: no such lane")
	ErrBadSpec      = errors.New("lanes: invalid lane spec")
	ErrFrozen       = errors.New("lanes: set is in use; register lanes before the runtime starts")
)

// Set holds the lanes of one runtime. Registration happens before the
// runtime starts (Freeze); shares, priorities, the policy and the guard can be
// changed at any time and take effect at the workers' next pick.
type Set struct {
	mu     sync.Mutex // serialises Register
	frozen atomic.Bool
	n      atomic.Int32
	policy atomic.Uint32
	guard  atomic.Int64
	names  [MaxLanes]string
	prio   [MaxLanes]atomic.Int32
	shares [MaxLanes]atomic.Uint32
}

// NewSet returns a Set holding the two built-in lanes, with the Strict
// policy and DefaultGuard.
func NewSet() *Set {
	s := &Set{}
	s.guard.Store(int64(DefaultGuard))
	s.add(Spec{Name: "continuation", Priority: 0, Shares: ContinuationShares})
	s.add(Spec{Name: "upstream", Priority: 1, Shares: DefaultShares})
	return s
}

func (s *Set) add(sp Spec) ID {
	id := ID(s.n.Load())
	s.names[id] = sp.Name
	s.prio[id].Store(sp.Priority)
	s.shares[id].Store(sp.Shares)
	s.n.Add(1)
	return id
}

func checkShares(sh uint32) (uint32, error) {
	if sh == 0 {
		return DefaultShares, nil
	}
	if sh > MaxShares {
		return 0, fmt.Errorf("%w: shares %d above %d", ErrBadSpec, sh, MaxShares)
	}
	return sh, nil
}

// Register adds a lane and returns its ID. It fails once the Set is frozen
// (the runtime has started), for an empty or duplicate name, for shares above
// MaxShares, and when MaxLanes are already registered.
func (s *Set) Register(sp Spec) (ID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen.Load() {
		return 0, fmt.Errorf("%w (registering %q)", ErrFrozen, sp.Name)
	}
	if sp.Name == "" {
		return 0, fmt.Errorf("%w: empty name", ErrBadSpec)
	}
	sh, err := checkShares(sp.Shares)
	if err != nil {
		return 0, err
	}
	sp.Shares = sh
	if _, ok := s.Lookup(sp.Name); ok {
		return 0, fmt.Errorf("%w: %q", ErrDuplicate, sp.Name)
	}
	if s.Len() >= MaxLanes {
		return 0, fmt.Errorf("%w: at most %d", ErrTooManyLanes, MaxLanes)
	}
	return s.add(sp), nil
}

// Freeze forbids further registrations. The runtime calls it when it starts,
// because workers size their queues by the number of lanes.
func (s *Set) Freeze() {
	s.mu.Lock()
	s.frozen.Store(true)
	s.mu.Unlock()
}

// Len returns the number of lanes.
func (s *Set) Len() int { return int(s.n.Load()) }

// Valid reports whether id names a lane of the Set.
func (s *Set) Valid(id ID) bool { return int(id) < s.Len() }

// Lookup returns the ID of the lane with the given name.
func (s *Set) Lookup(name string) (ID, bool) {
	for i := 0; i < s.Len(); i++ {
		if s.names[i] == name {
			return ID(i), true
		}
	}
	return 0, false
}

// Name returns the lane's name, or "" for an unknown ID.
func (s *Set) Name(id ID) string {
	if !s.Valid(id) {
		return ""
	}
	return s.names[id]
}

// Spec returns the lane's current definition.
func (s *Set) Spec(id ID) (Spec, error) {
	if !s.Valid(id) {
		return Spec{}, fmt.Errorf("%w: %d", ErrNoSuchLane, id)
	}
	return Spec{Name: s.names[id], Priority: s.prio[id].Load(), Shares: s.shares[id].Load()}, nil
}

// SetShares changes a lane's shares while running; zero restores
// DefaultShares.
func (s *Set) SetShares(id ID, shares uint32) error {
	if !s.Valid(id) {
		return fmt.Errorf("%w: %d", ErrNoSuchLane, id)
	}
	sh, err := checkShares(shares)
	if err != nil {
		return err
	}
	s.shares[id].Store(sh)
	return nil
}

// SetPriority changes a lane's priority while running.
func (s *Set) SetPriority(id ID, priority int32) error {
	if !s.Valid(id) {
		return fmt.Errorf("%w: %d", ErrNoSuchLane, id)
	}
	s.prio[id].Store(priority)
	return nil
}

// Policy returns the current policy.
func (s *Set) Policy() Policy { return Policy(s.policy.Load()) }

// SetPolicy changes the policy while running.
func (s *Set) SetPolicy(p Policy) error {
	if p != Strict && p != Shares {
		return fmt.Errorf("%w: policy %d", ErrBadSpec, p)
	}
	s.policy.Store(uint32(p))
	return nil
}

// Guard returns the starvation guard of the Strict policy.
func (s *Set) Guard() time.Duration { return time.Duration(s.guard.Load()) }

// SetGuard changes the starvation guard; zero or less turns it off, and the
// registered lanes' floors with it, which lets better lanes starve worse ones
// indefinitely.
func (s *Set) SetGuard(d time.Duration) { s.guard.Store(int64(d)) }

// Mask is a set of lane IDs, one bit per lane: the lanes that have work.
type Mask uint32

// With returns m with id added.
func (m Mask) With(id ID) Mask { return m | 1<<id }

// Without returns m with id removed.
func (m Mask) Without(id ID) Mask { return m &^ (1 << id) }

// Has reports whether id is in m.
func (m Mask) Has(id ID) bool { return m&(1<<id) != 0 }

// vscale turns nanoseconds into virtual runtime units: a lane with shares s
// advances by ns*vscale/s, so that shares up to MaxShares keep a resolution
// of 16 ns.
const vscale = 1 << 16

// rebaseAt is the virtual runtime at which a Picker shifts every lane down by
// rebaseBy, so that virtual runtimes never overflow however long it runs.
const (
	rebaseAt = 1 << 62
	rebaseBy = 1 << 61
)

// Picker is one worker's scheduling state. It is not safe for concurrent use:
// each worker owns one.
type Picker struct {
	set *Set
	// vrt is each lane's virtual runtime; the lane with the least runs
	// next among candidates.
	vrt [MaxLanes]uint64
	// clock is the total worker time charged to all lanes.
	clock int64
	// since is, per lane, the clock when it last ran or last became
	// non-empty: the starvation guard compares it with clock.
	since [MaxLanes]int64
	// floor is the virtual runtime of the lane that ran last; a lane that
	// wakes up starts no lower than this, so an idle lane cannot bank
	// credit and then monopolise the worker.
	floor uint64
	// bal is, per registered lane, the worker time its floor owes it
	// (negative: it ran ahead of its floor, in room the better lanes
	// left), kept within FloorWindow's worth of its floor (see Charge). It
	// is counted in ns × (shares + DefaultShares), which spares Charge a
	// division: another lane's ns credit it ns × shares, its own debit it
	// ns × DefaultShares.
	bal [MaxLanes]int64
	// ready is the ready mask of the last Pick: the lanes that had work
	// while the task Charge accounts for ran.
	ready Mask
}

// FloorWindow bounds how far a registered lane may run ahead of its floor,
// or fall behind it: a lane of floor f is owed, or owes, at most f ×
// FloorWindow of worker time. A lane that used the room better lanes left
// does not take a slice from them until they have run about FloorWindow
// without it; a lane that was starved catches up by at most that much.
const FloorWindow = 100 * time.Millisecond

// builtIn is the mask of the built-in lanes, which have no floor.
const builtIn = Mask(1<<Continuation | 1<<Upstream)

// NewPicker returns a Picker over the lanes of s.
func NewPicker(s *Set) *Picker { return &Picker{set: s} }

// Activate tells the Picker that lane id just went from empty to non-empty.
func (p *Picker) Activate(id ID) {
	if p.vrt[id] < p.floor {
		p.vrt[id] = p.floor
	}
	p.since[id] = p.clock
}

// Charge accounts ns of worker time to lane id, after one of its tasks ran.
func (p *Picker) Charge(id ID, ns int64) {
	if ns < 0 {
		ns = 0
	}
	sh := uint64(p.set.shares[id].Load())
	p.vrt[id] += uint64(ns) * vscale / sh
	p.floor = p.vrt[id]
	if p.floor >= rebaseAt {
		p.rebase()
	}
	p.clock += ns
	p.since[id] = p.clock
	// The floors of the registered lanes that had work: each is owed its
	// part of the time another lane ran, and pays for its own.
	for m := p.ready.With(id) &^ builtIn; m != 0; m &= m - 1 {
		l := ID(bits.TrailingZeros32(uint32(m)))
		lsh := int64(p.set.shares[l].Load())
		b := p.bal[l]
		if l == id {
			b -= ns * DefaultShares
		} else {
			b += ns * lsh
		}
		limit := int64(FloorWindow) * lsh
		p.bal[l] = min(max(b, -limit), limit)
	}
}

// Pick returns the lane whose task should run next among the non-empty lanes
// in ready, and false when ready is empty. It allocates nothing.
func (p *Picker) Pick(ready Mask) (ID, bool) {
	if ready == 0 {
		return 0, false
	}
	p.ready = ready
	if ready&(ready-1) == 0 { // one lane has work: nothing to decide
		return ID(bits.TrailingZeros32(uint32(ready))), true
	}
	set := p.set
	if Policy(set.policy.Load()) == Shares {
		return p.minVRT(ready), true
	}
	// Strict: the best priority among ready lanes, then the least vrt.
	best := int32(1<<31 - 1)
	var tier Mask
	for m := ready; m != 0; m &= m - 1 {
		id := ID(bits.TrailingZeros32(uint32(m)))
		pr := set.prio[id].Load()
		switch {
		case pr < best:
			best, tier = pr, Mask(0).With(id)
		case pr == best:
			tier = tier.With(id)
		}
	}
	if rest := ready &^ tier; rest != 0 {
		if g := set.guard.Load(); g > 0 {
			// The most starved lane below the running tier gets one
			// task, if it is owed: a registered lane below its floor,
			// the built-in Upstream once it waited past the guard.
			var starved ID
			var oldest int64
			found := false
			for m := rest; m != 0; m &= m - 1 {
				id := ID(bits.TrailingZeros32(uint32(m)))
				since := p.since[id]
				owed := p.clock-since > g
				if !builtIn.Has(id) {
					owed = p.bal[id] > 0
				}
				if owed && (!found || since < oldest) {
					oldest, starved, found = since, id, true
				}
			}
			if found {
				return starved, true
			}
		}
	}
	if tier&(tier-1) == 0 {
		return ID(bits.TrailingZeros32(uint32(tier))), true
	}
	return p.minVRT(tier), true
}

func (p *Picker) rebase() {
	for i := range p.vrt {
		if p.vrt[i] >= rebaseBy {
			p.vrt[i] -= rebaseBy
		} else {
			p.vrt[i] = 0
		}
	}
	p.floor -= rebaseBy
}

func (p *Picker) minVRT(m Mask) ID {
	best := ID(bits.TrailingZeros32(uint32(m)))
	for m &= m - 1; m != 0; m &= m - 1 {
		id := ID(bits.TrailingZeros32(uint32(m)))
		if p.vrt[id] < p.vrt[best] {
			best = id
		}
	}
	return best
}
