package server

// One request's passage: its admission's outcome (started, queued, refused),
// its handler's run as a coroutine on the connection's worker, the body it
// left unread, and the pipeline's callbacks for a request that waited in
// the timed queue. conn.go holds the connection around it: reading heads,
// timeouts, closing.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/reject"
	"github.com/sluice-go/sluice/sched"
)

// start runs the request's handler, as a coroutine started in the current
// task: Upstream when the whole head came at once, Continuation when it
// came in pieces. x is the request's state, h's value slices perhaps in it.
func (c *conn) start(h *head, x *reqState) {
	c.disarm()
	c.fresh = false
	c.lastPost = h.method == "POST"
	u := &x.url
	if err := parseTarget(h.method, h.target, u); err != nil {
		c.fail(errMalformed)
		return
	}
	if h.expect != "" && h.expect != "100-continue" {
		c.fail(&reqError{status: http.StatusExpectationFailed, empty: true})
		return
	}
	if max := c.srv.cfg.MaxBodyBytes; max > 0 && h.contentLength > max {
		c.fail(bodyTooLarge(h.contentLength, max))
		return
	}
	c.state = connActive
	c.closeAfter.Store(h.wantsClose || c.srv.stopping.Load())
	host := u.Host
	if host == "" {
		host = h.host
	}
	x.req = Request{
		Method: h.method, RequestURI: h.target, URL: u,
		Proto: h.proto, ProtoMajor: h.major, ProtoMinor: h.minor,
		Header: h.header, Host: host,
		ContentLength: max(h.contentLength, 0), Chunked: h.chunked,
		Close: h.wantsClose, RemoteAddr: c.nc.RemoteAddr(), TLS: c.tlsState, c: c,
	}
	r := &x.req
	if h.chunked {
		r.ContentLength = -1
	}
	b := &x.body
	*b = body{c: c, r: r, remaining: r.ContentLength, chunked: h.chunked, limit: c.srv.cfg.MaxBodyBytes}
	c.rw, c.st = &x.rw, x
	b.continueWanted = h.expect != "" && h.minor >= 1 && (h.chunked || h.contentLength > 0)
	if !h.chunked && r.ContentLength == 0 {
		b.done = true
	}
	r.Body = b
	c.body, c.cur = b, r
	c.startDeadlines()
	t := &c.t
	t.Method, t.Path, t.Header, t.Peer, t.Request = r.Method, u.Path, r.Header, c.nc.RemoteAddr(), r
	t.Stamp = c.arrived
	// What the client sent this request after, and how soon: right after
	// a refusal, a client that resends at once (admit.FutileRatio); right
	// after a served answer, a closed loop's (admit.Config.LoopGrace). One
	// it had pipelined behind the request before reached the server before
	// that one's answer left it (its stamp is older), whenever it starts.
	t.Prior, t.Since = admit.PriorNone, 0
	switch {
	case c.refusedAt != 0 && c.stamp >= c.refusedAt:
		t.Prior, t.Since = admit.PriorRefusal, time.Duration(c.stamp-c.refusedAt)
	case c.answered != 0 && c.stamp >= c.answered:
		t.Prior, t.Since = admit.PriorAnswer, time.Duration(c.stamp-c.answered)
	}
	c.refusedAt, c.answered = 0, 0
	t.Picked = nil
	if n := len(h.pick); n > 0 && !h.pickFailed {
		t.Picked = c.picked[:n]
		copy(t.Picked, h.picked[:n])
	}
	t.Lane, c.lane = "", lanes.Upstream
	if lr := c.srv.lanes; lr != nil {
		if c.scratch == nil {
			c.scratch = new(http.Request)
		}
		if ref, ok := lr.route(r, &t.Attempt, c.scratch); ok && ref.id != lanes.Upstream {
			t.Lane, c.lane = ref.name, ref.id
		}
	}
	switch c.srv.adm.Decide(t) {
	case admit.Admitted:
		c.admitted = true
	case admit.Rejected:
		c.refused = true
	case admit.Queued:
		// Nothing of it is read meanwhile; OnStart or OnReject comes
		// back to this worker.
		c.state = connQueued
		_ = c.nc.OnReadable(lanes.Continuation, nil)
		return
	}
	c.run()
}

