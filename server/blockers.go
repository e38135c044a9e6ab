package server

import "hash/maphash"

// Bounds of a worker's book of routes.
const (
	// maxRoutes is the most routes a book holds. When it is full, the
	// routes known to be quick are forgotten (they start alone once more,
	// to be learned again); the blocking ones are kept, and past
	// maxRoutes of them a new one is not learned.
	maxRoutes = 4096
	// A blocking route's score s says how often its runs are probes:
	// one start in 2^s of blocking routes starts alone without giving its
	// worker away, so that the watchdog tells whether the route still
	// blocks. A route is learned with blockerScore, and each probe that
	// blocks adds one, up to blockerMax: a route that always blocks costs
	// a stall of its worker (the watchdog's 4 to 6 ms) ever more rarely.
	blockerScore = 6
	blockerMax   = 14
)

// How a request starts (routeBook.start).
const (
	startShared  = iota // in the worker's current thread, as any coroutine
	startAlone          // on a thread of its own (sched.Worker.GoAlone): an unknown route
	startProbe          // alone, a blocking route's probe
	startRelease        // alone, and the worker goes to a spare as it begins
	startAway           // off the executor, on a goroutine of its own: a stream
)

// routeBook is a worker's knowledge of its routes (a request's method and
// path): which handlers hold their thread for long, found blocked by the
// watchdog (a call without sched.Await), which stream their response (a
// Flush: server-sent events, a long poll), and which do neither. A coroutine resumes only on the thread that
// made it, so a handler that blocks its thread strands every other
// coroutine made on that thread (a WebSocket waiting for its next message,
// a request waiting in Await) until it returns. So a request of a route
// the book does not know yet, and of one known to block, starts alone on
// its thread (sched.Worker.GoAlone), where blocking strands nothing; one
// known to block also gives the worker away as its handler begins
// (sched.Worker.Release), rather than after the watchdog found it blocked,
// 4 to 6 ms later, each time; a route known to be quick starts as any
// coroutine. A stream's handler waits between its writes by design, for as
// long as its client stays: it runs off the executor, on a goroutine of
// its own (startAway), as net/http runs every handler, so that a wait
// holds neither a worker nor a thread, however many streams are open. It
// is the worker's: touched only on it, without locks.
type routeBook struct {
	seed  maphash.Seed
	h     maphash.Hash
	m     map[uint64]int8 // route's hash → score: > 0 blocks, or quickRoute, suspectRoute
	runs  uint64          // starts of blocking routes, for the probes
	quick int             // routes in m known to be quick
}

// Scores of the routes that are not blocking ones: known to be quick, or
// found blocked once (see found).
const (
	quickRoute   int8 = -1
	suspectRoute int8 = -2
	streamRoute  int8 = -3 // streams: its handlers run away (startAway)
)

func (b *routeBook) key(method, path string) uint64 {
	if b.m == nil {
		b.seed = maphash.MakeSeed()
		b.h.SetSeed(b.seed)
		b.m = make(map[uint64]int8)
	}
	b.h.Reset()
	_, _ = b.h.WriteString(method)
	_ = b.h.WriteByte(' ')
	_, _ = b.h.WriteString(path)
	return b.h.Sum64()
}

// start says how a request of method and path starts.
func (b *routeBook) start(method, path string) int {
	s, ok := b.m[b.key(method, path)]
	switch {
	case !ok:
		if len(b.m) >= maxRoutes && b.quick == 0 {
			return startShared // full of blocking routes: as before the book
		}
		return startAlone
	case s == quickRoute:
		return startShared
	case s == suspectRoute:
		return startAlone
	case s == streamRoute:
		return startAway
	}
	b.runs++
	if b.runs%(1<<s) == 0 {
		return startProbe
	}
	return startRelease
}

// settled says how a request of method and path starts when the book
// knows the route as one whose handlers need no thread of their own: a
// quick one (startShared) or one that streams (startAway). ok is false for
// any other route. It counts no start.
func (b *routeBook) settled(method, path string) (how int, ok bool) {
	switch b.m[b.key(method, path)] {
	case quickRoute:
		return startShared, true
	case streamRoute:
		return startAway, true
	}
	return 0, false
}

// blocks reports whether the book knows method and path as a route whose
// handlers block their thread, without counting a start.
func (b *routeBook) blocks(method, path string) bool {
	return b.m[b.key(method, path)] > 0
}

// begin says how a request that started as how begins its handler: one
// of a route unknown when it was queued gives its worker away at once if
// the route has been found to block meanwhile, or runs away if it has been
// found to stream (by an earlier request queued beside it).
func (b *routeBook) begin(method, path string, how int) int {
	if how != startAlone {
		return how
	}
	switch s := b.m[b.key(method, path)]; {
	case s > 0:
		return startRelease
	case s == streamRoute:
		return startAway
	}
	return how
}

// found records that the watchdog found a handler of method and path
// holding its thread off the CPU. Once makes the route a suspect, which
// starts alone; twice makes it a blocking one: the watchdog can mistake a
// thread kept from the CPU for a blocked one, and a blocking route's
// handlers run off the worker, outside its lanes and its busy count.
func (b *routeBook) found(method, path string) {
	k := b.key(method, path)
	s, ok := b.m[k]
	switch {
	case s == streamRoute:
		// A stream found waiting before it flushed: it stays a stream.
	case s > 0:
		b.m[k] = min(blockerMax, s+1)
	case s == suspectRoute:
		b.m[k] = blockerScore
	case s == quickRoute:
		b.quick--
		b.m[k] = suspectRoute
	case !ok && b.room():
		b.m[k] = suspectRoute
	}
}

// streamed records that a handler of method and path flushed a response
// not yet begun: a stream (server-sent events, a long poll), which waits
// between its writes by design. The route's next requests run away
// (startAway), for good: a route that streams only now and then costs its
// quick requests a goroutine each, never a stall.
func (b *routeBook) streamed(method, path string) {
	k := b.key(method, path)
	s, ok := b.m[k]
	if s == quickRoute {
		b.quick--
	}
	if ok || b.room() {
		b.m[k] = streamRoute
	}
}

// ended records how a run of method and path that started as how ended:
// blocked when the watchdog found it off the CPU (found counted it) or it
// streamed (streamed did). A run that gave its worker away at once tells
// nothing; any other that did not block makes its route a quick one, or,
// a blocking route's probe, an unknown one.
func (b *routeBook) ended(method, path string, how int, blocked bool) {
	if blocked || how == startRelease || how == startAway {
		return
	}
	k := b.key(method, path)
	s, ok := b.m[k]
	switch {
	case s > 0:
		delete(b.m, k)
	case s == suspectRoute || !ok && b.room():
		b.m[k] = quickRoute
		b.quick++
	}
}

// hijacked records that a handler of method and path took its connection
// over (Hijack) and serves it from its coroutine, whose reads and writes
// wait off the worker (handlerConn): a WebSocket, which never holds its
// thread. An unknown route becomes a quick one, so that its next requests
// start as any coroutine rather than each on a thread of its own.
func (b *routeBook) hijacked(method, path string) {
	k := b.key(method, path)
	if _, ok := b.m[k]; !ok && b.room() {
		b.m[k] = quickRoute
		b.quick++
	}
}

// room makes room for one more route if the book is full, forgetting the
// quick ones, and reports whether there is.
func (b *routeBook) room() bool {
	if len(b.m) < maxRoutes {
		return true
	}
	for k, s := range b.m {
		if s == quickRoute {
			delete(b.m, k)
		}
	}
	b.quick = 0
	return len(b.m) < maxRoutes
}
