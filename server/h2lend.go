package server

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/sluice-go/sluice/sched"
)

// This file runs an HTTP/2 stream's handler on the stream's own goroutine
// when its worker has nothing else to do. Handing a stream to a worker
// costs two wake-ups across threads (the worker's, then the stream
// goroutine's when the handler ends), which is most of what HTTP/2 costs
// sluice beyond net/http when the handlers are short. A worker that is
// parked with an empty queue gains nothing from running the handler
// itself: the stream's goroutine runs it on a lease of the worker's CPU
// (sched.Worker.Lend), during which the worker counts busy and the work
// submitted to it waits, as behind a task of its own. Only routes seen to
// be quick on a worker are lent for (h2Routes): a route that blocks or
// streams would hold the lease until the watchdog takes it back.

// h2Route is a stream's method and path.
type h2Route struct{ method, path string }

// h2Routes knows which routes' streams may run on a lease: those whose
// handlers ended quickly on a worker (routeBook's quick routes, as the
// workers learn them), less those found slow on a lease (held past the
// watchdog's bound, or streaming), which are never lent for again. It is
// read by every stream, lock-free, and written when a route is learned,
// rarely: a copy-on-write map of at most maxRoutes routes.
type h2Routes struct {
	mu sync.Mutex // serializes writers
	m  atomic.Pointer[map[h2Route]bool]
}

// quick reports whether streams of method and path may run on a lease.
func (q *h2Routes) quick(method, path string) bool {
	m := q.m.Load()
	return m != nil && (*m)[h2Route{method, path}]
}

// known reports whether the route is in the set, quick or slow.
func (q *h2Routes) known(method, path string) bool {
	m := q.m.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[h2Route{method, path}]
	return ok
}

// learn records the route as quick, unless it is known already (a slow
// route stays slow) or the set is full.
func (q *h2Routes) learn(method, path string) { q.put(method, path, true) }

// slow records that a stream of the route held its lease too long, or
// streamed: its streams go to the worker from now on.
func (q *h2Routes) slow(method, path string) { q.put(method, path, false) }

func (q *h2Routes) put(method, path string, quick bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	old := q.m.Load()
	k := h2Route{method, path}
	n := 0
	if old != nil {
		v, ok := (*old)[k]
		if ok && (!v || quick) {
			return // slow for good, or quick already
		}
		n = len(*old)
	}
	if n >= maxRoutes {
		return
	}
	m := make(map[h2Route]bool, n+1)
	if old != nil {
		for r, v := range *old {
			m[r] = v
		}
	}
	m[k] = quick
	q.m.Store(&m)
}

// h2Lent is a stream's handler running on a lease of its worker's CPU.
type h2Lent struct {
	lease    sched.Lease
	given    bool // the handler gave the lease back before it ended
	streamed bool // it flushed: a stream
}

// giveBack ends the lease before the handler does: it is about to wait
// for x/net (a flush, a write beyond x/net's buffer), which may take as
// long as the client does, with the worker's queue waiting behind it.
// streamed says the wait is a flush. It does nothing on a nil h2Lent.
func (x *h2Lent) giveBack(streamed bool) {
	if x == nil {
		return
	}
	if !x.given {
		x.given = true
		x.lease.End()
	}
	x.streamed = x.streamed || streamed
}

// runLent runs the handler of a stream of a quick route on the calling
// goroutine, on a lease of its worker's CPU, and ends the lease. A route
// whose handler held the lease past the watchdog's bound, or streamed, is
// not lent for again.
func (hc *h2Conn) runLent(ctx context.Context, lease sched.Lease, w http.ResponseWriter, r *http.Request) (status int, err error, panicked bool) {
	x := &h2Lent{lease: lease}
	status, err, panicked = hc.call(ctx, w, r, nil, startShared, x)
	taken := !x.given && !lease.End()
	if taken || x.streamed {
		hc.s.routes.slow(r.Method, r.URL.Path)
	}
	return status, err, panicked
}
