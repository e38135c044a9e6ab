package queue

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults used where a [Config] field is zero.
const (
	// DefaultTimeout is the longest an entry waits: 100 ms (see the
	// package documentation).
	DefaultTimeout = 100 * time.Millisecond
	// DefaultMaxLen bounds the number of waiting entries.
	DefaultMaxLen = 4096
	// DefaultTarget is CoDel's target: the timeout given to entries that
	// arrive while the queue is standing (Facebook's M = 5 ms).
	DefaultTarget = 5 * time.Millisecond
	// DefaultInterval is CoDel's interval: how long the queue must have been
	// non-empty to count as standing (Facebook's N = 100 ms).
	DefaultInterval = 100 * time.Millisecond
)

// Order is the order in which the waiting entries of one class are started.
// Classes always come first (see [Class]); Order breaks ties within a class.
type Order uint8

const (
	// FIFO starts the oldest entry of a class first. Every entry may wait
	// [Config.Timeout].
	FIFO Order = iota
	// LIFO always starts the newest entry of a class first: the one whose
	// client is least likely to have given up. The oldest entries wait until
	// their deadline unless the queue drains. Every entry may wait
	// [Config.Timeout].
	LIFO
	// CoDel is controlled delay with adaptive LIFO, as Facebook applied
	// it to request queues ("Fail at Scale", Ben Maurer, ACM Queue, 2015;
	// see docs/background.md). The queue's [Detector] says whether it is
	// standing: every entry that left it (started or timed out) for a whole
	// Interval had waited at least Target. Then:
	//
	//   - an entry pushed while the queue is standing may wait only
	//     min(Target, Timeout); an entry pushed otherwise may wait Timeout.
	//     The timeout is fixed at push, as in Facebook's onNewRequest, so an
	//     entry keeps its timeout when the state changes;
	//   - each start picks the newest entry of the class (LIFO) while the
	//     queue is standing and the oldest (FIFO) otherwise, the state being
	//     read when Pump runs;
	//   - once the entries leaving it have all been younger than Target for
	//     Interval / [ExitDivisor], it is back to FIFO and full timeouts.
	//
	// Defaults: Target 5 ms, Interval 100 ms, Facebook's M and N. With the
	// default Timeout of 100 ms, a queue whose entries start within 5 ms
	// behaves as FIFO; a standing one keeps newcomers at most 5 ms and
	// serves them newest first, so the work that does start is fresh and the
	// rest is rejected quickly enough to be retried elsewhere.
	CoDel
)

// String returns "fifo", "lifo" or "codel".
func (o Order) String() string {
	switch o {
	case FIFO:
		return "fifo"
	case LIFO:
		return "lifo"
	case CoDel:
		return "codel"
	}
	return "order(" + itoa(uint64(o)) + ")"
}

// Reason says why an entry was rejected.
type Reason uint8

const (
	// Timeout: the entry's deadline passed before the gate admitted it.
	Timeout Reason = iota
	// Full: the queue held MaxLen entries and none of a less important class
	// to evict; the entry was rejected without waiting.
	Full
	// Evicted: the queue was full and the entry, of the least important class
	// present, made room for a more important one.
	Evicted
	// Closed: the queue was closed, before or while the entry waited.
	Closed

	numReasons = iota
)

// String returns "timeout", "full", "evicted" or "closed".
func (r Reason) String() string {
	switch r {
	case Timeout:
		return "timeout"
	case Full:
		return "full"
	case Evicted:
		return "evicted"
	case Closed:
		return "closed"
	}
	return "reason(" + itoa(uint64(r)) + ")"
}

