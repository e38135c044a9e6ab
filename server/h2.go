package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/reject"
	"github.com/sluice-go/sluice/sched"
)

// This file serves HTTP/2: h2 over TLS (ALPN) and h2c with prior
// knowledge. The connection leaves its worker as a hijacked one does, and
// golang.org/x/net/http2 serves its frames on goroutines; each stream
// passes through the server's admission as an HTTP/1.1 request does, and
// its handler runs as a coroutine on a worker. docs/design.md ("HTTP/2")
// tells why and what it costs.

// h2Preface is the client connection preface of HTTP/2 (RFC 9113 section
// 3.4): an h2c client with prior knowledge sends it as its first bytes.
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// h2WriteBuf is how much a handler may write to an HTTP/2 stream before
// its writes go through sched.Await: what x/net's response buffer takes
// without waiting for its serve loop (its handlerChunkWriteSize).
const h2WriteBuf = 4 << 10

// h2Server is the server's HTTP/2 side: the x/net server, the connections
// it serves (for Shutdown and Close) and the user's handler.
type h2Server struct {
	srv     *Server
	h2      *http2.Server
	h1      *http.Server // never started: its Shutdown is how x/net's connections get their GOAWAY
	handler http.Handler
	rr      atomic.Uint32 // round-robin over the workers for the streams' coroutines
	routes  h2Routes      // the routes whose streams may run on a lease (h2lend.go)

	mu       sync.Mutex
	conns    map[*h2Conn]struct{}
	stopping bool // Shutdown or Close began: new connections end at once
	force    bool // Close
	wg       sync.WaitGroup
}

// newH2Server returns the HTTP/2 side of srv, or nil when the server does
// not speak HTTP/2: Config.DisableHTTP2, or a native Handler.
func newH2Server(srv *Server, h Handler) *h2Server {
	a, ok := h.(httpHandler)
	if !ok || srv.cfg.DisableHTTP2 {
		return nil
	}
	s := &h2Server{srv: srv, handler: withOptionsStar{a.h}, conns: map[*h2Conn]struct{}{}}
	s.h2 = &http2.Server{}
	if it := srv.cfg.IdleTimeout; it > 0 {
		s.h2.IdleTimeout = it
	}
	s.h1 = &http.Server{ErrorLog: srv.hs.ErrorLog}
	// ConfigureServer gives s.h2 the list of its connections and hooks
	// their graceful shutdown on s.h1.Shutdown. It cannot fail on a
	// server without TLS settings of its own.
	if err := http2.ConfigureServer(s.h1, s.h2); err != nil {
		panic(fmt.Sprintf("server: configuring HTTP/2: %v", err))
	}
	return s
}

// h2Conn is one HTTP/2 connection, served by x/net on goroutines.
type h2Conn struct {
	s    *h2Server
	nc   net.Conn // what x/net serves: the *tls.Conn, or the socket with the bytes read replayed
	raw  net.Conn // the socket, closed by Close
	peer netip.AddrPort
	tls  *tls.ConnectionState

	mu      sync.Mutex
	done    bool // ServeConn returned: no stream starts any more
	streams sync.WaitGroup
}

// startH2 takes the connection off the worker and serves it as HTTP/2:
// on a TLS connection whose ALPN chose "h2" (pending empty), or on a plain
// one whose first bytes are the preface (pending: the bytes read, replayed
// to x/net first). Like Hijack, it moves the socket to Go's poller; unlike
// a hijacked connection it stays counted in OpenConns until it closes, and
// Shutdown and Close end it.
func (c *conn) startH2(pending []byte) {
	gc, err := c.goConn()
	if err != nil {
		c.srv.log.Warn("sluice server: HTTP/2: moving the connection", "remote", c.nc.RemoteAddr(), "err", err)
		c.close()
		return
	}
	hc := &h2Conn{s: c.srv.h2, raw: gc, peer: c.nc.RemoteAddr(), tls: c.tlsState}
	hc.nc = gc
	if c.tlsState != nil {
		tc, err := c.nc.Detach(gc)
		if err != nil {
			_ = gc.Close()
			c.close()
			return
		}
		hc.nc = tc
	} else if len(pending) > 0 {
		hc.nc = &replayConn{Conn: gc, pending: pending}
	}
	// Forget it on the worker, but keep it counted: the connection's
	// goroutine calls connClosed when it ends.
	c.forget()
	c.srv.h2.serve(hc)
}