// run starts the current request's coroutine: its handler, or its
// rejection when c.refused is set. A request of a lane of its own (see
// Lanes) is queued in that lane; the others start at once, in the current
// task.
func (c *conn) run() {
	if c.refused && c.rejectNow() {
		return
	}
	lane := c.lane
	if c.refused {
		lane = lanes.Upstream // an answer, not the lane's work
	}
	if c.body.done {
		// Nothing more to read for this request: keep reading, to learn
		// if the client goes away (and to take pipelined requests).
		_ = c.nc.OnReadable(lanes.Continuation, c.onData)
	} else {
		// The body is read by the handler, on demand.
		_ = c.nc.OnReadable(lanes.Continuation, nil)
	}
	job := &c.st.job
	job.Parent = &c.cctx
	c.how, c.streamed = startShared, false
	if !c.refused {
		c.how = c.ws.routes.start(c.cur.Method, c.cur.URL.Path)
	}
	switch c.how {
	case startAlone:
		// The route may be learned while the request waits in its lane
		// (the first of a burst of WebSockets taken over): stillAlone.
		c.w.GoAloneWhile(job, lane, c.serveFn, c.stillAloneFn)
		return
	case startProbe, startRelease:
		c.w.GoAlone(job, lane, c.serveFn)
		return
	}
	if lane > lanes.Upstream {
		c.w.Go(job, lane, c.serveFn)
		return
	}
	c.w.GoNow(job, c.serveFn)
}

// stillAlone reports, as a request that started alone because its route
// was unknown is about to run, whether it still needs a thread of its own:
// not once an earlier request has shown the route quick (a WebSocket taken
// over counts as one) or streaming, whose handlers run away (routeBook).
// A request that no longer needs one starts on the worker's thread, as a
// quick route's does.
func (c *conn) stillAlone() bool {
	r := c.cur
	if r == nil || r.URL == nil {
		return true
	}
	how, ok := c.ws.routes.settled(r.Method, r.URL.Path)
	if ok {
		c.how = how
	}
	return !ok
}

// rejectNow answers the current request with its rejection directly,
// without a coroutine, a header map or a ResponseWriter: the answer's
// fields are prebuilt (reject.Answer.Fields), so it costs a Date, one write
// and the bookkeeping. It applies to the plain case, a bodiless HTTP/1.1
// request on a connection that stays open, and reports false otherwise (the
// coroutine answers).
func (c *conn) rejectNow() bool {
	r := c.cur
	if !c.body.done || r.ProtoMinor != 1 || r.Method == http.MethodHead || c.closeAfter.Load() ||
		c.peerGone || c.srv.stopping.Load() {
		return false
	}
	a, extra := c.t.Answer()
	c.refused = false
	hold := c.holdAfter()
	b := c.ws.getOut()
	b = appendStatusLine(b, 1, a.Status)
	b = append(b, a.Fields...)
	b = reject.AppendFields(b, extra)
	b = append(b, "Date: "...)
	b = append(b, c.ws.dateHeader()...)
	b = append(b, "\r\n\r\n"...)
	b = append(b, a.Body...)
	c.cur, c.body, c.rw, c.st = nil, nil, nil, nil
	if hold > 0 {
		c.held = b
		c.park(hold)
		return true
	}
	c.writeRefusal(b)
	return true
}