// Config configures a [Queue]. The zero value is a FIFO queue with the
// defaults above and the real clock.
type Config struct {
	// Timeout is the longest an entry waits before it is rejected with
	// [Timeout]. Zero or less means [DefaultTimeout].
	Timeout time.Duration

	// Order is the order within a class: [FIFO] (the default), [LIFO] or
	// [CoDel]; other values mean FIFO.
	Order Order

	// MaxLen bounds the number of waiting entries, all classes together.
	// Zero or less means [DefaultMaxLen]. A Push into a full queue evicts
	// one entry of the least important class present when that class is less
	// important than the new entry's: of that class, the entry that the
	// current order would start last (the newest under FIFO, the oldest
	// under LIFO and under a standing CoDel queue), which is rejected with
	// [Evicted]. Otherwise the new entry is rejected at once with [Full].
	// An entry never evicts one of its own class.
	MaxLen int

	// Target and Interval are CoDel's parameters (see [CoDel] and
	// [Detector]); zero or less means [DefaultTarget] and
	// [DefaultInterval]. They are ignored when Detector is set.
	Target, Interval time.Duration

	// Detector, optional, is the standing-queue state the queue reads and
	// feeds: it observes the sojourn of every entry that starts or times
	// out, and under [CoDel] order decides the short timeout and the
	// newest-first order. Nil means a Detector of the queue's own, made
	// from Target and Interval. An owner that has more waiting places than
	// this queue (the sluice admission pipeline, whose requests wait in the
	// kernel's socket buffers first) passes one Detector that it feeds too.
	// It must observe on the queue's Clock.
	Detector *Detector

	// Clock returns monotonic nanoseconds; nil means the real clock. It is
	// called with the queue's lock held and, by [Queue.Stats], without it,
	// so it must be safe for concurrent use. Tests inject a fake clock; the
	// sluice server passes its scheduler's clock so that deadlines are on
	// its workers' time base.
	Clock func() int64

	// Admit, optional, is the gate that [Queue.Wait] pumps with right after
	// it pushes, so that a gate that opened between the caller's refusal and
	// the push is not missed, and that [Queue.Pump] uses when given nil.
	Admit func(e *Entry) bool

	// Arm, optional, tells the owner when to call [Queue.Expire]: it is
	// called with a deadline (on Clock's time base) whenever the earliest
	// deadline of the queue becomes earlier than the one last reported, and
	// by every Expire that leaves entries waiting. Each call supersedes the
	// previous one: the owner keeps one timer and resets it to the latest
	// deadline, then calls Expire when it fires, and nothing ever polls. Arm
	// is called with the queue's lock held, so that its calls are ordered;
	// it must be quick and must not call the Queue's methods.
	Arm func(deadline int64)
}

// MaxClasses is the number of priority classes: [Class] values 0 to
// MaxClasses-1.
const MaxClasses = 8

// Entry is one waiting request. The caller provides it, typically embedded
// in its own per-request struct, so that Push allocates nothing; its fields
// are private to the queue; the zero value is ready to push. An Entry may be
// pushed again once one of its callbacks has been called (from inside the
// callback too) or [Queue.Remove] has returned true for it. Pushing it while
// it waits panics; pushing it after it left the queue but before its
// callback ran (another goroutine's Pump has it) corrupts that Pump's batch,
// and is the caller's bug.
type Entry struct {
	// Value is the caller's: the queue never reads or writes it. An owner
	// that embeds the Entry in its per-request struct points it at that
	// struct, so that the admit function of a Pump, which is given the
	// Entry, can decide for that request (by its class, its route, its
	// tenant).
	Value any

	q          *Queue // the queue that holds it; nil when not waiting
	prev, next *Entry // links in its list while waiting, then in a batch
	start      func()
	reject     func(Reason)
	enq        int64 // Clock at push
	deadline   int64 // reject at or after this Clock reading
	seq        uint64
	list       uint8 // index into Queue.lists
	out        uint8 // outcome while in a batch: outStart or 1+Reason
}

const outStart = 0

// list is a deque of entries linked through Entry.prev and Entry.next,
// oldest at head. All its entries have the same timeout, so their deadlines
// do not decrease from head to tail.
type list struct{ head, tail *Entry }

