package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/sched"
)

// This file holds what makes the ResponseWriter and the request's context
// behave as net/http's do for the features net/http offers through
// interfaces and context keys: Hijack, the read and write deadlines that
// http.ResponseController sets, EnableFullDuplex, http.ServerContextKey and
// http.LocalAddrContextKey.

// hijackBufSize is the size of the buffers of the bufio.ReadWriter that
// Hijack returns (net/http's are 4 KB too); the reader is larger when more
// bytes were already read.
const hijackBufSize = 4 << 10

// errWriterDone is returned by the methods of a ResponseWriter used after
// its handler returned.
var errWriterDone = errors.New("server: ResponseWriter used after its handler returned")

// Hijack lets the handler take over the connection, as net/http's
// http.Hijacker: for WebSocket and other protocols a request upgrades to
// (Upgrade, 101 Switching Protocols), and for proxies that tunnel
// (CONNECT). After a successful Hijack the server does nothing more with the
// connection: the caller reads, writes and closes it, and sets its
// deadlines.
//
// The returned net.Conn wraps a *net.TCPConn run by Go's own network
// poller, not by the worker: Hijack duplicates the socket's descriptor into
// it (net.FileConn), then takes the connection off the worker (its epoll
// set, its timers, the server's list of connections) and closes the
// worker's descriptor, so that closing the net.Conn is what ends the
// connection. Its NetConn method returns the *net.TCPConn (net/http's
// Hijack returns that itself), and it has TCP's CloseRead and CloseWrite;
// over HTTPS it is a *tls.Conn, as on net/http.
// The bufio.ReadWriter's Reader holds, already buffered, the bytes the
// server had read past the request's head and the part of the body the
// handler did not read (a request pipelined behind this one, the start of
// a WebSocket frame): read from it before reading the net.Conn. Its Writer
// writes to the net.Conn; flush it.
//
// As in net/http, a status the handler set with WriteHeader and did not
// send yet goes out first, so that WriteHeader(101) then Hijack answers
// the upgrade (body bytes still in the response buffer are dropped);
// otherwise the handler writes the whole response itself. Once hijacked,
// Write and WriteString return http.ErrHijacked (and log the caller),
// WriteHeader does nothing but log, FlushError and the deadline setters
// return http.ErrHijacked, and reads of the request body return
// http.ErrHijacked: its bytes are in the Reader. A second Hijack returns
// http.ErrHijacked; Hijack after the handler returned panics.
//
// A hijacked connection leaves the server's books: its admission ends at
// Hijack (the pipeline's Done, with status 101 or the status written), so
// it no longer counts as a request in flight nor against the gates, and
// it counts in neither OpenConns nor what Shutdown and Close wait for
// (net/http does not track hijacked connections either). The handler may
// return at once and serve the connection from a goroutine of its own,
// which then belongs to the program: close it when the program stops.
//
// A handler that serves the connection itself until the client leaves
// (the WebSocket examples of coder/websocket and gorilla/websocket read
// and write in a loop inside the handler) costs what it costs on net/http,
// a waiting goroutine, and never its worker's thread: the net.Conn's reads
// and writes made from the handler's coroutine wait off the worker
// (through sched.Await), so the worker serves its other connections
// meanwhile and the handler resumes on it when data comes. Reads and
// writes from other goroutines are the socket's own. Any other wait of the
// handler's after Hijack (a channel, a lock) is by design: when it holds
// the thread, the worker goes on on a spare thread without the warning
// for a missing sched.Await (sched.Worker.Quiet).
//
// Call Hijack from the handler, or from one goroutine the handler waits
// for, and not while another goroutine reads the request body. From such
// a goroutine, Hijack hands its work on the connection to the worker and
// waits for it: a handler that waits by blocking its thread (a channel, a
// WaitGroup) frees the worker only through the blocked-worker rescue, so
// with the rescue turned off (runtime.Config.BlockedAfter -1) call Hijack
// from the handler itself, or wait through sched.Await.
func (w *ResponseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.returned.Load() {
		panic("server: Hijack called after the handler returned")
	}
	c := w.c
	if c.w != nil && !sched.InCoroutine(w.ctx) {
		// Not the handler's coroutine: the connection's state is the
		// worker's, changed only there.
		type result struct {
			nc  net.Conn
			brw *bufio.ReadWriter
			err error
		}
		done := make(chan result, 1)
		if err := c.w.Submit(lanes.Continuation, func() {
			nc, brw, err := w.hijack()
			done <- result{nc, brw, err}
		}); err != nil {
			return nil, nil, fmt.Errorf("server: hijack: %w", err)
		}
		r := <-done
		return r.nc, r.brw, r.err
	}
	nc, brw, err := w.hijackOnWorker()
	if err == nil && c.w != nil {
		// The handler has the connection now, and most go on to serve it
		// in place until the client leaves (a WebSocket's loop). Its
		// reads and writes wait off the worker (handlerConn); any other
		// wait of its own is by design too, handed over unlogged.
		c.w.Quiet()
		// The worker is the handler's while it runs here (enter).
		e := c.enter()
		c.ws.routes.hijacked(w.req.Method, w.req.URL.Path)
		c.leave(e)
	}
	return nc, brw, err
}