// serve serves hc on a goroutine of its own until it closes.
func (s *h2Server) serve(hc *h2Conn) {
	s.mu.Lock()
	s.conns[hc] = struct{}{}
	stopping, force := s.stopping, s.force
	s.wg.Add(1)
	s.mu.Unlock()
	if force {
		_ = hc.raw.Close() // Close came first: x/net sees a closed socket
	}
	go func() {
		defer s.wg.Done()
		s.h2.ServeConn(hc.nc, &http2.ServeConnOpts{
			Context:    context.Background(),
			BaseConfig: s.srv.hs,
			Handler:    hc,
		})
		_ = hc.raw.Close()
		hc.mu.Lock()
		hc.done = true
		hc.mu.Unlock()
		hc.streams.Wait()
		s.mu.Lock()
		delete(s.conns, hc)
		s.mu.Unlock()
		s.srv.connClosed()
	}()
	if stopping && !force {
		s.goAway()
	}
}

// shutdown ends the HTTP/2 connections: at once (force), or with a
// GOAWAY that lets their streams finish. It is called again while
// Shutdown waits, for connections that began meanwhile (x/net lists a
// connection only once its goroutine runs; a second GOAWAY is not sent).
func (s *h2Server) shutdown(force bool) {
	s.mu.Lock()
	s.stopping = true
	s.force = s.force || force
	n := len(s.conns)
	var raws []net.Conn
	if force {
		for hc := range s.conns {
			raws = append(raws, hc.raw)
		}
	}
	s.mu.Unlock()
	for _, nc := range raws {
		_ = nc.Close()
	}
	if !force && n > 0 {
		s.goAway()
	}
}

// goAway has x/net send GOAWAY on each of its connections: the hook that
// http2.ConfigureServer registered on s.h1, which has nothing else to
// shut down, so that its Shutdown returns at once.
func (s *h2Server) goAway() { _ = s.h1.Shutdown(context.Background()) }

// enter counts a stream that starts; false once the connection ended.
func (hc *h2Conn) enter() bool {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if hc.done {
		return false
	}
	hc.streams.Add(1)
	return true
}

// h2Stream is one stream's passage through admission.
type h2Stream struct {
	t       admit.Ticket
	decided chan bool // a queued stream's fate: true started, false rejected
}

// ServeHTTP serves one stream, on the goroutine x/net gave it: the
// admission decides, a small body is read (readBodyFirst), then the
// handler runs as a coroutine on a worker while this goroutine waits for
// it, or here on a lease of an idle worker's CPU (runLentIfIdle).
func (hc *h2Conn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !hc.enter() {
		return
	}
	defer hc.streams.Done()
	arrived := time.Now().UnixNano()
	s := hc.s
	srv := s.srv
	if max := srv.cfg.MaxBodyBytes; max > 0 && r.ContentLength > max {
		// As HTTP/1.1: refused before admission, the handler never runs.
		e := bodyTooLarge(r.ContentLength, max)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(e.status)
		_, _ = io.WriteString(w, e.body())
		return
	}
	wk := srv.s.Worker(int(s.rr.Add(1)-1) % srv.s.NumWorkers())
	req := hc.request(r)
	st := &h2Stream{decided: make(chan bool, 1)}
	t := &st.t
	t.Method, t.Path, t.Header, t.Peer, t.Request = r.Method, r.URL.Path, r.Header, hc.peer, req
	t.Shard = wk.ID()
	t.OnStart = func() { st.decided <- true }
	t.OnReject = func() { st.decided <- false }
	lane := lanes.Upstream
	if lr := srv.lanes; lr != nil {
		if ref, ok := lr.route(req, &t.Attempt, new(http.Request)); ok && ref.id != lanes.Upstream {
			t.Lane, lane = ref.name, ref.id
		}
	}
	switch srv.adm.Decide(t) {
	case admit.Rejected:
		h2Reject(w, r, t)
		return
	case admit.Queued:
		select {
		case ok := <-st.decided:
			if !ok {
				h2Reject(w, r, t)
				return
			}
		case <-r.Context().Done():
			// The client reset the stream, or the connection ended.
			if srv.adm.Withdraw(t) {
				return
			}
			if <-st.decided {
				srv.adm.Cancel(t)
			}
			return
		}
	}
	var status int
	var err error
	var panicked, unstarted, lent bool
	switch {
	case reject.IsGRPC(r):
		status, err, panicked = hc.runGRPC(w, r, t)
	default:
		if readBodyFirst(r) {
			if r.Context().Err() != nil {
				// The client reset the stream, or the connection
				// ended, while its body came.
				unstarted = true
				break
			}
			// The request could start once its body had come: the
			// client's upload is not its age.
			arrived = time.Now().UnixNano()
		}
		if status, err, panicked, lent = hc.runLentIfIdle(wk, lane, w, r, t); !lent {
			status, err, panicked, unstarted = hc.run(wk, lane, w, r, t, arrived)
		}
	}
	if unstarted {
		if r.Context().Err() != nil {
			// The client reset the stream, or the connection ended,
			// while it waited in the worker's queue: canceled.
			srv.adm.Cancel(t)
		} else if errors.Is(err, errNoSpare) {
			srv.adm.Refuse(t, srv.spares.refusal)
		} else {
			// It waited there past the age limit (as an HTTP/1.1
			// request that waited as long in its socket), or past the
			// caller's deadline: refused (queue-timeout).
			srv.adm.Expire(t)
		}
		h2Reject(w, r, t)
		return
	}
	srv.adm.Done(t, admit.Outcome{Status: status, Err: err})
	if panicked {
		// Logged with its stack already; x/net resets the stream.
		panic(http.ErrAbortHandler)
	}
}

