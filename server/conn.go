package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/netpoll"
	"github.com/sluice-go/sluice/reject"
	"github.com/sluice-go/sluice/sched"
)

// Connection states.
const (
	connIdle   uint8 = iota // between requests: nothing of the next one read
	connHead                // part of a request head has arrived
	connActive              // a request's handler runs
	connQueued              // a request waits in the admission queue
	connLinger              // closing: our side shut, discarding input
	connClosed
	connHijacked  // the handler took the connection (Hijack): the server forgot it
	connHandshake // a TLS connection before the end of its handshake
	connParked    // after a refusal for overload: nothing read until the hold ends (park)
)

// How long a closing connection keeps discarding the client's input, so
// that unread bytes do not turn our close into a reset that destroys the
// response in flight (net/http waits 500 ms for the same reason).
const lingerTimeout = 500 * time.Millisecond

// maxDrainBody is how much of a body the handler left unread the server
// reads and discards to keep the connection; beyond it, the connection
// closes after the response, as net/http does.
const maxDrainBody = 256 << 10

// conn is one client connection, owned by its worker: every field is used
// only on that worker, except by a handler's own goroutines through the
// body reader and the response writer (see their comments).
type conn struct {
	srv *Server
	ws  *workerState
	nc  *netpoll.Conn
	w   *sched.Worker
	fd  int

	buf  []byte // read buffer; nil while idle with nothing buffered
	r, n int    // buf[r:n] is read but not consumed
	scan int    // how much of buf[r:n] findHeadEnd has searched

	state       uint8
	fresh       bool        // no request yet: the header timeout runs from accept
	lineOK      bool        // the request line of the head arriving has been checked (checkStart)
	lastPost    bool        // the previous request was a POST (tolerate a stray CRLF)
	closeAfter  atomic.Bool // close once the current response is written (atomic: a handler's goroutine may set it)
	respStarted bool        // the current response's header has been sent
	peerGone    bool        // the client closed or reset the connection
	handshaking bool        // the TLS handshake's coroutine runs
	evicted     bool        // its handshake was closed for a newer one (takeHandshake)
	// waitingPlace: its whole hello waits for a place of its address
	// (waitForPlace).
	waitingPlace bool

	// hello holds the first bytes of a TLS client's hello until its first
	// record is complete (readHello), and a whole hello that waits for a
	// place; hsHeld is set while its handshake holds one of the worker's
	// places (takeHandshake).
	hello   []byte
	hsHeld  bool
	hsPeer  netip.Addr // the address its place counts against (peerKey)
	closeFn func()     // c.close, bound once it is wanted (waitForPlace)

	// tlsState describes the TLS session, nil on a plain connection.
	tlsState *tls.ConnectionState

	timer    *sched.Timer
	deadline int64 // when timer's firing counts; 0: disarmed

	// began is when the current request began, on the worker's clock:
	// the read that brought its first bytes, or the accept for the first
	// request of a connection. ReadTimeout counts from it.
	began int64
	// readDL and writeDL are the current request's read and write
	// deadlines (Config.ReadTimeout, Config.WriteTimeout, or what the
	// handler set through http.ResponseController), on the worker's clock;
	// 0 for none. Atomic: a handler's helper goroutine reads them while it
	// waits in poll(2).
	readDL, writeDL atomic.Int64

	// laddr is the connection's local address once asked for (localAddr);
	// cctx is the parent of its requests' contexts, which answers
	// http.ServerContextKey and http.LocalAddrContextKey.
	laddr atomic.Pointer[net.TCPAddr]
	cctx  connContext

	onData    func() // c.readable, bound once
	onTimeout func() // c.timeout, bound once
	serveFn   func(context.Context)
	handleFn  func()

	cur      *Request
	body     *body
	rw       *ResponseWriter
	t        admit.Ticket // the current request's passage through admission
	admitted bool         // the pipeline admitted the current request: call Done
	refused  bool         // it was rejected: answer with t.Answer
	// hold is how long to park the connection once the current refusal
	// is written (holdAfter); 0: it waits for its next request at once.
	hold time.Duration
	// refusedAt is when the last refusal on the connection was answered
	// (Unix nanoseconds, as arrived), until the next request starts; 0:
	// the last answer was not a refusal.
	refusedAt int64
	unparkFn  func() // c.unpark, bound at the first hold (park.go)
	// arrived is when the kernel received the bytes that completed the
	// head of the request being read (Unix nanoseconds; see read), 0 when
	// unknown.
	arrived int64
	// ready is when the connection's last request ended (Unix
	// nanoseconds, taken while the server times requests from their
	// arrival), the earliest the server could start the next one: a
	// request the client pipelined, or that waited in the socket's buffer
	// while the one before it ran, counts its age from here, since that
	// wait is the connection's order (HTTP/1.1 answers in turn), not the
	// server's line.
	ready int64

	st         *reqState      // the current request's, from its start to its end
	remote     string         // RemoteAddr as net/http writes it, for HTTPHandler servers
	picked     []admit.Field  // the current request's picked fields (Server.picked), reused
	picked1    [1]admit.Field // picked's room when there is one name
	readWaiter func()         // resumes a handler waiting for request bytes

	lane    lanes.ID      // the current request's lane; Upstream: the built-in ones
	scratch *http.Request // for the lane routes' ServeMux, reused

	links [numLinks]connLinks // in the worker's lists (connList)
}