// hijackOnWorker is hijack from the handler's coroutine, with its worker.
func (w *ResponseWriter) hijackOnWorker() (net.Conn, *bufio.ReadWriter, error) {
	defer w.c.leave(w.c.enter())
	return w.hijack()
}

// hijack is Hijack, on the worker.
func (w *ResponseWriter) hijack() (net.Conn, *bufio.ReadWriter, error) {
	c := w.c
	switch {
	case w.returned.Load():
		return nil, nil, errWriterDone
	case w.hijacked:
		return nil, nil, http.ErrHijacked
	}
	if c.state != connActive {
		return nil, nil, fmt.Errorf("server: hijack: %w", net.ErrClosed)
	}
	if b := c.body; b != nil {
		b.continueWanted = false // never send 100 Continue on it now
	}
	if w.wroteHeader && !w.headerSent {
		w.out = w.out[:0]
		if err := w.flush(false); err != nil {
			return nil, nil, fmt.Errorf("server: hijack: sending the response header: %w", err)
		}
	}
	nc, err := c.goConn()
	if err != nil {
		return nil, nil, fmt.Errorf("server: hijack: %w", err)
	}
	var gc net.Conn = newHandlerConn(w.ctx, nc)
	if c.tlsState != nil {
		// The TLS session goes with it, as net/http hands over its
		// *tls.Conn.
		tc, err := c.nc.Detach(gc)
		if err != nil {
			_ = gc.Close()
			return nil, nil, fmt.Errorf("server: hijack: %w", err)
		}
		gc = tc
	}
	var pending []byte
	if c.r < c.n {
		pending = bytes.Clone(c.buf[c.r:c.n])
	}
	status := http.StatusSwitchingProtocols
	if w.wroteHeader {
		status = w.status
	}
	w.hijacked = true
	w.putOut(w.out)
	w.out = nil
	if b := c.body; b != nil {
		b.err = http.ErrHijacked
	}
	c.detach(status)

	var br *bufio.Reader
	if len(pending) == 0 {
		br = bufio.NewReaderSize(gc, hijackBufSize)
	} else {
		// Buffered in the Reader, as net/http's are: gorilla/websocket,
		// for one, checks Buffered() for bytes sent before the handshake
		// ended. Peek copies them from memory; it cannot fail.
		br = bufio.NewReaderSize(&prefixReader{pending: pending, r: gc}, max(len(pending), hijackBufSize))
		_, _ = br.Peek(len(pending))
	}
	return gc, bufio.NewReadWriter(br, bufio.NewWriterSize(gc, hijackBufSize)), nil
}

