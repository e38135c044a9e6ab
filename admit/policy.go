package admit

import (
	"net/http"
	"net/netip"
	"time"

	"github.com/sluice-go/sluice/queue"
)

// Policy is one rule of admission. The pipeline asks it, before any of a
// request's work has begun, whether the request may start, and tells it when
// a request it admitted has ended. The gates of package gate are policies;
// so is anything that implements these two methods.
//
// Admit and Done are called from many goroutines at once (every worker, or
// every request's goroutine) and, for a request waiting in the queue, with
// the queue's lock held: they must be quick, must not block, and must not
// call the Pipeline. They should allocate nothing on the admitted path.
type Policy interface {
	// Admit decides for the request that a describes: nil admits it; a
	// Refusal refuses it and says why. A policy may keep something for an
	// admitted request (a slot of a concurrency limit); Done gives it back.
	Admit(a *Attempt) *Refusal
	// Done ends a request that Admit admitted, exactly once, with its
	// outcome. An outcome with Canceled set is an admission that never ran
	// (a later policy refused the request, or its client went away before
	// it started): give back what Admit took, learn nothing from it.
	Done(a *Attempt, o Outcome)
}

// Attacher is implemented by policies that need something of the server
// they protect, or that can tell when they may have opened. The pipeline
// calls Attach once, when it is built, and calls the returned detach
// function when it is closed, so that a pipeline that is closed is no longer
// reachable from what it attached to (a long-lived runtime, a gate shared
// with another server). An error from Attach makes the pipeline's
// construction fail with it.
type Attacher interface {
	Attach(env Env) (detach func(), err error)
}

// Env is what a pipeline gives the policies it attaches.
type Env struct {
	// Executor is the sluice executor the requests run on; nil when the
	// pipeline runs outside it (net/http middleware).
	Executor Executor
	// Wake tells the pipeline that the policy may have opened for n more
	// requests (n <= 0: for any number), so that it starts waiting
	// requests now, without polling: a worker went idle (1), a limit was
	// raised by n, a measurement was refreshed and is good again (0). It
	// may be called from any goroutine, spuriously, and concurrently with
	// itself; it must not be called from inside Admit or Done.
	Wake func(n int)
	// Now is the pipeline's clock, in monotonic nanoseconds.
	Now func() int64
	// GatesClosed returns how long the gates have been closed since the
	// pipeline was built (Stats.GatesClosed), up to now.
	GatesClosed func() time.Duration
	// Shards is the number of counter shards (Host.Shards, at least 1):
	// a policy may keep its per-request counters in as many shards,
	// picked by Attempt.Shard, so that requests on different workers
	// touch no shared cache line. Zero means 1.
	Shards int
	// PickHeader asks the adapter to pick out the header field name
	// while it parses each request and to hand its first value over in
	// Attempt.Picked, where a Key reads it without a map lookup (see
	// Pipeline.PickedHeaders). A policy that keys by a header calls it
	// from Attach; nil when the pipeline takes no more names.
	PickHeader func(name string)
	// TrimsShares reports that the pipeline trims the excess of a client
	// beyond its share itself: it has an age limit, and either no gates
	// or the timed queue. A request of a client that a ShareKeeper says is
	// beyond its share then waits at most half of MaxAge, and behind every
	// other request in the queue, so that the server, busy with that
	// client's requests rather than idle, refuses their excess without
	// delaying anyone else's (see ShareKeeper). A ShareKeeper may then
	// let such a client through more freely than its share: package
	// tenant's Tracker does. With gates and no queue, a gate refuses
	// whoever comes, so nothing would trim that client alone.
	TrimsShares bool
}

// Executor is the part of the sluice executor that admission reads: the
// instantaneous busy-worker count and a notification when a worker goes
// idle. *sched.Scheduler (and so *runtime.Runtime) implements it.
// Implementations must be comparable (a pointer), so that a gate can tell
// whether two pipelines run on the same executor.
type Executor interface {
	// Busy returns the number of workers not parked now, one atomic load.
	Busy() int
	// NumWorkers returns the number of workers; it does not change.
	NumWorkers() int
	// NotifyIdle registers fn to be called on a worker each time it runs
	// out of work, after the busy count has dropped; the returned function
	// removes it.
	NotifyIdle(fn func()) (remove func())
}

// Attempt describes a request to the policies. The adapter that owns the
// pipeline fills the request fields; the pipeline sets the others.
type Attempt struct {
	// Method, Path and Header are the request's; Header must not be
	// modified.
	Method string
	Path   string
	Header http.Header
	// Picked holds the first values of the header fields that the
	// pipeline's policies key by (Pipeline.PickedHeaders), as the adapter
	// picked them out while it parsed the request: a Field of each name,
	// with an empty Value when the request has none. Key.Of reads a header
	// there first, without a map lookup. Nil when the adapter picks
	// nothing (then Key.Of looks in Header): it must agree with Header.
	Picked []Field
	// Peer is the client's address, when the adapter has it parsed (the
	// sluice server); RemoteAddr is the same as text, when it has it so
	// (net/http's Request.RemoteAddr). Client gives either.
	Peer       netip.AddrPort
	RemoteAddr string
	// Request is the adapter's own request, for policies that need more:
	// a *server.Request on the sluice server, an *http.Request in the
	// net/http middleware.
	Request any

	// Tenant is what a tenant policy (package tenant) keeps for the
	// request between its Admit and Done: it sets it in Admit, nil for a
	// request it does not track. Other policies may read it; only the
	// tenant policy sets it.
	Tenant any

	// Shard picks the counters the request is counted in: the sluice
	// server gives each worker its own (Host.Shards), so that requests on
	// different workers touch no shared cache line. Policies that keep
	// counters per shard (Env.Shards) read it too. Out of range means 0.
	Shard int

	// Lane is the name of the executor lane the request will run in, set
	// by the adapter before the policies are asked (the sluice server's
	// Config.Lanes); empty for the built-in lanes, and always on net/http.
	// gate.ForLanes gives a gate to some lanes only; ClassByLane queues by
	// lane.
	Lane string

	// Class is the request's priority class in the queue, set by
	// QueueConfig.Classify when the request is about to wait.
	Class queue.Class
	// Spare is set when the goroutine that asks is not the one the request
	// will take the place of: a worker that went idle starting a waiting
	// request, a gate's refresh. It is unset when the caller counts itself
	// (the worker parsing the request, a net/http request's own goroutine,
	// a request that just ended handing its place on). A policy that counts
	// running work (busy workers, running goroutines) counts one more when
	// it is set.
	Spare bool
}

