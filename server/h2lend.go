package server

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/lanes"
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
// workers learn them), less those found long on a lease. A route is not
// lent for again once a stream of it flushed on a lease (a stream), or
// once h2LongMax leases in a row were long: held past h2LendLong, or
// taken back by the watchdog (a handler that blocks, or computes for
// long). A lease saves a hand-off, tens of microseconds: a handler that
// runs for milliseconds gains little from it, and loses the worker's
// thread, which runs it beside nothing else, for a goroutine that shares
// Go's Ps with the connections' own. In a row, because a quick handler on
// a machine whose CPUs are busy can be held long now and then, and one
// such lease must not end the route's leases for the life of the server.
// The set is read by every stream, lock-free: a copy-on-write map of at
// most h2MaxRoutes routes, copied only when a route is learned, with each
// route's state in atomics of its own.
type h2Routes struct {
	mu sync.Mutex // serializes writers
	m  atomic.Pointer[map[h2Route]*h2RouteState]
}

// h2RouteState is what the set knows of one route.
type h2RouteState struct {
	long atomic.Int32 // long leases in a row
	slow atomic.Bool  // never lent for again
}

const (
	// h2MaxRoutes bounds the routes the set learns. Each one learned
	// copies the map: a server whose paths carry identifiers (/users/42)
	// learns up to this many, then stops.
	h2MaxRoutes = 1024
	// h2LongMax is how many long leases in a row a route's handlers may
	// have before the route is no longer lent for.
	h2LongMax = 3
	// h2LendLong is how long a lease may last and still count as a
	// quick handler's: ten times or more what it saves.
	h2LendLong = 250 * time.Microsecond
)

// lookup returns the state of the route, or nil when it is not known.
func (q *h2Routes) lookup(method, path string) *h2RouteState {
	m := q.m.Load()
	if m == nil {
		return nil
	}
	return (*m)[h2Route{method, path}]
}

// learn adds the route as quick, unless it is known already or the set
// is full.
func (q *h2Routes) learn(method, path string) {
	if m := q.m.Load(); m != nil && len(*m) >= h2MaxRoutes {
		return // full: no lock taken, on every stream of a new route
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	old := q.m.Load()
	k := h2Route{method, path}
	n := 0
	if old != nil {
		if _, ok := (*old)[k]; ok {
			return
		}
		n = len(*old)
	}
	if n >= h2MaxRoutes {
		return
	}
	m := make(map[h2Route]*h2RouteState, n+1)
	if old != nil {
		for r, st := range *old {
			m[r] = st
		}
	}
	m[k] = new(h2RouteState)
	q.m.Store(&m)
}

// ended records how a lease of the route ended: long (held past
// h2LendLong, or taken back), given back early for a stream (streamed),
// or neither.
func (st *h2RouteState) ended(long, streamed bool) {
	switch {
	case streamed:
		st.slow.Store(true)
	case !long:
		if st.long.Load() != 0 {
			st.long.Store(0)
		}
	case st.long.Add(1) >= h2LongMax:
		st.slow.Store(true)
	}
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

// runLentIfIdle runs the handler of an admitted stream in the Upstream
// lane on the calling goroutine, on a lease of the CPU of the first idle
// worker from wk, when its route is quick; lent is false, and nothing
// ran, otherwise.
func (hc *h2Conn) runLentIfIdle(wk *sched.Worker, lane lanes.ID, w http.ResponseWriter, r *http.Request, t *admit.Ticket) (status int, err error, panicked, lent bool) {
	if lane != lanes.Upstream {
		return 0, nil, false, false
	}
	st := hc.s.routes.lookup(r.Method, r.URL.Path)
	if st == nil || st.slow.Load() {
		return 0, nil, false, false
	}
	lease, ok := hc.s.srv.s.Lend(wk.ID())
	if !ok {
		return 0, nil, false, false
	}
	ctx, cancel := streamContext(r, t)
	defer cancel()
	status, err, panicked = hc.runLent(ctx, lease, st, w, r)
	return status, err, panicked, true
}

// runLent runs the handler of a stream of a quick route (st) on the
// calling goroutine, on a lease of its worker's CPU, ends the lease, and
// records how it ended in st.
func (hc *h2Conn) runLent(ctx context.Context, lease sched.Lease, st *h2RouteState, w http.ResponseWriter, r *http.Request) (status int, err error, panicked bool) {
	x := &h2Lent{lease: lease}
	began := time.Now()
	status, err, panicked = hc.call(ctx, w, r, nil, startShared, x)
	kept := x.given || lease.End()
	st.ended(!kept || time.Since(began) > h2LendLong, x.streamed)
	return status, err, panicked
}
