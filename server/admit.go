package server

import (
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/reject"
)

// Header fields of a rejection (see package reject, which defines them for
// the net/http middleware too).
const (
	// NotStartedHeader marks a response to a request the server refused
	// before any work on it began: it is safe to retry, here later or on
	// another server.
	NotStartedHeader = reject.NotStartedHeader
	// ReasonHeader says why: the name of the gate or policy that refused,
	// or "queue-timeout", "queue-full" and the like.
	ReasonHeader = reject.ReasonHeader
)

// Stats returns the admission counters: requests in flight, admitted,
// queued, rejected by reason, the time the gates were closed, the age limit
// in force and the queue's counters.
func (srv *Server) Stats() admit.Stats { return srv.adm.Stats() }

// Pipeline returns the server's admission pipeline, for its queue and to
// change its age limit live.
func (srv *Server) Pipeline() *admit.Pipeline { return srv.adm }

// reject answers the current request with its rejection, through the
// request's ResponseWriter (the request's coroutine).
func (c *conn) reject(w *ResponseWriter) {
	a, extra := c.t.Answer()
	c.refusedAt = time.Now().UnixNano()
	c.boundRejectionWrite()
	a.SetHeader(w.Header(), false, extra) // the writer sets the length
	w.WriteHeader(a.Status)
	_, _ = w.WriteString(a.Body)
}

// boundRejectionWrite bounds the write of the current rejection, whatever
// the configuration: a rejection is the server's own answer, and a client
// that does not read it (one that pipelines requests and never reads the
// answers) must not keep its connection, and the connection's descriptor,
// for ever. It has the time it had to send its head (the header timeout,
// DefaultReadHeaderTimeout when there is none), or WriteTimeout when that
// is shorter; then the write is abandoned and the connection closed.
func (c *conn) boundRejectionWrite() {
	d := c.srv.headTimeout
	if d <= 0 {
		d = DefaultReadHeaderTimeout
	}
	dl := c.w.Now() + int64(d)
	if cur := c.writeDL.Load(); cur == 0 || dl < cur {
		c.writeDL.Store(dl)
		c.armActive()
	}
}
