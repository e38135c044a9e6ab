// Package httpgate puts sluice's admission gates and timed queue in front of
// a plain net/http handler, for servers that stay on net/http.
//
// A request that the gate admits is served at once. One that it refuses
// waits in a timed queue (if one is configured) until the gate admits it or
// its deadline passes, and is otherwise answered, before any of its work has
// begun, the way the sluice server answers: 503 Service Unavailable with
// Retry-After: 1, Sluice-Not-Started: 1 (safe to retry, here later or
// elsewhere), Sluice-Reject-Reason naming why, and the body
// "request not started: <reason>\n", on a connection that stays open.
//
//	a := httpgate.New(httpgate.Options{
//		Gate:        gate.All(gate.NewGoSched(gate.GoSchedOptions{}), gate.NewConcurrency(256)),
//		Queue:       &queue.Options{Order: queue.CoDel},
//		ClassHeader: "X-Priority",
//	})
//	defer a.Close()
//	http.ListenAndServe(":8080", a.Wrap(mux))
//
// # Which gates
//
// Outside the sluice executor there is no busy-worker count, so gate.Busy
// does not apply. What does: gate.Concurrency (a fixed limit, settable
// live), gate.Adaptive (a limit learned from the latencies the middleware
// gives Release), gate.Memory (the cgroup's free memory), gate.CPU (the
// delayed OS CPU average, for comparison) and gate.GoSched, which counts
// the Go scheduler's running and runnable goroutines: the nearest thing to
// the busy count that a goroutine-per-request server has. Combine them with
// gate.All; the reason of a refusal is then the name of the member that
// refused.
//
// # Flow of a request
//
//  1. If requests are waiting in the queue, the new one joins them (it does
//     not overtake them even if the gate is open now).
//  2. Otherwise it asks the gate (Acquire, or Chain.Admit to learn which
//     member refused). Admitted: it is served; refused with no queue: it is
//     rejected with the gate's name as the reason.
//  3. A refused request is pushed into the queue with its class
//     (Options.Classify, or the class named by Options.ClassHeader, else
//     queue.Default) and blocks until the queue starts it or rejects it
//     ("queue-timeout", "queue-full", "queue-evicted", "queue-closed"), or
//     its context ends ("queue-canceled").
//  4. When a served request ends (its handler returns or panics), the
//     middleware calls the gate's Release with the handler's duration (0
//     for the gates of package gate that ignore it, which saves two clock
//     reads), then starts the queue's head if the gate admits it.
//
// Nothing polls. The queue's head is started on three events: a request
// ends (its place goes to the head: at most one start, asked with Acquire
// since the ending goroutine still counts in a GoSched reading), a request
// has just been pushed (the gate may have opened between its refusal and
// the push, and the pusher is about to park: again at most one start, asked
// with Acquire), and the gate says it may have opened (gate.Waker: a
// Concurrency or Adaptive slot freed, a Memory or CPU refresh; as many
// starts as the gate admits, asked with gate.IdleAcquirer's AcquireIdle
// where the gate has it, since that caller is not the goroutine that will
// run the request). A gate that is not a Waker (GoSched) is thus reopened
// only by request ends and arrivals; with no request in flight and none
// arriving, waiting requests time out.
//
// # The queue
//
// The middleware owns its queue: Options.Queue holds the queue's options,
// and New creates the queue from them with Options.Arm wired to a
// time.AfterFunc timer of its own that calls Expire at the earliest
// deadline, so no goroutine polls and a timer that has fired leaves nothing
// behind. Arm and Admit must therefore be unset (New panics otherwise);
// every other field, Clock included, is the caller's. Queue returns the
// queue, for its Stats and Len. Close closes the queue (waiting requests
// are rejected with "queue-closed", later refusals too) and stops the
// timer; without a queue there is nothing to close.
//
// # The rejection
//
// The answer is built from fields computed once (Options.Rejection: the
// status, 503 by default; Retry-After, 1 s by default, rounded up to whole
// seconds, none if negative; extra header fields), shared between
// responses: do not modify the value slices of a rejection's header fields
// in a wrapping middleware. Before answering an HTTP/1.x request, the
// middleware reads and discards what is left of its body, up to 256 KiB,
// so that the connection can carry the next request; a larger body, one
// that fails to read, or one the client is holding back for "Expect:
// 100-continue" (reading it would ask the client to send it) gets
// "Connection: close" instead. HTTP/2 needs neither: the stream is reset.
// (net/http notices that a client went away only once the request's body
// has been read, so a request with a body waits out its deadline even if
// its client is gone.)
// Options.Rejection.OnReject, if set, sees every rejection with its reason
// before the answer is written.
//
// # Counters
//
// Stats returns the requests in flight, admitted (at once or after
// waiting), queued, and rejected by reason, with the queue's own Stats.
// Each request costs a few atomic adds; a rejection also looks its reason
// up in a sync.Map. The admitted fast path allocates nothing (see
// BenchmarkMiddleware).
package httpgate