// h2Reject answers a stream with its rejection: the status, Retry-After,
// Sluice-Not-Started and reason of an HTTP/1.1 rejection, on the stream;
// the connection stays. A gRPC call gets it in gRPC's terms instead
// (reject.Answer.SetGRPCHeader): a Trailers-Only response, which a gRPC
// client reads as a status (UNAVAILABLE, RESOURCE_EXHAUSTED,
// DEADLINE_EXCEEDED) with the retry pushback and the not-started marker as
// metadata, where a 503 with a text body read as a protocol error.
func h2Reject(w http.ResponseWriter, r *http.Request, t *admit.Ticket) {
	a, extra := t.Answer()
	if reject.IsGRPC(r) {
		a.SetGRPCHeader(w.Header(), extra)
		w.WriteHeader(http.StatusOK) // no body: x/net ends the stream with the headers
		return
	}
	a.SetHeader(w.Header(), true, extra)
	w.WriteHeader(a.Status)
	_, _ = io.WriteString(w, a.Body)
}

// request is the stream's request as the server's own Request, for the
// lane rules (Lanes.Func) and the policies (Attempt.Request). It has no
// connection of the server's: Worker and LocalAddr return nil.
func (hc *h2Conn) request(r *http.Request) *Request {
	return &Request{
		Method: r.Method, RequestURI: r.RequestURI, URL: r.URL,
		Proto: r.Proto, ProtoMajor: r.ProtoMajor, ProtoMinor: r.ProtoMinor,
		Header: r.Header, Host: r.Host, ContentLength: r.ContentLength,
		RemoteAddr: hc.peer, TLS: hc.tls, Body: r.Body, ctx: r.Context(),
	}
}