// reqState is what one request needs, allocated together: also the
// contexts of its coroutine and its handler, and its URL.
type reqState struct {
	req  Request
	body body
	rw   ResponseWriter
	job  sched.JobContext
	ctx  reqCtx
	url  url.URL
	// vals holds the header's value slices when the head has no more
	// fields than this (parseHead); 7 fill the object's size class.
	vals [7]string
}

// accept runs on the connection's worker for each new connection, also for
// those that Shutdown took from the kernel's queue as it stopped accepting.
func (srv *Server) accept(nc *netpoll.Conn) {
	c := &conn{srv: srv, ws: srv.ws[nc.Worker().ID()], nc: nc, w: nc.Worker(), fd: nc.FD(), fresh: true}
	c.began = c.w.Now()
	c.cctx.c = c
	if srv.adapted {
		c.remote = formatRemote(nc.RemoteAddr())
	}
	switch n := len(srv.picked); {
	case n == 1: // the deadline's field alone, the default
		c.picked = c.picked1[:]
	case n > 1:
		c.picked = make([]admit.Field, n)
	}
	c.onData, c.onTimeout, c.serveFn, c.handleFn = c.readable, c.timeout, c.serve, c.handle
	c.t.Shard = c.w.ID()
	c.t.OnStart, c.t.OnReject = c.queueStarted, c.queueRejected
	srv.open.Add(1)
	c.ws.conns.add(c)
	if srv.tls != nil {
		c.awaitFirst(connHandshake, lanes.Upstream) // the client's hello
		return
	}
	c.awaitFirst(connIdle, lanes.Upstream)
}

// awaitFirst waits, in state, for the first bytes of a connection, read in
// lane under the header timeout: the first request of a plain connection
// and a TLS client's hello (Upstream: new work), or the first request of a
// connection whose TLS handshake has ended (Continuation). A connection
// waiting for its first request while the server shuts down gets the
// grace of a new connection (see shutdown).
func (c *conn) awaitFirst(state uint8, lane lanes.ID) {
	c.state = state
	c.scan, c.lineOK = 0, false
	if err := c.nc.OnReadable(lane, c.onData); err != nil {
		c.close()
		return
	}
	c.arm(c.srv.headTimeout)
	// A client usually writes right after connecting: read it now, queued
	// behind the accept, instead of after the worker's next poll reports
	// it and behind the queue once more. Under a standing overload, whose
	// age limit is 5 ms, that second wait had nearly every new
	// connection's first request rejected. Nothing there yet: the
	// readiness above still calls. (Through netpoll's queue of the read
	// callback, so that it runs once, and not after the request it reads
	// has stopped reading: its handler's helper may read the body.)
	c.nc.QueueRead()
	if c.srv.stopping.Load() && c.state == connIdle {
		c.shutdown(false)
	}
}