// goConn returns a net.Conn run by Go's network poller on a duplicate of
// the connection's socket. The connection itself is untouched: on error
// the server goes on with it.
func (c *conn) goConn() (net.Conn, error) {
	fd, err := dupFD(uintptr(c.fd))
	if err != nil {
		return nil, os.NewSyscallError("fcntl", err)
	}
	f := os.NewFile(uintptr(fd), "sluice-hijacked")
	// FileConn duplicates the descriptor once more, for the poller, and
	// leaves it non-blocking; f's is closed here.
	nc, err := net.FileConn(f)
	_ = f.Close()
	return nc, err
}

// detach makes the server forget a hijacked connection: its admission
// ends (with status, for the policies' outcome), its timer stops, it
// leaves the worker's epoll set and list of connections and stops counting
// as open. The worker's descriptor is closed; the handler's net.Conn holds
// another on the same socket.
func (c *conn) detach(status int) {
	if c.admitted {
		c.admitted = false
		c.srv.adm.Done(&c.t, admit.Outcome{Status: status})
	}
	c.forget()
	c.srv.connClosed()
}

// forget makes the worker forget a connection given away (Hijack, or
// HTTP/2's goroutines): its timer stops, it leaves the worker's epoll set
// and list of connections, and the worker's descriptor is closed (the new
// owner holds another on the same socket). It still counts as open: the
// caller says when it stops (connClosed).
func (c *conn) forget() {
	c.stopTimer()
	c.readWaiter = nil
	c.state = connHijacked
	_ = c.nc.Close()
	if c.buf != nil {
		c.ws.putBuf(c.buf)
		c.buf = nil
	}
	c.r, c.n, c.scan = 0, 0, 0
	c.ws.conns.remove(c)
}

// prefixReader reads pending, then r: the reader under a hijacked
// connection's bufio.Reader, whose buffer it fills with the bytes the
// server had read before.
type prefixReader struct {
	pending []byte
	r       io.Reader
}

func (p *prefixReader) Read(b []byte) (int, error) {
	if len(p.pending) > 0 {
		n := copy(b, p.pending)
		p.pending = p.pending[n:]
		return n, nil
	}
	return p.r.Read(b)
}

// callerOf names the function skip frames above it, for log lines about
// misuse (net/http names the caller of a Write on a hijacked connection).
func callerOf(skip int) string {
	pc, file, line, ok := runtime.Caller(skip)
	if !ok {
		return "unknown"
	}
	name := "?"
	if fn := runtime.FuncForPC(pc); fn != nil {
		name = fn.Name()
	}
	return fmt.Sprintf("%s (%s:%d)", name, file, line)
}

// usable reports why the writer's connection methods cannot be used:
// hijacked, or the handler returned.
func (w *ResponseWriter) usable() error {
	switch {
	case w.returned.Load():
		return errWriterDone
	case w.hijacked:
		return http.ErrHijacked
	}
	return nil
}

// SetReadDeadline sets the deadline for reading the request, body
// included, as http.ResponseController.SetReadDeadline does on net/http:
// a body read that would wait past it fails with a timeout error
// (wrapping os.ErrDeadlineExceeded). It replaces Config.ReadTimeout's
// deadline for this request, in either direction; the zero time means
// none. Once a read has failed the body stays failed: setting a later
// deadline then does not revive it. The next request on the connection
// gets Config.ReadTimeout again.
func (w *ResponseWriter) SetReadDeadline(t time.Time) error {
	return w.setDeadline(&w.c.readDL, t)
}

// SetWriteDeadline sets the deadline for writing the response, as
// http.ResponseController.SetWriteDeadline does on net/http: a write that
// would go on past it fails with a timeout error (wrapping
// os.ErrDeadlineExceeded) and the connection closes after the handler. It
// replaces Config.WriteTimeout's deadline for this request, in either
// direction (a handler that streams for longer than WriteTimeout extends
// it); the zero time means none. Once a write has failed the response
// stays failed. The next request gets Config.WriteTimeout again.
func (w *ResponseWriter) SetWriteDeadline(t time.Time) error {
	return w.setDeadline(&w.c.writeDL, t)
}

