package server

import (
	"errors"

	"github.com/sluice-go/sluice/admit"
)

// SparesReason is the Sluice-Reject-Reason of a request refused because its
// route blocks its thread and no spare thread is left to run it beside
// the worker (the runtime's MaxSpares are all in use).
const SparesReason = "spares"

// errNoSpare ends an HTTP/2 stream unstarted when its route blocks its
// thread and no spare thread is left for it.
var errNoSpare = errors.New("server: no spare thread for a route that blocks")

// sparesPolicy is the server's own first admission policy: it refuses a
// request whose route the worker's book knows to block its thread (a
// handler that calls without sched.Await and waits) while no spare thread
// can be had for the worker. Started, such a handler would hold the
// worker's own thread, and every connection of that worker would wait
// with it until it returned; refused, it gets a 503 that says it was not
// started, and the other routes go on. It asks the book only once the
// spares are spent, so it costs an atomic load on every other request.
type sparesPolicy struct {
	srv     *Server
	refusal *admit.Refusal
}

func newSparesPolicy(srv *Server) *sparesPolicy {
	return &sparesPolicy{srv: srv, refusal: &admit.Refusal{Reason: SparesReason}}
}

// Admit refuses a request of HTTP/1.1, which decides on the worker of
// a.Shard, where the book lives. An HTTP/2 stream decides on x/net's
// goroutine, which must not read the book: its route is looked up when it
// starts on the worker.
func (p *sparesPolicy) Admit(a *admit.Attempt) *admit.Refusal {
	srv := p.srv
	r, ok := a.Request.(*Request)
	if !ok || r.ProtoMajor != 1 || uint(a.Shard) >= uint(len(srv.ws)) {
		return nil
	}
	if srv.s.Worker(a.Shard).SpareFree() || !srv.ws[a.Shard].routes.blocks(a.Method, a.Path) {
		return nil
	}
	return p.refusal
}

// Done does nothing.
func (p *sparesPolicy) Done(*admit.Attempt, admit.Outcome) {}

// Name returns SparesReason.
func (p *sparesPolicy) Name() string { return SparesReason }