// idle waits for the next request after one was answered: Upstream work,
// under the idle timeout.
func (c *conn) idle() {
	if h := c.hold; h > 0 {
		c.hold = 0
		c.park(h)
		return
	}
	c.state = connIdle
	c.scan, c.lineOK = 0, false
	if c.srv.stamps {
		c.ready = time.Now().UnixNano()
	}
	if err := c.nc.OnReadable(lanes.Upstream, c.onData); err != nil {
		c.close()
		return
	}
	c.arm(c.srv.cfg.IdleTimeout)
	if c.r < c.n {
		// A pipelined request is already here: start it as new work,
		// its age counting from now (see ready).
		c.arrived = c.ready
		c.w.Push(lanes.Upstream, c.parseBuffered)
		return
	}
	c.releaseBuf()
}

func (c *conn) releaseBuf() {
	if c.buf != nil && c.r == c.n {
		c.ws.putBuf(c.buf)
		c.buf, c.r, c.n, c.scan = nil, 0, 0, 0
	}
}

// arm sets the connection's deadline d from now. The timer moves only when
// it would fire too late: one pending for an earlier time stays, and
// timeout sets it again for the deadline when it fires early, so that the
// requests of a kept-alive connection, which each disarm the idle timeout
// and set it again later, leave the worker's timer heap alone.
func (c *conn) arm(d time.Duration) {
	if d <= 0 {
		c.disarm()
		return
	}
	if c.timer == nil {
		c.timer = c.w.AfterFunc(d, lanes.Continuation, c.onTimeout)
		c.deadline = c.timer.Deadline()
		return
	}
	deadline := c.w.Now() + int64(d)
	if !c.timer.Pending() || c.timer.Deadline() > deadline {
		c.timer.Reset(d)
	}
	c.deadline = deadline
}

// armAt arms the timer for deadline, on the worker's clock; one already
// passed fires at once.
func (c *conn) armAt(deadline int64) {
	c.arm(max(time.Duration(deadline-c.w.Now()), 1))
}

// disarm clears the deadline. The timer is left as it is: if it is
// pending, it fires for nothing (see timeout).
func (c *conn) disarm() { c.deadline = 0 }