// setDeadline sets one of the request's deadlines and re-arms the
// connection's timer, on the worker: at once from the handler's coroutine,
// through a task from any other goroutine (whose own waits in poll(2) read
// the deadline itself).
func (w *ResponseWriter) setDeadline(dl *atomic.Int64, t time.Time) error {
	if w.returned.Load() {
		return errWriterDone
	}
	c := w.c
	if c.w != nil && !sched.InCoroutine(w.ctx) {
		if err := w.usable(); err != nil {
			return err
		}
		dl.Store(c.clockDeadline(t))
		_ = c.w.Submit(lanes.Continuation, c.rearm)
		return nil
	}
	defer c.leave(c.enter())
	if err := w.usable(); err != nil {
		return err
	}
	dl.Store(c.clockDeadline(t))
	c.rearm()
	return nil
}

// rearm re-arms the timer of a request in progress for its deadlines.
func (c *conn) rearm() {
	if c.state == connActive || c.state == connQueued {
		c.armActive()
	}
}

// EnableFullDuplex is what http.ResponseController.EnableFullDuplex calls:
// it lets a handler read the request body after it has begun to write the
// response. sluice's server always allows that, so it only reports
// success. (net/http's HTTP/1 server, without it, discards the unread body
// when the response's header goes out, so that a client that sends its
// whole request before reading cannot deadlock against a handler that
// writes first; here such a handler's writes wait for the client, up to
// WriteTimeout.)
func (w *ResponseWriter) EnableFullDuplex() error { return nil }

// clockDeadline converts t to the worker's clock; 0 for the zero time.
func (c *conn) clockDeadline(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return max(c.srv.s.Now()+int64(time.Until(t)), 1)
}

// passed reports whether deadline (0: none) is at or before now.
func passed(deadline, now int64) bool { return deadline != 0 && now >= deadline }

// startDeadlines sets the read and write deadlines of a request whose head
// has just been read: ReadTimeout from its first byte, WriteTimeout from
// now.
func (c *conn) startDeadlines() {
	cfg := &c.srv.cfg
	var rd, wd int64
	if cfg.ReadTimeout > 0 {
		rd = c.began + int64(cfg.ReadTimeout)
	}
	if cfg.WriteTimeout > 0 {
		wd = c.w.Now() + int64(cfg.WriteTimeout)
	}
	c.readDL.Store(rd)
	c.writeDL.Store(wd)
	if rd != 0 || wd != 0 {
		c.armActive()
	}
}

// armActive arms the connection's timer for the next deadline of the
// request in progress: the read deadline while the body may still be read
// (by the handler, or by the server draining it after the handler), the
// write deadline until the response ends.
func (c *conn) armActive() {
	now := c.w.Now()
	next := int64(0)
	if b := c.body; b == nil || !b.done {
		if dl := c.readDL.Load(); dl > now {
			next = dl
		}
	}
	if dl := c.writeDL.Load(); dl > now && (next == 0 || dl < next) {
		next = dl
	}
	if next == 0 {
		c.disarm()
		return
	}
	c.armAt(next)
}

// deadlinePassed is the timer of a request in progress: a body read that
// waits past the read deadline is woken to fail, and a write that waits
// for the client past the write deadline is abandoned.
func (c *conn) deadlinePassed() {
	now := c.w.Now()
	if passed(c.readDL.Load(), now) {
		if w := c.readWaiter; w != nil {
			c.readWaiter = nil
			_ = c.nc.OnReadable(lanes.Continuation, nil)
			w()
		}
	}
	if passed(c.writeDL.Load(), now) {
		c.nc.AbortWrite(os.ErrDeadlineExceeded)
	}
	c.armActive()
}

// readLeft and writeLeft tell a handler's helper goroutine, blocked in
// poll(2), how long it may still wait (netpoll.Deadline).
func (c *conn) readLeft() (time.Duration, bool)  { return c.left(c.readDL.Load()) }
func (c *conn) writeLeft() (time.Duration, bool) { return c.left(c.writeDL.Load()) }