// run runs the handler of an admitted stream as a coroutine on wk, in
// lane, or, when wk's book knows its route as a stream (startAway), on
// the calling goroutine, and waits for it: the status it answered, the
// write error or panic, and whether it panicked. The handler does not run
// (unstarted) when the stream's context ends before its coroutine starts,
// or, in the built-in lanes, when the coroutine starts past the
// admission's age limit counted from arrived (Unix nanoseconds, when the
// stream reached the server's goroutine).
func (hc *h2Conn) run(wk *sched.Worker, lane lanes.ID, w http.ResponseWriter, r *http.Request, t *admit.Ticket, arrived int64) (status int, err error, panicked, unstarted bool) {
	srv := hc.s.srv
	ctx, cancel := streamContext(r, t)
	defer cancel()
	ended := make(chan struct{})
	how := startShared // set on wk before fn runs (routeBook.start)
	// start is 0 until the coroutine starts (1) or the stream gives up
	// waiting for it (2): whichever comes first decides.
	var start atomic.Int32
	fn := func(ctx context.Context) {
		defer close(ended)
		if !start.CompareAndSwap(0, 1) {
			return // abandoned: no one waits for it
		}
		if lane == lanes.Upstream && srv.adm.TooOld(arrived) {
			unstarted = true
			return
		}
		status, err, panicked = hc.call(ctx, w, r, wk, how, nil)
	}
	book := &srv.ws[wk.ID()].routes
	// noSpare, on wk, ends a stream of a route known to block unstarted
	// when no spare thread is left for it (sched.Worker.SpareFree): its
	// handler would block wk's own thread (sparesPolicy for HTTP/1.1).
	noSpare := func() bool {
		if how != startRelease || wk.SpareFree() || !start.CompareAndSwap(0, 2) {
			return false
		}
		unstarted, err = true, errNoSpare
		close(ended)
		return true
	}
	// away is closed when the route streams (startAway): the handler then
	// runs here, on the stream's goroutine, rather than on wk.
	away := make(chan struct{})
	var serr error
	if lane == lanes.Upstream {
		// A new request: Upstream work, resumed in Continuation.
		serr = wk.Submit(lanes.Upstream, func() {
			switch how = book.start(r.Method, r.URL.Path); how {
			case startShared:
				wk.GoNow(ctx, fn)
			case startAway:
				close(away)
			default:
				if !noSpare() {
					wk.GoAlone(ctx, lane, fn)
				}
			}
		})
	} else {
		// Queued in its lane, where its resumptions go too.
		serr = wk.Submit(lanes.Continuation, func() {
			switch how = book.start(r.Method, r.URL.Path); how {
			case startShared:
				wk.Go(ctx, lane, fn)
			case startAway:
				close(away)
			default:
				if !noSpare() {
					wk.GoAlone(ctx, lane, fn)
				}
			}
		})
	}
	if serr != nil {
		// The runtime stopped.
		http.Error(w, "503 Service Unavailable: the server is stopping", http.StatusServiceUnavailable)
		return http.StatusServiceUnavailable, serr, false, false
	}
	select {
	case <-ended:
	case <-away:
		// A stream's route: its waits hold neither the worker nor a
		// thread here, as a gRPC call's (runGRPC).
		if lane == lanes.Upstream && srv.adm.TooOld(arrived) {
			return 0, nil, false, true
		}
		status, err, panicked = hc.call(ctx, w, r, nil, startShared, nil)
		return status, err, panicked, false
	case <-ctx.Done():
		// The client reset the stream, the connection ended (Close), or
		// the caller's time ran out: a handler that started sees it in its
		// context and is waited for; one that did not will not start (a
		// runtime stopped with its queue dropped never runs it).
		if start.CompareAndSwap(0, 2) {
			return 0, ctx.Err(), false, true
		}
		<-ended
	}
	return status, err, panicked, unstarted
}

// runGRPC runs the handler of an admitted gRPC call (reject.IsGRPC) on the
// stream's own goroutine, as net/http runs every handler, and returns the
// status it answered, the write error or panic, and whether it panicked.
// grpc-go's ServeHTTP waits in a select for the whole life of the call,
// streams included, and runs the method itself on a goroutine of its own:
// on a worker it would hold the worker's thread until the watchdog handed
// it over, at every call, while running it here costs nothing (lanes and
// sched.Await do not reach grpc-go's method goroutines either way). The
// call was admitted at its start like any request; what it does after
// runs beside the workers, not on them.
func (hc *h2Conn) runGRPC(w http.ResponseWriter, r *http.Request, t *admit.Ticket) (status int, err error, panicked bool) {
	ctx, cancel := streamContext(r, t)
	defer cancel()
	return hc.call(ctx, w, r, nil, startShared, nil)
}

// streamContext returns the context a stream's handler runs with: the
// stream's, ending at the caller's deadline if the admission read one
// (admit.Ticket.Deadline).
func streamContext(r *http.Request, t *admit.Ticket) (context.Context, context.CancelFunc) {
	if dl, ok := t.Deadline(); ok {
		return context.WithDeadline(r.Context(), dl)
	}
	return r.Context(), func() {}
}