// writeRefusal writes b, the answer of a refusal, from one of the
// worker's out buffers, and waits for the next request (idle), or closes
// the connection if the write fails.
func (c *conn) writeRefusal(b []byte) {
	c.refusedAt = time.Now().UnixNano()
	n, err := c.nc.WriteNow(b)
	switch {
	case err != nil:
		c.ws.putOut(b)
		c.close()
	case n == len(b) && !c.nc.Queued():
		c.ws.putOut(b)
		c.idle()
	default:
		// The socket took part of it: nothing more is read until the
		// rest is written, within its bound.
		_ = c.nc.OnReadable(lanes.Continuation, nil)
		c.boundRejectionWrite()
		err = c.nc.Write(b[n:], func(err error) {
			c.ws.putOut(b)
			if err != nil || c.state != connActive {
				c.close()
				return
			}
			c.idle()
		})
		if err != nil {
			c.close() // b is not reused: the callback may still run
		}
	}
}

// endRequest ends the current request's context, if a request is under
// way: its handler sees it cancelled, or will when it starts.
func (c *conn) endRequest() {
	if x := c.st; x != nil {
		x.ctx.end()
	}
}

// serve is the request's coroutine.
func (c *conn) serve(ctx context.Context) {
	r, b := c.cur, c.body
	rctx := &c.st.ctx
	rctx.parent = ctx
	ctx = c.withDeadline(rctx)
	r.ctx, b.ctx = ctx, ctx
	if c.peerGone {
		rctx.end()
	}
	rw := c.rw
	*rw = ResponseWriter{c: c, req: r, ctx: ctx, header: c.ws.getHeader(), out: c.ws.getOut()}
	if c.refused {
		c.refused = false
		c.reject(rw)
	} else {
		err := c.callHandler(rw, r)
		rw.returned.Store(true)
		if rw.hijacked {
			// The connection is the handler's now: Hijack ended the
			// request's admission and took the connection off the
			// worker. What is left is the request's context.
			rctx.end()
			c.cur, c.body, c.rw, c.st = nil, nil, nil, nil
			return
		}
		if c.admitted {
			c.admitted = false
			status := http.StatusOK
			if rw.wroteHeader {
				status = rw.status
			}
			c.srv.adm.Done(&c.t, admit.Outcome{Status: status, Err: err})
		}
		if c.srv.stamps {
			// Before the answer's last bytes leave: a client may send
			// its next request before this goroutine goes on.
			c.answered = time.Now().UnixNano()
		}
	}
	rw.finish()
	if !rw.headerOut {
		// Nothing but the writer had the map: the next request's.
		c.ws.putHeader(rw.header)
	}
	rctx.end()
	c.cur, c.body, c.rw, c.st = nil, nil, nil, nil

	if rw.err != nil || c.peerGone || c.state != connActive {
		c.close()
		return
	}
	if !b.done && !c.closeAfter.Load() && !b.failed() {
		c.drainBody(ctx, b, rw)
	}
	if c.closeAfter.Load() || !b.done || b.failed() {
		c.linger()
		return
	}
	c.idle()
}

// callHandler runs the handler, turning a panic into a 500 (or, once the
// response has begun, a closed connection) and a log entry, as net/http
// does; http.ErrAbortHandler aborts quietly. It returns the panic as an
// error, or the response's write error.
func (c *conn) callHandler(rw *ResponseWriter, r *Request) (err error) {
	defer func() {
		v := recover()
		if v == nil {
			err = rw.err
			return
		}
		err = fmt.Errorf("server: handler panic: %v", v)
		if v != http.ErrAbortHandler {
			if ok, dropped := c.srv.panics.Allow(time.Now()); ok {
				c.srv.log.Error("sluice server: handler panic", "method", r.Method, "uri", r.RequestURI,
					"remote", r.RemoteAddr.String(), "panic", fmt.Sprint(v), "stack", string(debug.Stack()),
					"unlogged_before", dropped)
			}
		}
		if rw.headerSent || rw.hijacked || v == http.ErrAbortHandler {
			rw.err = err
			return
		}
		c.closeAfter.Store(true)
		rw.reset()
		rw.header.Set("Content-Type", "text/plain; charset=utf-8")
		rw.header.Set("X-Content-Type-Options", "nosniff")
		rw.WriteHeader(http.StatusInternalServerError)
		_, _ = rw.Write([]byte("500 Internal Server Error\n"))
	}()
	fn := c.handleFn
	switch c.how = c.ws.routes.begin(r.Method, r.URL.Path, c.how); c.how {
	case startRelease:
		fn = c.handleAloneFn
	case startAway:
		fn = c.handleAwayFn
	}
	blocked := c.w.Guest((*handlerName)(c), fn)
	// The worker is the handler's again (Guest's end): the book is its.
	c.ws.routes.ended(r.Method, r.URL.Path, c.how, blocked || c.streamed)
	return nil
}

