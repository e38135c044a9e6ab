package admit

import (
	"net/http"
	"sync/atomic"
	"time"

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
	// Prior and Since say what the request came after on its connection,
	// as the adapter saw it (the sluice server sets them): the answer to
	// the request before it, served or refused, and how long after that
	// answer it came; PriorNone for a connection's first request, one the
	// client had pipelined behind the one before, or when unknown. They
	// tell a client that sends again the moment it is answered: one that
	// resends at once when refused (Resent; FutileRatio), one that loops
	// (AtOnce; Config.LoopGrace).
	Prior Prior
	Since time.Duration
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
	answer   *reject.Answer
	extra    http.Header
	phase    atomic.Uint32
	startFn  func()
	rejectFn func(queue.Reason)
}

// Prior is what a request came after on its connection (Ticket.Prior).
type Prior uint8

// The priors a request can have.
const (
	// PriorNone: the connection's first request, one the client had
	// pipelined behind the one before (sent before that one's answer), or
	// unknown.
	PriorNone Prior = iota
	// PriorAnswer: the request came after the answer to the one before
	// it, which was served.
	PriorAnswer
	// PriorRefusal: the request came after the refusal of the one before
	// it.
	PriorRefusal
)

// Resent reports whether the request came within ResendWindow of the
// refusal of the one before it on its connection: a client that resends
// the moment it is refused.
func (t *Ticket) Resent() bool { return t.Prior == PriorRefusal && t.Since < ResendWindow }

// AtOnce reports whether the request came within ResendWindow of the
// answer to the one before it on its connection, which was served: a
// client that sends each request the moment the last is answered, as a
// closed loop does.
func (t *Ticket) AtOnce() bool { return t.Prior == PriorAnswer && t.Since < ResendWindow }

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