// stopTimer stops the timer for good, for a connection the worker lets go:
// a pending one would keep it alive until it fired.
func (c *conn) stopTimer() {
	c.deadline = 0
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

func (c *conn) timeout() {
	if c.deadline == 0 {
		return // disarmed since the timer was set
	}
	if now := c.w.Now(); now < c.deadline {
		// Set for an earlier deadline, since moved later (arm), or
		// re-armed since this firing was queued.
		c.timer.Reset(time.Duration(c.deadline - now))
		return
	}
	switch c.state {
	case connHead:
		// Part of a request came, not all of it in time: say so, as a
		// client that waits for an answer deserves one, then close.
		c.fail(errHeadTimeout)
	case connIdle, connLinger, connHandshake:
		c.close()
	case connActive, connQueued:
		c.deadlinePassed()
	case connParked:
		c.unpark()
	}
}

// readable is the connection's read callback, in whatever lane its state
// asked for.
func (c *conn) readable() {
	switch c.state {
	case connIdle, connHead:
		c.readHead()
	case connHandshake:
		if !c.handshaking {
			c.readHello()
		}
	case connActive:
		if w := c.readWaiter; w != nil {
			c.readWaiter = nil
			_ = c.nc.OnReadable(lanes.Continuation, nil)
			w()
			return
		}
		c.readBehind()
	case connLinger:
		c.discard()
	}
}

// readHead reads once and starts the request if its head is complete.
func (c *conn) readHead() {
	if c.buf == nil {
		c.buf = c.ws.getBuf()
	}
	if !c.makeRoom(c.srv.maxHead) {
		c.fail(errHeaderTooLarge)
		return
	}
	n, err := c.read(true)
	switch {
	case err == syscall.EAGAIN:
		if c.state == connIdle {
			c.releaseBuf()
		}
		return
	case err != nil:
		// The client closed or reset: nothing to answer, as net/http.
		c.close()
		return
	}
	c.n += n
	c.parseBuffered()
}

// read reads into the free end of the read buffer. When the server times
// requests from their arrival, the kernel receive stamp of the read becomes
// c.arrived if the bytes read may complete a request's head: always while
// a head is awaited (head: nothing buffered holds a whole one), and
// otherwise when nothing unconsumed is buffered (they begin the next
// request). So a request's age counts from when its head was all there, the
// earliest the server could have started it: a client slow to send its head
// (a large cookie over a slow link, a head in two segments) does not count
// its own upload time as time waiting for the server. Nor does it count
// from before the connection's previous request ended (c.ready).
func (c *conn) read(head bool) (int, error) {
	if !c.srv.stamps {
		return c.nc.Read(c.buf[c.n:])
	}
	n, stamp, err := c.nc.ReadStamped(c.buf[c.n:])
	if n > 0 && (head || c.r == c.n) {
		c.arrived = max(stamp, c.ready)
	}
	return n, err
}

// makeRoom makes space at the end of the read buffer, moving unread bytes
// to the front or growing the buffer up to limit; false when it is full.
func (c *conn) makeRoom(limit int) bool {
	if c.n < len(c.buf) {
		return true
	}
	if c.r > 0 {
		c.n = copy(c.buf, c.buf[c.r:c.n])
		c.r = 0
		return true
	}
	if len(c.buf) >= limit {
		return false
	}
	nb := make([]byte, min(2*len(c.buf), limit))
	copy(nb, c.buf[:c.n])
	c.ws.putBuf(c.buf)
	c.buf = nb
	return true
}

// parseBuffered starts the request whose head is in the buffer, if all of
// it is there.
func (c *conn) parseBuffered() {
	if c.state != connIdle && c.state != connHead {
		return
	}
	if c.state == connIdle && !c.fresh {
		c.began = c.w.Now() // the first bytes of a request are here
	}
	if c.lastPost && c.state == connIdle {
		// RFC 9112 section 2.2: tolerate the CRLF old clients add after
		// a POST body.
		for i := 0; i < 4 && c.r < c.n && (c.buf[c.r] == '\r' || c.buf[c.r] == '\n'); i++ {
			c.r++
		}
	}
	data := c.buf[c.r:c.n]
	if c.fresh && c.srv.h2 != nil && c.tlsState == nil {
		// h2c with prior knowledge: the connection's first bytes are the
		// HTTP/2 preface.
		switch complete, maybe := isH2Preface(data); {
		case complete:
			c.startH2(bytes.Clone(data))
			return
		case maybe && len(data) > 0:
			if c.state == connIdle {
				c.state = connHead
				if err := c.nc.OnReadable(lanes.Continuation, c.onData); err != nil {
					c.close()
				}
			}
			return
		}
	}
	end := findHeadEnd(data, c.scan)
	if end < 0 {
		if err := c.checkStart(data, c.scan); err != nil {
			c.fail(err)
			return
		}
		c.scan = len(data)
		if len(data) >= c.srv.maxHead {
			c.fail(errHeaderTooLarge)
			return
		}
		if len(data) > 0 && c.state == connIdle {
			// The request has begun: the rest of it is Continuation work,
			// under the header timeout.
			c.state = connHead
			if err := c.nc.OnReadable(lanes.Continuation, c.onData); err != nil {
				c.close()
				return
			}
			if !c.fresh {
				c.arm(c.srv.headTimeout)
			}
		}
		if len(data) == 0 && c.state == connIdle {
			c.releaseBuf()
		}
		return
	}
	if end > c.srv.maxHead {
		c.fail(errHeaderTooLarge)
		return
	}
	// The request, its body and its response in one allocation, which
	// also holds the value slices of a head of a few fields.
	x := new(reqState)
	h := head{pick: c.srv.picked}
	if err := parseHead(data[:end], &h, x.vals[:]); err != nil {
		c.fail(err)
		return
	}
	c.r += end
	c.scan, c.lineOK = 0, false
	c.start(&h, x)
}

// checkStart looks at a head still arriving, from its first byte, so that
// a request that cannot be valid is refused at once instead of at the
// header timeout, as net/http refuses it once its request line has ended:
// net/http reads the line first and answers 400 when the line is bad, and
// a client speaking another protocol (a TLS ClientHello, SSH) would wait
// for the end of a head that never comes. from is how much of data was
// looked at before. The first byte must begin a method (a token): a TLS
// handshake record begins with 0x16 and is refused there, even when its
// bytes hold no line end (net/http waits for one); once the first line
// is complete it gets the checks parseHead gives it.
func (c *conn) checkStart(data []byte, from int) *reqError {
	if from == 0 && len(data) > 0 && !tokenChars[data[0]] {
		if data[0] == tlsHandshakeRecord {
			return errTLSHandshake
		}
		return badRequest("invalid method")
	}
	if c.lineOK {
		return nil
	}
	i := bytes.IndexByte(data[from:], '\n')
	if i < 0 {
		return nil
	}
	c.lineOK = true
	line := data[:from+i]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	var h head
	return parseRequestLine(bytesToString(line), &h)
}

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
	// A request that came right after a refusal on this connection: a
	// client that resends at once (admit.FutileRatio).
	t.Resent = c.refusedAt != 0 && c.arrived != 0 && c.arrived-c.refusedAt < int64(admit.ResendWindow)
	c.refusedAt = 0
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
	if lane > lanes.Upstream {
		c.w.Go(job, lane, c.serveFn)
		return
	}
	c.w.GoNow(job, c.serveFn)
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
	c.refusing()
	b := c.ws.getOut()
	b = appendStatusLine(b, 1, a.Status)
	b = append(b, a.Fields...)
	b = reject.AppendFields(b, extra)
	b = append(b, "Date: "...)
	b = append(b, c.ws.dateHeader()...)
	b = append(b, "\r\n\r\n"...)
	b = append(b, a.Body...)
	c.cur, c.body, c.rw, c.st = nil, nil, nil, nil
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
	return true
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
	c.w.Guest((*handlerName)(c), c.handleFn)
	return nil
}

