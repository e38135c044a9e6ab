package admit

import (
	"net/http"
	"sync/atomic"

	"github.com/sluice-go/sluice/queue"
	"github.com/sluice-go/sluice/reject"
)

// Ticket is one request's passage through a pipeline. The adapter owns it,
// typically embedded in its per-request or per-connection state so that a
// decision allocates nothing, and reuses it for the next request once the
// last one has ended (Done, Cancel, a rejection, or a successful Withdraw).
//
// Before Decide, the adapter fills the Attempt's request fields (Shard
// among them) and Stamp; it sets OnStart and OnReject once.
type Ticket struct {
	Attempt
	// Stamp is when the request arrived, in Unix nanoseconds: the sluice
	// server gives the kernel's receive stamp of the read that completed
	// its head. Zero when unknown, and the age limit then does not apply.
	Stamp int64
	// Resent is set by the adapter when the request came on a connection
	// whose previous request was refused, within ResendWindow of that
	// answer: a client that resends the moment it is refused (the sluice
	// server sets it; see FutileRatio).
	Resent bool
	// OnStart is called when a request that waited is admitted, on the
	// goroutine that started it (a worker that went idle, a request that
	// ended, the queue's timer), after the pipeline has counted it. The
	// adapter then runs the request, and calls Done when it ends (or
	// Cancel if it cannot run after all).
	OnStart func()
	// OnReject is called when a request that waited is rejected (its time
	// is up, the queue is full or closed), on the goroutine that decided
	// it; Answer then says how to answer. Neither callback is called for a
	// decision that Decide returns itself.
	OnReject func()

	p        *Pipeline
	entry    queue.Entry
	arrived  int64  // on the pipeline's clock, when known
	known    bool   // arrived is known
	started  int64  // when it was admitted, on the pipeline's clock
	blameAt  uint64 // the closed-time integral at its start (closedTime)
	blamed   bool   // counted in the closed-time integral
	until    int64  // when the caller's time runs out, on the pipeline's clock; 0: none
	policies bool   // the policies admitted it and hold it
	aged     bool   // refused at MaxAge: the next Decide records whether it was resent (window.go)
	answer   *reject.Answer
	extra    http.Header
	phase    atomic.Uint32
	startFn  func()
	rejectFn func(queue.Reason)
}

// Phases of a ticket that waits: a decision made while Decide still runs
// (by its own pump, or by another goroutine's) is returned by Decide rather
// than reported through the callbacks.
const (
	phaseIdle uint32 = iota
	phaseDeciding
	phaseStartedEarly
	phaseRejectedEarly
	phaseWaiting
)

// Answer returns how to answer a rejected request: the prebuilt answer for
// its reason, status and Retry-After, and the refusal's own extra fields
// (nil when none). It is valid after Decide returned Rejected, after
// OnReject, Cancel, or a Withdraw that returned true.
func (t *Ticket) Answer() (*reject.Answer, http.Header) { return t.answer, t.extra }