// call runs the handler on the stream, with ctx as its request's context:
// as guest code of wk (sched.Worker.Guest) on wk's coroutine, or on the
// calling goroutine when wk is nil (on the lease lent, if not nil, which
// the writer gives back before a wait for x/net); started as how
// (routeBook.start), it gives the worker away as the handler begins when
// its route blocks. It recovers a panic, logs it (unless it is
// http.ErrAbortHandler) and reports it. A gRPC call's body is not
// limited as a whole by MaxBodyBytes: a stream's body is every message of
// its life, and gRPC limits each message itself (grpc-go's
// MaxRecvMsgSize, 4 MiB by default).
func (hc *h2Conn) call(ctx context.Context, w http.ResponseWriter, r *http.Request, wk *sched.Worker, how int, lent *h2Lent) (status int, err error, panicked bool) {
	srv := hc.s.srv
	hw := &h2Writer{rw: w, ctx: ctx, wk: wk, r: r, lent: lent}
	if wk != nil {
		hw.book = &srv.ws[wk.ID()].routes
	}
	// x/net's body goes through sched.Await, unless it was read before
	// (readBodyFirst) or there is none (a Content-Length of 0: x/net's
	// body is at its end); the request is x/net's own when it keeps its
	// body and its context.
	var body io.ReadCloser
	if _, read := r.Body.(*h2ReadBody); !read && r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		body = &h2Body{rc: r.Body, ctx: ctx}
		if max := srv.cfg.MaxBodyBytes; max > 0 && !reject.IsGRPC(r) {
			body = http.MaxBytesReader(hw, body, max)
		}
	}
	hr := r
	if body != nil || ctx != r.Context() {
		hr = r.WithContext(ctx)
		if body != nil {
			hr.Body = body
		}
	}
	if srv.cfg.LoadHint {
		k, v := srv.loadHint()
		w.Header().Set(k, v)
	}
	defer func() {
		status = hw.status
		if status == 0 {
			status = http.StatusOK
		}
		err = hw.err
		if v := recover(); v != nil {
			panicked = true
			err = fmt.Errorf("server: handler panic: %v", v)
			if v != http.ErrAbortHandler {
				if ok, dropped := srv.panics.Allow(time.Now()); ok {
					srv.log.Error("sluice server: handler panic", "method", r.Method, "uri", r.RequestURI,
						"remote", hc.peer.String(), "proto", r.Proto, "panic", fmt.Sprint(v),
						"stack", string(debug.Stack()), "unlogged_before", dropped)
				}
			}
		}
	}()
	if wk == nil {
		hc.s.handler.ServeHTTP(hw, hr)
		return
	}
	book := hw.book
	how = book.begin(r.Method, r.URL.Path, how)
	blocked := wk.Guest(h2Name{r, book}, func() {
		if how == startRelease {
			wk.Release()
		}
		hc.s.handler.ServeHTTP(hw, hr)
	})
	// The worker is the handler's again (Guest's end): the book is its.
	book.ended(r.Method, r.URL.Path, how, blocked || hw.streamed)
	if q := &hc.s.routes; q.lookup(r.Method, r.URL.Path) == nil {
		if h, ok := book.settled(r.Method, r.URL.Path); ok && h == startShared {
			q.learn(r.Method, r.URL.Path)
		}
	}
	return
}

// h2Name names a stream's handler for the scheduler's log of handlers
// that block their worker.
type h2Name struct {
	r    *http.Request
	book *routeBook // the stream's worker's
}

func (n h2Name) String() string { return n.r.Method + " " + n.r.URL.Path + " (HTTP/2)" }

// Blocked runs on the worker once the watchdog found the handler blocked:
// the route's next streams start alone (routeBook).
func (n h2Name) Blocked() { n.book.found(n.r.Method, n.r.URL.Path) }