// Queue is a timed admission queue. It is safe for concurrent use by any
// number of goroutines and starts none of its own. Create it with [New].
type Queue struct {
	mu sync.Mutex
	// lists[2c] holds class c's entries with the full timeout, lists[2c+1]
	// those with CoDel's short one. Bit i of mask is set when lists[i] is
	// non-empty, so finding the most and least important classes present
	// is one bit scan.
	lists   [2 * MaxClasses]list
	mask    uint16
	n       int
	seq     uint64
	armed   int64 // the deadline last reported through Arm or Expire
	armedOK bool
	closed  bool

	timeout, target int64 // target: the short timeout of CoDel order
	maxLen          int
	order           Order
	det             *Detector
	clock           func() int64
	admit           func(*Entry) bool
	arm             func(int64)

	// Counters, written under mu, read by Stats without it.
	length   atomic.Int64
	pushes   atomic.Uint64
	started  atomic.Uint64
	removed  atomic.Uint64
	waits    atomic.Uint64
	waitSum  atomic.Int64
	waitMax  atomic.Int64
	rejected [numReasons]atomic.Uint64
}

var epoch = time.Now()

func realClock() int64 { return int64(time.Since(epoch)) }

// New returns an empty queue configured by opts (zero fields take the
// defaults).
func New(opts Config) *Queue {
	q := &Queue{
		timeout: int64(opts.Timeout),
		maxLen:  opts.MaxLen,
		order:   opts.Order,
		det:     opts.Detector,
		clock:   opts.Clock,
		admit:   opts.Admit,
		arm:     opts.Arm,
	}
	if q.timeout <= 0 {
		q.timeout = int64(DefaultTimeout)
	}
	if q.det == nil {
		q.det = NewDetector(DetectorConfig{Target: opts.Target, Interval: opts.Interval})
	}
	q.target = min(q.det.target, q.timeout)
	if q.maxLen <= 0 {
		q.maxLen = DefaultMaxLen
	}
	if q.order > CoDel {
		q.order = FIFO
	}
	if q.clock == nil {
		q.clock = realClock
	}
	return q
}

// SetTimeout changes the timeout of the entries pushed from now on (zero or
// less means [DefaultTimeout]); entries already waiting keep theirs.
func (q *Queue) SetTimeout(d time.Duration) {
	if d <= 0 {
		d = DefaultTimeout
	}
	q.mu.Lock()
	q.timeout = int64(d)
	q.target = min(q.det.target, q.timeout)
	q.mu.Unlock()
}

// Timeout returns the timeout of entries pushed now.
func (q *Queue) Timeout() time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	return time.Duration(q.timeout)
}

// Detector returns the standing-queue state the queue reads and feeds.
func (q *Queue) Detector() *Detector { return q.det }

// Now returns the queue's clock: the time base of deadlines given to
// [Config.Arm] and returned by [Queue.Expire].
func (q *Queue) Now() int64 { return q.clock() }

// Len returns the number of waiting entries. It reads an atomic counter and
// takes no lock.
func (q *Queue) Len() int { return int(q.length.Load()) }

// Push enqueues e with class c (a class of MaxClasses or more counts as
// MaxClasses-1). Exactly one of start and reject will be called, exactly
// once, unless [Queue.Remove] returns true for e first, in which case
// neither is:
//
//   - start when [Queue.Pump] admits e;
//   - reject(Timeout) when e's deadline passes (Pump or Expire);
//   - reject(Evicted) when a more important entry takes e's place;
//   - reject(Full) or reject(Closed) before Push returns, on the caller's
//     goroutine, when e cannot wait at all;
//   - reject(Closed) from [Queue.Close].
//
// Push may also call another entry's reject(Evicted) before it returns. It
// does not start e even if the gate is open: the caller pumps afterwards.
// Push panics if e is already waiting or a callback is nil. Callbacks should
// not panic; if one does, the other callbacks due in the same call still
// run, then the panic continues in the caller.
func (q *Queue) Push(e *Entry, c Class, start func(), reject func(Reason)) {
	q.PushArrived(e, c, math.MaxInt64, start, reject) // later than any clock: now
}