func (c *conn) left(deadline int64) (time.Duration, bool) {
	if deadline == 0 {
		return 0, false
	}
	return time.Duration(deadline - c.srv.s.Now()), true
}

// readTimedOut is the error of a body read past the read deadline. As
// net/http does when its connection's read fails, it also cancels the
// request's context: the request will not be read to its end.
func (c *conn) readTimedOut() error {
	c.endRequest()
	return c.timeoutError("read")
}

// timeoutError is the error of a read or write past its deadline, shaped as
// net/http's: a *net.OpError, a net.Error whose Timeout is true, wrapping
// os.ErrDeadlineExceeded.
func (c *conn) timeoutError(op string) error {
	e := &net.OpError{Op: op, Net: "tcp", Addr: net.TCPAddrFromAddrPort(c.nc.RemoteAddr()), Err: os.ErrDeadlineExceeded}
	if a := c.laddr.Load(); a != nil {
		e.Source = a
	}
	return e
}

// localAddr returns the connection's local address, asking the kernel the
// first time: on the worker or in the handler, while the connection is
// open. Nil when the kernel does not say.
func (c *conn) localAddr() net.Addr {
	if a := c.laddr.Load(); a != nil {
		return a
	}
	defer c.leave(c.enter())
	ap, err := c.nc.LocalAddr()
	if err != nil {
		return nil
	}
	a := net.TCPAddrFromAddrPort(ap)
	c.laddr.Store(a)
	return a
}

// connContext is the parent of a connection's request contexts, as the
// connection's context is in net/http: it never ends (the request's own
// context does), and it answers http.ServerContextKey with the server's
// description (Server.HTTPServer) and http.LocalAddrContextKey with the
// connection's local address once that is known (Request.LocalAddr, which
// HTTPRequest calls). It lives inside the conn: requests allocate nothing
// for it.
type connContext struct {
	c *conn
}

func (x *connContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (x *connContext) Done() <-chan struct{}       { return nil }
func (x *connContext) Err() error                  { return nil }

func (x *connContext) Value(key any) any {
	switch key {
	case http.ServerContextKey:
		return x.c.srv.hs
	case http.LocalAddrContextKey:
		if a := x.c.laddr.Load(); a != nil {
			return a
		}
	}
	return nil
}

func (x *connContext) String() string { return "sluice.connContext" }

var _ context.Context = (*connContext)(nil)

// describe builds the *http.Server of HTTPServer, once per server (the
// caller sets its Addr once the listener is open).
func (srv *Server) describe(h Handler) *http.Server {
	cfg := &srv.cfg
	hs := &http.Server{
		ReadHeaderTimeout: srv.headTimeout,
		ReadTimeout:       max(cfg.ReadTimeout, 0),
		WriteTimeout:      max(cfg.WriteTimeout, 0),
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(srv.log.Handler(), slog.LevelError),
		TLSConfig:         srv.tls,
	}
	if a, ok := h.(httpHandler); ok {
		hs.Handler = a.h
	}
	return hs
}

// HTTPServer returns the *http.Server that the server's handlers find
// under http.ServerContextKey in their request's context, as net/http's
// handlers find the server that runs them. sluice has no *http.Server, and
// code that reads the key expects one (net/http/pprof's Profile and Trace
// extend their write deadline by its WriteTimeout, h2c's upgrade in
// golang.org/x/net/http2 takes its settings from it), so this one
// describes the sluice server in
// net/http's terms: its Addr, its effective timeouts (defaults applied,
// ReadHeaderTimeout bounded by ReadTimeout, a negative IdleTimeout for
// none), MaxHeaderBytes and TLSConfig (the one the server uses, with its
// ALPN protocols), the http.Handler given to HTTPHandler as its
// Handler (nil for a native Handler), and an ErrorLog that writes to
// Config.Logger at the error level. It is built once per server and is
// descriptive, not running: changing it changes nothing, and its
// ListenAndServe, Serve, Shutdown and Close must not be called (they
// would start or stop a net/http server of its own, not this one).
func (srv *Server) HTTPServer() *http.Server { return srv.hs }