// h2Writer is an HTTP/2 stream's ResponseWriter as the handler sees it:
// x/net's, with every call that may wait for x/net's serve loop (a write
// beyond its buffer, a flush, an informational header, a deadline)
// made through sched.Await, so that the handler's worker serves other
// work meanwhile instead of blocking.
type h2Writer struct {
	rw       http.ResponseWriter
	ctx      context.Context
	buffered int // bytes in x/net's buffer since its last flush
	status   int
	err      error

	// wk and book are the stream's worker and its route book (nil: the
	// handler runs on the stream's goroutine); r is the request.
	wk       *sched.Worker
	book     *routeBook
	r        *http.Request
	streamed bool // the handler flushed: a stream (routeBook.streamed)
	// lent is the lease the handler runs on, on the stream's goroutine
	// (runLent), or nil: given back before any wait for x/net.
	lent *h2Lent
}

var (
	_ http.ResponseWriter = (*h2Writer)(nil)
	_ http.Flusher        = (*h2Writer)(nil)
	_ io.StringWriter     = (*h2Writer)(nil)
)

func (w *h2Writer) Header() http.Header { return w.rw.Header() }

func (w *h2Writer) WriteHeader(code int) {
	if code >= 100 && code <= 199 {
		// Informational: x/net sends it at once, through its serve loop.
		w.lent.giveBack(false)
		_, _ = sched.Await(w.ctx, func(context.Context) (struct{}, error) {
			w.rw.WriteHeader(code)
			return struct{}{}, nil
		})
		return
	}
	if w.status == 0 {
		w.status = code
	}
	w.rw.WriteHeader(code)
}

func (w *h2Writer) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.direct(len(p)) {
		n, err := w.rw.Write(p)
		w.buffered += n
		return n, w.noteErr(err)
	}
	n, err := sched.Await(w.ctx, func(context.Context) (int, error) {
		n, err := w.rw.Write(p)
		if err == nil {
			err = http.NewResponseController(w.rw).Flush()
		}
		return n, err
	})
	w.buffered = 0
	return n, w.noteErr(err)
}

func (w *h2Writer) WriteString(s string) (int, error) {
	if w.direct(len(s)) {
		if w.status == 0 {
			w.status = http.StatusOK
		}
		n, err := io.WriteString(w.rw, s)
		w.buffered += n
		return n, w.noteErr(err)
	}
	return w.Write([]byte(s))
}

// direct reports whether a write of n bytes goes to x/net's writer from
// the calling goroutine, as net/http's: it fits in x/net's buffer (a
// copy, nothing waits), or the handler runs on the stream's goroutine,
// where a wait holds nothing of the executor's once a lease is given
// back (which it does here).
func (w *h2Writer) direct(n int) bool {
	if w.buffered+n <= h2WriteBuf {
		return true
	}
	if w.wk != nil {
		return false
	}
	w.lent.giveBack(false)
	return true
}

func (w *h2Writer) noteErr(err error) error {
	if err != nil && w.err == nil {
		w.err = err
	}
	return err
}

// Flush sends what the handler wrote (http.Flusher).
func (w *h2Writer) Flush() { _ = w.FlushError() }

// FlushError is Flush with its error, for http.ResponseController. As on
// HTTP/1.1 (ResponseWriter.FlushError), a handler that flushes streams
// and commonly waits after each Flush: from the handler's coroutine, the
// worker goes to a spare thread once the flush is done, its later waits
// are not logged as ones that forgot sched.Await, and the route's next
// streams give the worker away as they begin (routeBook).
func (w *h2Writer) FlushError() error {
	if w.wk != nil && sched.InCoroutine(w.ctx) {
		w.wk.Quiet()
		defer w.wk.Release() // once the flush below is done
		if !w.streamed {
			w.streamed = true
			e := w.wk.Enter() // the book is the worker's
			w.book.streamed(w.r.Method, w.r.URL.Path)
			w.wk.Leave(e)
		}
	}
	var err error
	if w.wk == nil {
		// On the stream's goroutine (a gRPC call, a stream run away, a
		// lease given back first): x/net's flush, with neither Await's
		// context walk nor a ResponseController to allocate, at every
		// message of a stream.
		w.lent.giveBack(true)
		err = flushNow(w.rw)
	} else {
		_, err = sched.Await(w.ctx, func(context.Context) (struct{}, error) {
			return struct{}{}, flushNow(w.rw)
		})
	}
	w.buffered = 0
	return w.noteErr(err)
}

