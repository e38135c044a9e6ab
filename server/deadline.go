package server

import (
	"context"

	"github.com/sluice-go/sluice/admit"
)

// withDeadline ends the context of an admitted request when the time its
// caller left (admit.TimeoutHeader, read by the admission) runs out, so
// that what the handler calls with it (await's Transport, package client)
// forwards the time that is left, and gives up when none is. The returned
// context ends, and its timer stops, when the request's own one (ctx) ends.
func (c *conn) withDeadline(ctx *reqCtx) context.Context {
	if c.refused {
		return ctx
	}
	dl, ok := c.t.Deadline()
	if !ok {
		return ctx
	}
	dctx, stop := context.WithDeadline(ctx, dl)
	ctx.AfterFunc(stop)
	return dctx
}

// loadHint returns the load hint field of a response (Config.LoadHint):
// the requests the server holds, running and waiting, per worker.
func (srv *Server) loadHint() (key, value string) {
	n, q := srv.adm.Load()
	return admit.LoadHeader, admit.FormatLoad(n, q, srv.s.NumWorkers())
}