// PushArrived is Push for a request that arrived at arrived (on the queue's
// Clock) and has waited since, elsewhere: in the kernel's socket buffer, for
// a server that knows when the kernel received the request. Its wait, its
// deadline (arrived plus the timeout) and its place in the order count from
// arrived, so FIFO and LIFO order requests by arrival; a request already
// past its deadline is rejected with [Timeout] before PushArrived returns.
// An arrived later than the queue's clock counts as now.
func (q *Queue) PushArrived(e *Entry, c Class, arrived int64, start func(), reject func(Reason)) {
	if start == nil || reject == nil {
		panic("queue: Push with a nil callback")
	}
	if c >= MaxClasses {
		c = MaxClasses - 1
	}
	q.mu.Lock()
	if e.q != nil {
		q.mu.Unlock()
		panic("queue: Push of an Entry that is already waiting")
	}
	q.pushes.Add(1)
	if q.closed {
		q.mu.Unlock()
		q.rejected[Closed].Add(1)
		reject(Closed)
		return
	}
	now := q.clock()
	arrived = min(arrived, now)
	standing := q.det.Standing(now)
	timeout := q.timeout
	if standing && q.order == CoDel {
		timeout = q.target
	}
	if arrived+timeout <= now {
		q.mu.Unlock()
		q.rejected[Timeout].Add(1)
		reject(Timeout)
		return
	}
	var evict func(Reason)
	if q.n >= q.maxLen {
		victim := q.victim(c, q.lifo(standing))
		if victim == nil {
			q.mu.Unlock()
			q.rejected[Full].Add(1)
			reject(Full)
			return
		}
		q.leave(victim, now)
		q.rejected[Evicted].Add(1)
		evict = victim.reject
		victim.start, victim.reject = nil, nil
	}
	i := 2 * int(c)
	if standing && q.order == CoDel {
		i++
	}
	q.seq++
	*e = Entry{Value: e.Value, q: q, start: start, reject: reject, enq: arrived, deadline: arrived + timeout, seq: q.seq, list: uint8(i)}
	q.link(&q.lists[i], e)
	q.mask |= 1 << i
	q.n++
	q.length.Store(int64(q.n))
	if q.arm != nil && (!q.armedOK || e.deadline < q.armed) {
		q.armed, q.armedOK = e.deadline, true
		q.arm(e.deadline)
	}
	q.mu.Unlock()
	if evict != nil {
		evict(Evicted)
	}
}

// Pump is called whenever the gate may have opened (a request ended, a
// worker went idle) and right after a Push. It first rejects every entry
// whose deadline has passed, then repeatedly takes the next entry (the most
// important class first, then the order) and asks admit whether it may
// start: while admit returns true, the entry leaves the queue and its start
// is called; the first false ends the Pump. admit is called only when there
// is an entry to start, and is given that entry, so a gate that reserves a
// slot when it returns true (a concurrency limit) never reserves one for
// nothing. admit nil means [Config.Admit]; if that is nil too, Pump only
// rejects expired entries.
//
// admit runs with the queue's lock held: it must be quick and must not call
// the Queue's methods. The callbacks run after the lock is released, on the
// calling goroutine, in the order the entries left the queue. Pump returns
// the number of entries started.
func (q *Queue) Pump(admit func(e *Entry) bool) int {
	return q.pump(admit, -1)
}

// PumpN is Pump that starts at most n entries (n <= 0: no limit). It is for
// a gate whose admission reserves nothing and reads a measurement that
// admitting does not change at once (a busy-worker count goes up only when
// the started request runs): Pump would start every waiting entry on one
// reading, while PumpN(1) starts one per opening, and PumpN(k) as many as
// the gate says have opened.
func (q *Queue) PumpN(n int, admit func(e *Entry) bool) int {
	if n <= 0 {
		n = -1
	}
	return q.pump(admit, n)
}

