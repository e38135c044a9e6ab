package server

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Gate is what the server asks before a request's handler starts: Acquire
// reports whether it may start now, and an admitted request is released with
// its latency when its handler returns. The gate package has the gates
// (busy workers, concurrency limits, memory, CPU, and compositions of them).
type Gate interface {
	Acquire() bool
	Release(latency time.Duration)
	Name() string
}

// Header fields of a rejection.
const (
	// NotStartedHeader marks a response to a request the server refused
	// before any work on it began: it is safe to retry, here later or on
	// another server.
	NotStartedHeader = "Sluice-Not-Started"
	// ReasonHeader says why: the name of the gate that refused, or
	// "queue-timeout", "queue-full" and the like.
	ReasonHeader = "Sluice-Reject-Reason"
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
}

// admission holds the counters; each update is one atomic add (and a map
// lookup for the reason of a rejection).
type admission struct {
	inFlight atomic.Int64
	admitted atomic.Int64
	rejected atomic.Int64
	reasons  sync.Map // string → *atomic.Int64
}

func (a *admission) countReject(reason string) {
	a.rejected.Add(1)
	v, ok := a.reasons.Load(reason)
	if !ok {
		v, _ = a.reasons.LoadOrStore(reason, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}

// Stats returns the admission counters.
func (srv *Server) Stats() Stats {
	st := Stats{
		InFlight:   srv.adm.inFlight.Load(),
		Admitted:   srv.adm.admitted.Load(),
		Rejected:   srv.adm.rejected.Load(),
		RejectedBy: map[string]int64{},
	}
	srv.adm.reasons.Range(func(k, v any) bool {
		st.RejectedBy[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return st
}

// reject answers r with the configured rejection.
func (c *conn) reject(w *ResponseWriter, r *Request, reason string) {
	rj := &c.srv.cfg.Reject
	c.srv.adm.countReject(reason)
	if rj.OnReject != nil {
		rj.OnReject(r, reason)
	}
	h := w.Header()
	for k, vv := range rj.Header {
		h[k] = append([]string(nil), vv...)
	}
	h.Set(NotStartedHeader, "1")
	h.Set(ReasonHeader, reason)
	if d := rj.RetryAfter; d >= 0 {
		if d == 0 {
			d = time.Second
		}
		h.Set("Retry-After", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	status := rj.Status
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	w.WriteHeader(status)
	_, _ = w.WriteString("request not started: " + reason + "\n")
}