// handle runs the handler on the current request; the worker runs it as
// guest code (sched.Worker.Guest), so that a handler that blocks its thread
// without Await does not stall the connections behind it.
func (c *conn) handle() { c.srv.h.ServeSluice(c.rw, c.cur) }

// handleAlone is handle for a request of a route whose handlers block
// (routeBook): the worker goes to a spare thread as the handler begins.
func (c *conn) handleAlone() {
	c.w.Release()
	c.handle()
}

// handleAway is handle for a request of a route that streams (routeBook):
// the handler runs on a goroutine of its own (sched.Await), off the
// executor, and its coroutine waits for it with the worker and the thread
// free. Its writes go through the worker (sendAway), and its body reads
// wait in poll(2). A panic comes back to the coroutine, whose callHandler
// recovers it.
func (c *conn) handleAway() {
	c.away.Store(true)
	defer c.away.Store(false)
	_, _ = sched.Await(c.rw.ctx, func(context.Context) (struct{}, error) {
		c.handle()
		return struct{}{}, nil
	})
}

// handlerName names the handler a connection runs, for the scheduler's
// log of handlers that block their worker: the request's method and path.
type handlerName conn

// Blocked runs on the worker once the watchdog found the handler blocked:
// the route's next requests start alone (routeBook).
func (h *handlerName) Blocked() {
	if r := h.cur; r != nil && r.URL != nil {
		h.ws.routes.found(r.Method, r.URL.Path)
	}
}

func (h *handlerName) String() string {
	if r := h.cur; r != nil && r.URL != nil {
		return r.Method + " " + r.URL.Path
	}
	return "a handler"
}

// drainBody reads and discards what the handler left of the body, up to
// maxDrainBody, so the connection can carry the next request.
func (c *conn) drainBody(ctx context.Context, b *body, rw *ResponseWriter) {
	if b.continueWanted && !b.continueSent {
		// The client waits for 100 Continue that will not come: it may or
		// may not send the body, so the connection cannot be reused.
		c.closeAfter.Store(true)
		return
	}
	if !b.chunked && b.remaining > maxDrainBody {
		c.closeAfter.Store(true)
		return
	}
	b.ctx = ctx
	n, _ := io.CopyN(io.Discard, leftover{b}, maxDrainBody+1)
	if n > maxDrainBody {
		c.closeAfter.Store(true)
	}
}

// queueStarted is the pipeline's OnStart for a request that waited, called
// by whoever started it, with the admission counted: the request moves to
// its own worker.
func (c *conn) queueStarted() {
	if err := c.w.Submit(lanes.Continuation, c.dequeued); err != nil {
		c.srv.adm.Cancel(&c.t) // the worker stopped, and the connection with it
	}
}

func (c *conn) dequeued() {
	if c.state != connQueued {
		c.srv.adm.Cancel(&c.t) // closed meanwhile
		return
	}
	c.state = connActive
	c.admitted = true
	c.run()
}

// queueRejected is the pipeline's OnReject: the request is answered with
// its rejection, on its worker.
func (c *conn) queueRejected() {
	// Submit fails only once the scheduler stopped, and the connection
	// with it.
	_ = c.w.Submit(lanes.Continuation, c.dequeueRejected)
}

func (c *conn) dequeueRejected() {
	if c.state != connQueued {
		return
	}
	c.state = connActive
	c.refused = true
	c.run()
}