func (q *Queue) pump(admit func(*Entry) bool, limit int) int {
	if admit == nil {
		admit = q.admit
	}
	if q.length.Load() == 0 {
		return 0
	}
	var b batch
	started := 0
	q.mu.Lock()
	now := q.clock()
	q.expire(now, &b)
	if admit != nil && q.n > 0 {
		lifo := q.lifo(q.det.Standing(now))
		for q.n > 0 && started != limit {
			e := q.next(lifo)
			if !admit(e) {
				break
			}
			q.leave(e, now)
			q.det.Observe(now, now-e.enq)
			b.add(e, outStart)
			started++
		}
	}
	q.mu.Unlock()
	q.started.Add(uint64(started))
	b.run()
	return started
}

// Expire rejects, with [Timeout], every entry whose deadline is at or before
// the clock's current reading, then returns the earliest deadline still
// waiting (ok false when the queue is empty), on Clock's time base, so that
// the caller can set a timer; with [Config.Arm] set, it also reports that
// deadline through Arm. It runs from the caller's timer: the queue has no
// goroutine. It costs a lock and a look at the head of each non-empty
// class list, so it may be called often.
func (q *Queue) Expire() (next int64, ok bool) {
	var b batch
	q.mu.Lock()
	q.expire(q.clock(), &b)
	next, ok = q.earliest()
	q.armed, q.armedOK = next, ok
	if ok && q.arm != nil {
		q.arm(next)
	}
	q.mu.Unlock()
	b.run()
	return next, ok
}

// Remove takes e out of the queue without calling either of its callbacks,
// for a client that went away, and reports whether it did. It returns false
// when e is not waiting in q: never pushed, or already started or rejected,
// in which case one of its callbacks has been or is about to be called, and
// e must not be reused before it is.
func (q *Queue) Remove(e *Entry) bool {
	q.mu.Lock()
	if e.q != q {
		q.mu.Unlock()
		return false
	}
	q.leave(e, q.clock())
	e.start, e.reject = nil, nil
	q.mu.Unlock()
	q.removed.Add(1)
	return true
}

// Close rejects every waiting entry with [Closed] and makes every later
// Push reject at once with Closed; Pump and Expire then find nothing to do.
// The callbacks run on the calling goroutine. Close may be called more than
// once.
func (q *Queue) Close() {
	var b batch
	q.mu.Lock()
	q.closed = true
	now := q.clock()
	for q.mask != 0 {
		e := q.lists[bits.TrailingZeros16(q.mask)].head
		q.leave(e, now)
		q.rejected[Closed].Add(1)
		b.add(e, 1+uint8(Closed))
	}
	q.armedOK = false
	q.mu.Unlock()
	b.run()
}

// lifo reports whether starts and evictions follow LIFO now.
func (q *Queue) lifo(standing bool) bool {
	return q.order == LIFO || (q.order == CoDel && standing)
}

// next returns the entry to start next: of the most important class present,
// the newest (lifo) or the oldest. Called with mu held and q.n > 0.
func (q *Queue) next(lifo bool) *Entry {
	i := bits.TrailingZeros16(q.mask) &^ 1
	a, b := &q.lists[i], &q.lists[i+1]
	if lifo {
		return newer(a.tail, b.tail)
	}
	return older(a.head, b.head)
}

// victim returns the entry to evict for a new entry of class c, or nil when
// no class less important than c is present. Called with mu held and q.n > 0.
func (q *Queue) victim(c Class, lifo bool) *Entry {
	i := (15 - bits.LeadingZeros16(q.mask)) &^ 1
	if Class(i/2) <= c {
		return nil
	}
	a, b := &q.lists[i], &q.lists[i+1]
	if lifo {
		return older(a.head, b.head)
	}
	return newer(a.tail, b.tail)
}

