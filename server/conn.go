package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/netpoll"
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
	// away is set while the handler runs away (handleAway): its writes go
	// through the worker (sendAway).
	away atomic.Bool
	// handleAloneFn is handleAlone, for a request that started alone;
	// handleAwayFn handleAway, for one that runs away.
	handleAloneFn, handleAwayFn func()
	// stillAloneFn is stillAlone, asked as a request of an unknown route
	// starts (sched.Worker.GoAloneWhile).
	stillAloneFn func() bool
	// arriveFn is arrive, for a connection moving to another worker.
	arriveFn func()

	cur      *Request
	body     *body
	rw       *ResponseWriter
	t        admit.Ticket // the current request's passage through admission
	admitted bool         // the pipeline admitted the current request: call Done
	refused  bool         // it was rejected: answer with t.Answer
	how      int          // how its coroutine started (routeBook.start)
	streamed bool         // its handler flushed a response not yet begun
	// held is the answer of a refusal whose hold has not ended (park.go):
	// written when it ends; nil when none waits.
	held []byte
	// refusedAt is when the last refusal on the connection was answered
	// (Unix nanoseconds, as arrived), until the next request starts; 0:
	// the last answer was not a refusal.
	refusedAt int64
	// answered is when the last served answer on the connection was
	// about to be written whole (Unix nanoseconds, taken while the server
	// times requests from their arrival), until the next request starts:
	// a request stamped after it was sent after that answer
	// (Ticket.Prior), however soon the client sent it.
	answered int64
	unparkFn func() // c.unpark, bound at the first hold (park.go)
	// arrived is when the kernel received the bytes that completed the
	// head of the request being read (Unix nanoseconds; see read), or
	// ready if that is later; 0 when unknown.
	arrived int64
	// stamp is the kernel's own stamp of that read, before ready is
	// applied: a request sent after its connection's last refusal was
	// answered was stamped after it (Ticket.Resent); one the client had
	// pipelined behind the refused one was not.
	stamp int64
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
	c.handleAloneFn, c.handleAwayFn, c.stillAloneFn = c.handleAlone, c.handleAway, c.stillAlone
	c.arriveFn = c.arrive
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
	// A client usually writes right after connecting: read it now,
	// queued behind the lane's work, instead of after the worker's next
	// poll reports it and behind the queue once more. The accept itself
	// ran ahead of the lane (netpoll's listener), so the read waits in the
	// lane once, in the order the bytes arrived among kept-alive and
	// pipelined requests. Under a standing overload, whose age limit is
	// 5 ms, a second wait had nearly every new connection's first request
	// refused. Nothing there yet: the readiness above still calls.
	// (Through netpoll's queue of the read callback, so that it runs once,
	// and not after the request it reads has stopped reading: its
	// handler's helper may read the body.)
	c.nc.QueueRead()
	if c.srv.stopping.Load() && c.state == connIdle {
		c.shutdown(false)
	}
}

// idle waits for the next request after one was answered: Upstream work,
// under the idle timeout.
func (c *conn) idle() {
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
	// Bytes left over from before (a pipelined request) have a task of
	// their own queued on this worker (idle): such a connection stays.
	movable := c.r == c.n
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
	if movable && c.state == connIdle && c.moveToIdlePeer() {
		return
	}
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
		c.stamp = stamp
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
	// parse) more of them than that: a buffer grown to MaxHeaderBytes
	// would hold about 1 MiB per such connection.
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
// any other goroutine hands the write to the worker while the handler runs
// away (sendAway), and blocks in poll(2) otherwise: the worker may then be
// held by the coroutine waiting for it. p must stay unchanged until send
// returns.
func (c *conn) send(ctx context.Context, p []byte) error {
	if !sched.InCoroutine(ctx) {
		var err error
		if c.away.Load() {
			err = c.sendAway(p)
		} else {
			err = c.writeBlocking(p)
		}
		if err == os.ErrDeadlineExceeded {
			err = c.timeoutError("write")
		}
		return err
	}
	if c.writeDeadlinePassed() {
		return c.timeoutError("write")
	}
	n, err := c.nc.WriteNow(p)
	if err != nil || n == len(p) && !c.nc.Queued() {
		return err
	}
	return c.awaitWrite(ctx, func(done func(error)) error { return c.nc.Write(p[n:], done) })
}

// sendAway is send for a goroutine other than the handler's coroutine
// while the handler runs away (a stream's, handleAway: its coroutine waits
// in Await, the worker free): the handler's own goroutine, or one it
// started. On a plain connection what the socket takes now is written at
// once; the worker writes the rest, or all of p through a TLS session, as
// any write of its own (netpoll's Write), as the socket takes it, under
// the request's write deadline, while the calling goroutine waits parked:
// a client that does not read holds no thread, however many such writes
// wait.
func (c *conn) sendAway(p []byte) error {
	if c.writeDeadlinePassed() {
		return os.ErrDeadlineExceeded
	}
	if c.tlsState == nil {
		// What the socket takes now goes at once, from here: the worker
		// writes nothing to the connection while its handler runs away.
		rest, err := netpoll.WriteAvailable(c.fd, p)
		if err != nil || len(rest) == 0 {
			return err
		}
		p = rest
	}
	done := make(chan error, 1)
	err := c.w.Submit(lanes.Continuation, func() {
		if c.writeDeadlinePassed() {
			done <- os.ErrDeadlineExceeded
			return
		}
		if err := c.nc.Write(p, func(err error) { done <- err }); err != nil {
			done <- err
		}
	})
	if err != nil {
		return err
	}
	return <-done
}

// writeDeadlinePassed reports whether the request's write deadline has
// passed, on the worker's clock.
func (c *conn) writeDeadlinePassed() bool {
	dl := c.writeDL.Load()
	return dl != 0 && c.srv.s.Now() >= dl
}

// awaitWrite suspends the handler's coroutine (ctx's) until the write
// that start begins on the connection calls its done callback, and returns
// the write's error: the request's timeout error when its write deadline
// passed (deadlinePassed aborts the write). start is netpoll's Write, or
// WaitWritable for a writer that sends by other means (sendfile).
func (c *conn) awaitWrite(ctx context.Context, start func(done func(error)) error) error {
	var werr error
	perr := sched.Pause(ctx, func(resume func()) {
		if err := start(func(err error) { werr = err; resume() }); err != nil {
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
		c.held = nil // never sent: the client went, or the server closes
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