// handle runs the handler on the current request; the worker runs it as
// guest code (sched.Worker.Guest), so that a handler that blocks its thread
// without Await does not stall the connections behind it.
func (c *conn) handle() { c.srv.h.ServeSluice(c.rw, c.cur) }

// handlerName names the handler a connection runs, for the scheduler's
// log of handlers that block their worker: the request's method and path.
type handlerName conn

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

// readBehind reads what comes after the current request while its handler
// runs: pipelined requests are kept for later, and the end of the stream
// cancels the request's context.
func (c *conn) readBehind() {
	if c.buf == nil {
		c.buf = c.ws.getBuf()
	}
	// Read ahead one buffer at most: enough to see the client leave, or
	// to have the next request at hand. A client that pipelines requests
	// and never reads its answers must not make the server hold (and
	// parse) more of them than that: the buffer used to grow to
	// MaxHeaderBytes, about 1 MiB per such connection.
	if !c.makeRoom(readBufSize) {
		// Full of pipelined requests: read more after this response.
		_ = c.nc.OnReadable(lanes.Continuation, nil)
		return
	}
	n, err := c.read(false)
	switch {
	case err == syscall.EAGAIN:
	case err != nil:
		c.clientGone()
	default:
		c.n += n
	}
}

// clientGone records that the client closed or reset the connection and
// cancels the request in progress.
func (c *conn) clientGone() {
	c.peerGone = true
	_ = c.nc.OnReadable(lanes.Continuation, nil)
	c.endRequest()
}

