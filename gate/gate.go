package gate

import (
	"sync/atomic"
	"time"
)

// Gate answers "may a new request start now?".
//
// Implementations in this package are safe for concurrent use, take no lock
// and allocate nothing in Acquire and Release.
type Gate interface {
	// Acquire reports whether one more request may start now. When it
	// returns true the caller must call Release exactly once when that
	// request ends.
	Acquire() bool
	// Release ends a request admitted by Acquire; latency is how long it
	// ran (adaptive gates learn from it; others ignore it). A latency of
	// zero frees the slot without teaching anything (the request did not
	// run, or its duration is unknown); Undo gives back an acquisition that
	// never became a request at all.
	Release(latency time.Duration)
	// Name names the gate in rejection reasons and counters: "busy",
	// "concurrency", "adaptive", "memory", "cpu", ...
	Name() string
}

// Reserver is optional: a gate whose Acquire reserves a slot, given back by
// Release, implements it and reports true, so that admitting a request
// changes what the next Acquire answers at once (Concurrency, Adaptive, and
// a Chain of such gates). The other gates read a measurement that admitting
// does not change until the request runs (busy workers, memory, CPU): a
// timed queue must start one waiting request per opening for them, or it
// would start every waiting request on one reading.
type Reserver interface {
	Reserves() bool
}

// Reserves reports whether g reserves a slot per Acquire (see Reserver); a
// gate that does not implement Reserver does not.
func Reserves(g Gate) bool {
	r, ok := g.(Reserver)
	return ok && r.Reserves()
}

// Waker is optional: a gate that can tell when it may have opened (a slot
// freed, a worker went idle) implements it, so a timed queue can start its
// head at once without polling.
type Waker interface {
	// OnOpen registers fn, for good: there is no way to remove it. fn may
	// be called from any goroutine, possibly spuriously and possibly
	// concurrently with itself; keep it cheap, and do not call Acquire
	// from inside it on the same goroutine if that could recurse (hand the
	// check to a worker or a goroutine instead).
	OnOpen(fn func())
}

// IdleAcquirer is implemented by gates whose answer depends on whether the
// caller is itself counted as busy (Busy). AcquireIdle is Acquire for a
// caller that the busy count does not include: a sched.Scheduler.OnIdle hook
// (it runs after its worker stopped counting as busy) or a goroutine that is
// not a worker. Gates that do not implement it answer the same either way.
type IdleAcquirer interface {
	AcquireIdle() bool
}

// Undo, passed to Release, gives back an acquisition that never became a
// request: a Chain uses it for the gates it had acquired before a later one
// refused. The gate returns to the state it had before Acquire: adaptive
// gates learn nothing and no OnOpen callback runs (nothing opened that was
// not open before; calling the queue back here would only make it try again
// against the gate that refused, in a loop).
const Undo time.Duration = -1

// wakers is a copy-on-write list of OnOpen callbacks: firing it is one atomic
// load when nobody listens.
type wakers struct {
	p atomic.Pointer[[]func()]
}

func (w *wakers) add(fn func()) {
	if fn == nil {
		return
	}
	for {
		old := w.p.Load()
		var fns []func()
		if old != nil {
			fns = append(fns, *old...)
		}
		fns = append(fns, fn)
		if w.p.CompareAndSwap(old, &fns) {
			return
		}
	}
}

func (w *wakers) fire() {
	if p := w.p.Load(); p != nil {
		for _, fn := range *p {
			fn()
		}
	}
}