// flushNow flushes x/net's response writer rw, as
// http.ResponseController's Flush does, without allocating one.
func flushNow(rw http.ResponseWriter) error {
	switch f := rw.(type) {
	case interface{ FlushError() error }:
		return f.FlushError()
	case http.Flusher:
		f.Flush()
		return nil
	}
	return http.ErrNotSupported
}

// SetReadDeadline, SetWriteDeadline and EnableFullDuplex are x/net's, for
// http.ResponseController.
func (w *h2Writer) SetReadDeadline(t time.Time) error {
	_, err := sched.Await(w.ctx, func(context.Context) (struct{}, error) {
		return struct{}{}, http.NewResponseController(w.rw).SetReadDeadline(t)
	})
	return err
}

func (w *h2Writer) SetWriteDeadline(t time.Time) error {
	_, err := sched.Await(w.ctx, func(context.Context) (struct{}, error) {
		return struct{}{}, http.NewResponseController(w.rw).SetWriteDeadline(t)
	})
	return err
}

func (w *h2Writer) EnableFullDuplex() error { return nil }

// h2ReadFirst is the largest request body, by its Content-Length, that a
// stream's goroutine reads before the handler runs (readBodyFirst).
const h2ReadFirst = 64 << 10

// readBodyFirst reads r's body whole on the stream's goroutine, before
// its handler runs, when its Content-Length is known and at most
// h2ReadFirst, and the client does not wait for a 100 Continue: r.Body
// then serves it from memory (h2ReadBody). It reports whether it did. The
// stream's goroutine waits for the handler anyway, so the wait for the
// body's DATA frames costs nothing there, where a handler on a worker
// would go through sched.Await at each read (a goroutine and two
// wake-ups across threads), and one on a lease would hold the worker's
// queue while it waits. What a handler sees is the same: the bytes, then
// the error the read ended with (io.EOF, or the reset that cut it), and
// the trailers, read with the body.
func readBodyFirst(r *http.Request) bool {
	n := r.ContentLength
	if n <= 0 || n > h2ReadFirst || r.Body == nil || r.Body == http.NoBody || len(r.Header["Expect"]) > 0 {
		return false
	}
	// One byte more than declared: the end of the stream, and its
	// trailers, come after the last byte, and are read as a handler that
	// reads to io.EOF reads them (x/net refuses a body longer than its
	// Content-Length). io.ReadAll grows its buffer as the bytes come,
	// never to the declared length at once: streams that declare 64 KiB
	// and send nothing must not hold 64 KiB each (x/net's own buffer grows
	// the same way). It ends at io.EOF without reporting it; any other
	// error it reports, and the handler gets that one.
	data, err := io.ReadAll(io.LimitReader(r.Body, n+1))
	if err == nil {
		err = io.EOF
	}
	r.Body = &h2ReadBody{rc: r.Body, data: data, err: err}
	return true
}

// h2ReadBody is a request body read whole before the handler ran
// (readBodyFirst).
type h2ReadBody struct {
	rc   io.ReadCloser // x/net's body, for Close
	data []byte
	err  error // what the read ended with, after data
}

func (b *h2ReadBody) Read(p []byte) (int, error) {
	if len(b.data) == 0 {
		return 0, b.err
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

func (b *h2ReadBody) Close() error { return b.rc.Close() }

// h2Body is an HTTP/2 request body whose reads go through sched.Await:
// the handler's worker serves other work while a read waits for the
// client's DATA frames.
type h2Body struct {
	rc  io.ReadCloser
	ctx context.Context
}

func (b *h2Body) Read(p []byte) (int, error) {
	return sched.Await(b.ctx, func(context.Context) (int, error) { return b.rc.Read(p) })
}

func (b *h2Body) Close() error { return b.rc.Close() }

// replayConn is an h2c connection whose first bytes, already read by the
// worker (the preface, and whatever came with it), are read again first.
type replayConn struct {
	net.Conn
	pending []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// isH2Preface reports whether data, the first bytes of a plain
// connection, are (all of) the HTTP/2 preface, or may still become it.
func isH2Preface(data []byte) (complete, maybe bool) {
	if len(data) >= len(h2Preface) {
		return bytes.HasPrefix(data, []byte(h2Preface)), false
	}
	return false, bytes.HasPrefix([]byte(h2Preface), data)
}