// waitReadable releases the worker until the connection has bytes to read
// (or an end); the handler's coroutine only.
func (c *conn) waitReadable(ctx context.Context) error {
	return sched.Pause(ctx, func(resume func()) {
		c.readWaiter = resume
		if err := c.nc.OnReadable(lanes.Continuation, c.onData); err != nil {
			c.readWaiter = nil
			resume()
		}
	})
}

// readSome reads at least one byte into p for the body reader: in the
// handler's coroutine releasing the worker while it waits, on any other
// goroutine blocking it in poll(2). The end of the stream is
// io.ErrUnexpectedEOF: a body reader asks only for bytes the request still
// owes.
func (c *conn) readSome(ctx context.Context, p []byte) (int, error) {
	if !sched.InCoroutine(ctx) {
		n, err := c.readBlocking(p)
		switch err {
		case netpoll.ErrEOF:
			err = io.ErrUnexpectedEOF
		case os.ErrDeadlineExceeded:
			err = c.readTimedOut()
		}
		return n, err
	}
	for {
		if dl := c.readDL.Load(); dl != 0 && c.srv.s.Now() >= dl {
			return 0, c.readTimedOut()
		}
		n, err := c.nc.Read(p)
		switch {
		case err == nil:
			return n, nil
		case err == syscall.EAGAIN:
			if err := c.waitReadable(ctx); err != nil {
				return 0, err
			}
		case err == netpoll.ErrEOF:
			return 0, io.ErrUnexpectedEOF
		default:
			return 0, err
		}
	}
}

// send writes all of p to the client. In the handler's coroutine a write
// the socket cannot take at once waits for room with the worker released;
// on any other goroutine it blocks in poll(2). p must stay unchanged until
// send returns.
func (c *conn) send(ctx context.Context, p []byte) error {
	if !sched.InCoroutine(ctx) {
		err := c.writeBlocking(p)
		if err == os.ErrDeadlineExceeded {
			err = c.timeoutError("write")
		}
		return err
	}
	if dl := c.writeDL.Load(); dl != 0 && c.srv.s.Now() >= dl {
		return c.timeoutError("write")
	}
	n, err := c.nc.WriteNow(p)
	if err != nil || n == len(p) && !c.nc.Queued() {
		return err
	}
	var werr error
	perr := sched.Pause(ctx, func(resume func()) {
		if err := c.nc.Write(p[n:], func(err error) { werr = err; resume() }); err != nil {
			werr = err
			resume()
		}
	})
	if perr != nil {
		return perr
	}
	if werr == os.ErrDeadlineExceeded { // WriteTimeout passed (deadlinePassed)
		werr = c.timeoutError("write")
	}
	return werr
}

// readBlocking and writeBlocking are readSome's and send's ways off the
// worker, under the request's deadlines: poll(2) on the socket, through
// the TLS session if there is one.
func (c *conn) readBlocking(p []byte) (int, error) {
	if c.tlsState != nil {
		return c.nc.ReadBlocking(p, c.readLeft)
	}
	return netpoll.ReadBlockingDeadline(c.fd, p, c.readLeft)
}

func (c *conn) writeBlocking(p []byte) error {
	if c.tlsState != nil {
		return c.nc.WriteBlocking(p, c.writeLeft)
	}
	return netpoll.WriteBlockingDeadline(c.fd, p, c.writeLeft)
}

// fail answers a request the server refuses before any handler, then closes
// the connection.
func (c *conn) fail(e *reqError) {
	c.disarm()
	c.state = connActive // nothing else reads meanwhile
	// A Date, as RFC 9110 section 6.6.1 asks of every 4xx and 5xx from a
	// server with a clock.
	resp := append([]byte("HTTP/1.1 "+e.line()+"\r\nDate: "), c.ws.dateHeader()...)
	if e.empty {
		resp = append(resp, "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"...)
	} else {
		resp = append(resp, "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"+e.body()...)
	}
	if _, err := c.nc.WriteNow(resp); err != nil {
		c.close()
		return
	}
	c.linger()
}