// Field is a header field's canonical name and its first value.
type Field struct {
	Name, Value string
}

// Client returns the client's address: Peer, or RemoteAddr parsed (the
// zero AddrPort when neither is known). Parsing costs tens of nanoseconds,
// so the net/http middleware leaves it to the policies that need it.
func (a *Attempt) Client() netip.AddrPort {
	if a.Peer.IsValid() {
		return a.Peer
	}
	if r := a.RemoteAddr; r == "" || (r[0] != '[' && (r[0] < '0' || r[0] > '9')) {
		return netip.AddrPort{} // not an address (a Unix socket's "@"): parsing would allocate an error
	}
	ap, _ := netip.ParseAddrPort(a.RemoteAddr)
	return ap
}

// Refusal is a policy's reason to refuse a request. Policies build their
// refusals once and return the same pointer every time; the pipeline never
// modifies one, and builds the answer's wire form once per reason, status
// and Retry-After.
type Refusal struct {
	// Reason names why, in the answer's Sluice-Reject-Reason field and in
	// the counters: "busy", "concurrency", "rate-limit", ...
	Reason string
	// Status is the answer's status code: zero means the pipeline's
	// (Rejection.Status, 503 by default), for an overload; a quota says
	// 429.
	Status int
	// RetryAfter is the answer's Retry-After, rounded up to whole seconds:
	// zero means the pipeline's (Rejection.RetryAfter, 1 s by default),
	// negative means no Retry-After field.
	RetryAfter time.Duration
	// Header holds extra fields for this answer (a quota's RateLimit
	// fields), or nil.
	Header http.Header
}

// Outcome is how an admitted request ended.
type Outcome struct {
	// Latency is how long it ran, from its admission to its end; the
	// pipeline measures it on its clock.
	Latency time.Duration
	// Status is the response's status code, 0 when none was written.
	Status int
	// Err is set when the handler failed: it panicked, or the response
	// could not be written.
	Err error
	// Blame is the request's share of the time the gates were closed
	// while it ran: each nanosecond they were closed is shared equally
	// among the requests running during it. It is measured only when a
	// policy of the pipeline implements BlameUser (zero otherwise).
	Blame time.Duration
	// Canceled is set when the admission never ran; Latency, Status,
	// Err and Blame are then zero.
	Canceled bool
}

// Unasked is implemented by policies that count the requests refused
// before they were asked: by the age limit, a deadline, or a policy ahead
// of them. The tenant policy counts them in its tenants' demand: with the
// age limit alone (the server's default), they are the requests an
// overloaded server refuses. Unasked is called on the deciding goroutine,
// once per such refusal, with the refusal; like Admit, it must be quick,
// must not block and must not call the Pipeline.
type Unasked interface {
	Unasked(a *Attempt, r *Refusal)
}

// ShareKeeper is implemented by policies that know whether a request's
// client is within its fair share of the server: package tenant's Tracker,
// while its drop table drops some tenant. Share is asked of requests old
// enough that a lower limit would refuse them, on the deciding goroutine,
// before the policies' Admit; like Admit, it must be quick, must not block
// and must not call the Pipeline. The pipeline uses the answers twice:
//
//   - While an overload's line stands, it refuses at the lower limit
//     (Config.Target) only the requests that are not within their share;
//     those that every ShareKeeper says are within it keep the full age
//     limit (MaxAge). So the overload that a client beyond its share
//     brings is refused from its own requests, and not from the others'.
//   - When the pipeline trims (Env.TrimsShares: an age limit, and no gates
//     or the timed queue), a request of a client beyond its share waits at
//     most half of MaxAge, standing line or not, and in the queue it waits
//     in the least important class, behind every other request, whatever
//     its own class. The line that such a client's requests make then
//     never delays anyone else's, however many of them the ShareKeeper
//     lets through.
type ShareKeeper interface {
	Share(a *Attempt) Share
}

// Share is where a request's client stands against its fair share of the
// server, as a ShareKeeper says.
type Share uint8

const (
	// ShareUnknown: no share is enforced now, or the keeper cannot tell.
	ShareUnknown Share = iota
	// ShareWithin: the client is within its share.
	ShareWithin
	// ShareBeyond: the client is beyond its share (package tenant: its
	// tenant's requests are dropped in part).
	ShareBeyond
)

// BlameUser is implemented by policies that read Outcome.Blame (package
// tenant's). A pipeline measures blame only when one of its policies or
// gates implements it and UsesBlame returns true: per request, it costs
// two reads of words shared by every worker while the gates are open, and
// a compare-and-swap on one at the start and at the end while they are
// closed.
type BlameUser interface {
	UsesBlame() bool
}