// link inserts e into l in arrival order: at the tail, unless e arrived
// before entries already there (PushArrived), then after the last one that
// arrived no later. All entries of a list have the same timeout, so their
// deadlines stay in order too. Called with mu held.
func (q *Queue) link(l *list, e *Entry) {
	p := l.tail
	for p != nil && p.enq > e.enq {
		p = p.prev
	}
	e.prev = p
	if p == nil {
		e.next = l.head
		l.head = e
	} else {
		e.next = p.next
		p.next = e
	}
	if e.next == nil {
		l.tail = e
	} else {
		e.next.prev = e
	}
}

// before reports whether a arrived before b (by push order among equal
// arrivals).
func before(a, b *Entry) bool {
	return a.enq < b.enq || (a.enq == b.enq && a.seq < b.seq)
}

func older(a, b *Entry) *Entry {
	if a == nil || (b != nil && before(b, a)) {
		return b
	}
	return a
}

func newer(a, b *Entry) *Entry {
	if a == nil || (b != nil && before(a, b)) {
		return b
	}
	return a
}

// expire moves every entry whose deadline is at or before now into b with
// reason Timeout. Deadlines do not decrease along a list, so only heads are
// looked at. Called with mu held.
func (q *Queue) expire(now int64, b *batch) {
	for m := q.mask; m != 0; m &= m - 1 {
		l := &q.lists[bits.TrailingZeros16(m)]
		for l.head != nil && l.head.deadline <= now {
			e := l.head
			q.leave(e, now)
			q.det.Observe(now, now-e.enq)
			q.rejected[Timeout].Add(1)
			b.add(e, 1+uint8(Timeout))
		}
	}
}

// earliest returns the earliest deadline of the waiting entries. Called with
// mu held.
func (q *Queue) earliest() (int64, bool) {
	var d int64
	ok := false
	for m := q.mask; m != 0; m &= m - 1 {
		h := q.lists[bits.TrailingZeros16(m)].head
		if !ok || h.deadline < d {
			d, ok = h.deadline, true
		}
	}
	return d, ok
}

// leave unlinks e from its list and accounts for its wait. Called with mu
// held; e is waiting in q.
func (q *Queue) leave(e *Entry, now int64) {
	l := &q.lists[e.list]
	if e.prev == nil {
		l.head = e.next
	} else {
		e.prev.next = e.next
	}
	if e.next == nil {
		l.tail = e.prev
	} else {
		e.next.prev = e.prev
	}
	if l.head == nil {
		q.mask &^= 1 << e.list
	}
	e.prev, e.next, e.q = nil, nil, nil
	q.n--
	q.length.Store(int64(q.n))
	w := max(now-e.enq, 0)
	q.waits.Add(1)
	q.waitSum.Add(w)
	if w > q.waitMax.Load() {
		q.waitMax.Store(w)
	}
}

// batch collects the entries that left the queue under the lock, linked
// through Entry.next, so that their callbacks run after it is released
// without allocating.
type batch struct{ head, tail *Entry }

func (b *batch) add(e *Entry, out uint8) {
	e.out = out
	if b.tail == nil {
		b.head = e
	} else {
		b.tail.next = e
	}
	b.tail = e
}

// run calls each entry's callback. Everything it needs from an entry is read
// before the call, since the callback may push the entry again. If a
// callback panics, the entries after it still get theirs before the panic
// goes on, so that one faulty callback strands no other request.
func (b *batch) run() {
	if b.head == nil {
		return
	}
	defer func() {
		if b.head == nil {
			return // done, or the last callback panicked: nothing to finish
		}
		p := recover() // nil for runtime.Goexit, which goes on by itself
		b.run()
		if p != nil {
			panic(p)
		}
	}()
	for b.head != nil {
		e := b.head
		b.head = e.next
		start, reject, out := e.start, e.reject, e.out
		e.next, e.start, e.reject = nil, nil, nil
		if out == outStart {
			start()
		} else {
			reject(Reason(out - 1))
		}
	}
}

func itoa(v uint64) string {
	var buf [20]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(buf[i:])
		}
	}
}
