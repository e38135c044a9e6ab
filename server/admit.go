package server

import (
	"net/http"
	"time"

	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/queue"
	"github.com/sluice-go/sluice/reject"
)

// Gate is what the server asks before a request's handler starts: Acquire
// reports whether it may start now, and an admitted request is released with
// its latency when its handler returns. The gate package has the gates
// (busy workers, concurrency limits, memory, CPU, and compositions of them).
type Gate = gate.Gate

// reasonGate is a gate made of others that names the one that refused, as
// gate.Chain does.
type reasonGate interface {
	Admit() (refused gate.Gate, ok bool)
}

// Header fields of a rejection (see package reject, which defines them for
// the net/http middleware too).
const (
	// NotStartedHeader marks a response to a request the server refused
	// before any work on it began: it is safe to retry, here later or on
	// another server.
	NotStartedHeader = reject.NotStartedHeader
	// ReasonHeader says why: the name of the gate that refused, or
	// "queue-timeout", "queue-full" and the like.
	ReasonHeader = reject.ReasonHeader
)

// Rejection configures the answer to requests the server refuses to start.
// The zero value answers 503 Service Unavailable with Retry-After: 1, the
// two Sluice-* fields and a one-line text body, and keeps the connection
// (the request's body is read and discarded, as for any request).
type Rejection struct {
	// Status is the status code; zero means 503.
	Status int
	// RetryAfter is sent as Retry-After, rounded up to whole seconds;
	// zero means 1 s, negative means no Retry-After field.
	RetryAfter time.Duration
	// Header holds extra fields for every rejection.
	Header http.Header
	// OnReject, if set, is called on the worker for each rejection,
	// before the answer is written, with the request and the reason; it
	// must not block.
	OnReject func(r *Request, reason string)
}

// Stats are the server's admission counters.
type Stats struct {
	// InFlight is the number of admitted requests whose handlers run.
	InFlight int64
	// Admitted and Rejected count requests since the server started.
	Admitted int64
	Rejected int64
	// RejectedBy counts rejections by reason.
	RejectedBy map[string]int64
	// GateClosed is the total time the gate has been closed, as the
	// server saw it: from a refusal to the next admission.
	GateClosed time.Duration
	// Queue holds the admission queue's counters (zero without a queue).
	Queue queue.Stats
}

// admission holds the server-wide admission state. The counts of admitted
// and in-flight requests are per worker (workerState), written by their
// worker alone, so that the path of every request touches no shared cache
// line; Stats adds them up.
type admission struct {
	closed gate.ClosedTime
	answer *reject.Answer // the rejections' shared parts and counts
}

func (a *admission) init(rj *Rejection) {
	a.answer = reject.NewAnswer(rj.Status, rj.RetryAfter, rj.Header)
}

// Stats returns the admission counters.
func (srv *Server) Stats() Stats {
	var st Stats
	for _, ws := range srv.ws {
		st.InFlight += ws.inFlight.Load()
		st.Admitted += ws.admitted.Load()
	}
	st.Rejected, st.RejectedBy = srv.adm.answer.Counts()
	st.GateClosed = srv.adm.closed.Total(srv.s.Now)
	if srv.q != nil {
		st.Queue = srv.q.Stats()
	}
	return st
}

// reject answers r with the configured rejection.
func (c *conn) reject(w *ResponseWriter, r *Request, reason string) {
	a := c.srv.adm.answer
	e := a.Count(reason)
	if fn := c.srv.cfg.Reject.OnReject; fn != nil {
		fn(r, reason)
	}
	a.SetHeader(w.Header(), e, false) // the writer sets the length
	w.WriteHeader(a.Status())
	_, _ = w.WriteString(e.Body)
}