// linger closes our side of the connection and discards what the client
// still sends, for a while, before closing it.
func (c *conn) linger() {
	if c.state == connLinger || c.state == connClosed {
		return
	}
	c.state = connLinger
	c.r, c.n = 0, 0
	c.releaseBuf()
	if err := shutdownWrite(c.fd); err != nil {
		c.close()
		return
	}
	if err := c.nc.OnReadable(lanes.Continuation, c.onData); err != nil {
		c.close()
		return
	}
	c.arm(lingerTimeout)
}

// discard reads and drops input of a lingering connection, closing it at
// the end of the stream. It reads into the worker's sink, 64 KiB at a
// time: a client that goes on sending a body refused at its limit (413)
// costs a read per 64 KiB of it.
func (c *conn) discard() {
	if c.ws.sink == nil {
		c.ws.sink = make([]byte, sinkSize)
	}
	for range 8 {
		_, err := c.nc.Read(c.ws.sink)
		if err == syscall.EAGAIN {
			return
		}
		if err != nil {
			c.close()
			return
		}
	}
}

// sinkSize is the size of a worker's buffer for input it drops.
const sinkSize = 64 << 10

// shutdown is called on the worker by Server.Shutdown (force false) and
// Server.Close (force true).
func (c *conn) shutdown(force bool) {
	switch c.state {
	case connIdle:
		switch {
		case force:
			c.close()
		case c.r < c.n || c.inputWaiting():
			// A request arrived and was not read yet: serve it, then
			// close.
			c.closeAfter.Store(true)
		case c.fresh:
			// Accepted a moment ago: its first request is on its way.
			c.closeAfter.Store(true)
			grace := NewConnGrace
			if ht := c.srv.headTimeout; ht > 0 {
				grace = min(grace, ht)
			}
			c.arm(grace)
		default:
			c.close()
		}
	case connHead:
		if force {
			c.close()
		} else {
			c.closeAfter.Store(true)
		}
	case connActive:
		c.closeAfter.Store(true)
		if force {
			// Wake whoever waits on the socket: reads see the end.
			_ = shutdownBoth(c.fd)
			c.clientGone()
			if w := c.readWaiter; w != nil {
				c.readWaiter = nil
				w()
			}
		}
	case connQueued:
		c.closeAfter.Store(true)
		if force && c.srv.adm.Withdraw(&c.t) {
			c.close()
		}
	case connLinger:
		if force {
			c.close()
		}
	case connHandshake:
		// No request yet: nothing to finish.
		c.close()
	case connParked:
		// Waiting for nothing but its hold: as an idle connection, it
		// serves a request that came meanwhile, then closes.
		c.unpark()
		if c.state == connIdle {
			c.shutdown(force)
		}
	}
}

// inputWaiting reports whether bytes wait in the socket's receive queue.
func (c *conn) inputWaiting() bool {
	n, err := bytesWaiting(c.fd)
	return err == nil && n > 0
}

// close closes the connection now.
func (c *conn) close() {
	if c.state == connClosed {
		return
	}
	if c.state == connParked {
		c.unlist()
	}
	if c.state == connHandshake {
		c.ws.unwait(c)
		if !c.handshaking {
			c.ws.endHandshake(c) // a place granted, its handshake not begun
		}
		if c.hello != nil {
			c.hello = nil
			c.srv.tlsc.failed.Add(1) // its handshake never began
		}
	}
	c.state = connClosed
	c.stopTimer()
	c.endRequest()
	_ = c.nc.Close()
	if c.buf != nil {
		c.ws.putBuf(c.buf)
		c.buf = nil
	}
	c.ws.conns.remove(c)
	c.srv.connClosed()
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

// enter makes the connection's worker the caller's again before a handler
// touches the connection (sched.Worker.Enter); leave ends it. A connection
// of a test without a worker has nothing to enter.
func (c *conn) enter() sched.Entry {
	if c == nil || c.w == nil {
		return 0
	}
	return c.w.Enter()
}

func (c *conn) leave(e sched.Entry) {
	if e != 0 {
		c.w.Leave(e)
	}
}
