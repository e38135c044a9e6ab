// Package server is an HTTP/1.1 server (and HTTP/2, for net/http
// handlers: see Config.DisableHTTP2) that runs on the sluice executor:
// connections are accepted, read, parsed and answered by the worker that owns
// them, in the lanes of the design (a new request is Upstream work; the rest
// of a request already started, its handler's resumptions and its response
// are Continuation work), and handlers run as coroutines on that worker, so
// that Await releases the worker while a handler waits. Config.Lanes sends
// chosen routes to lanes of their own, whose shares and priorities decide
// who gets the CPU once requests have started (see Lanes).
//
// Handlers come in two forms: the native Handler, which gets the server's
// own Request, and any net/http Handler through HTTPHandler, which gets an
// ordinary *http.Request whose context ends when the client goes away (and
// carries http.ServerContextKey and http.LocalAddrContextKey), and a
// ResponseWriter that is also an http.Flusher and an http.Hijacker and
// answers http.ResponseController. Routers, middleware and WebSocket
// libraries written for net/http run unchanged; the README's "net/http
// differences" lists where the server differs.
//
// A handler that blocks without Await (time.Sleep, a raw socket, a blocking
// driver) holds its worker for the duration: that is the "isolated" model
// (docs/background.md), which works but caps throughput at workers /
// blocking time. The await
// package has an http.RoundTripper, a database/sql connector and a Sleep that
// release the worker instead.
//
// # Off Linux
//
// The package builds everywhere, but the server runs on the Linux executor:
// elsewhere Listen and Serve fail with an error that wraps
// errors.ErrUnsupported. The front door (package sluice) serves on net/http
// there, behind the same admission pipeline.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"reflect"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/lograte"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/netpoll"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/sched"
)

// Defaults for the zero values of Config.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes    = 1 << 20
	DefaultMaxBodyBytes      = 64 << 20
)

// Config configures a Server. The zero value is usable.
//
// The timeouts are net/http's, counted on the worker's clock, with two
// defaults net/http does not have: a head must arrive within
// DefaultReadHeaderTimeout and an idle connection closes after
// DefaultIdleTimeout unless told otherwise. Each request starts at its
// first byte (its connection's accept, for the first request of a
// connection; the end of the previous response, for a request pipelined
// behind it):
//
//	first byte (or accept)   end of head     end of body     end of response
//	|--- ReadHeaderTimeout -->|
//	|--- ReadTimeout ------------------------->|
//	                          |--- WriteTimeout --------------------->|
//	                                                                  |--- IdleTimeout -->| next first byte
//
// A handler moves its own request's read and write deadlines with
// http.ResponseController (SetReadDeadline, SetWriteDeadline).
type Config struct {
	// ReadHeaderTimeout bounds the time from the first byte of a request
	// (or from accepting the connection) to the end of its head. When it
	// passes with part of a head received, the request is answered 408
	// Request Timeout and the connection closed; with nothing received, the
	// connection is closed. Zero means DefaultReadHeaderTimeout; negative
	// means none. The head must also arrive within ReadTimeout, when that
	// is shorter. (net/http uses ReadTimeout when this is zero, and closes
	// a connection whose head timed out without an answer.)
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the time from the first byte of a request (or
	// from accepting the connection) to the end of its body: the whole
	// request, as in net/http. A body read that would wait past it fails
	// with an error that wraps os.ErrDeadlineExceeded and is a net.Error
	// whose Timeout is true, the request's context is cancelled (as
	// net/http does when its connection's read fails), and the connection
	// closes after the response. Bytes the server has already read are
	// still returned. Zero or negative means none.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of a request's head to the
	// end of its response, as in net/http: time spent waiting in the
	// admission queue and in the handler counts. A write that would go on
	// past it fails (with an error like ReadTimeout's), what the client
	// has not taken is dropped, and the connection closes: a client that
	// stops reading its response cannot hold the handler longer than this.
	// A write after the deadline fails at once, so a handler that runs
	// past it sends no response. Zero or negative means none.
	WriteTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a kept-alive
	// connection. Zero means ReadTimeout if that is set, as in net/http,
	// and DefaultIdleTimeout if not (net/http has no limit then); negative
	// means none.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and header fields; a larger
	// head is answered 431. As in net/http, 4 KB of slack are added. Zero
	// means DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// MaxBodyBytes bounds a request body: a larger Content-Length is
	// answered 413 before the handler runs, with a body that names the
	// limit and this field, and reading a larger chunked body fails with
	// *http.MaxBytesError. Zero means DefaultMaxBodyBytes (64 MiB);
	// negative means no limit, as in net/http, which has none. A gRPC
	// call's stream is not limited as a whole, since gRPC limits each
	// message itself.
	MaxBodyBytes int64
	// Listen configures the listening sockets (per-worker SO_REUSEPORT
	// sockets by default, or one shared EPOLLEXCLUSIVE socket). A port
	// that another socket holds fails Listen with EADDRINUSE, as in
	// net.Listen, unless Listen.ReusePort asks to share it (for a restart
	// without downtime; see netpoll.Config.ReusePort for the risk).
	Listen netpoll.Config
	// Logger receives handler panics and accept errors; nil means
	// slog.Default().
	Logger *slog.Logger
	// Admission decides, before each handler and before any of the
	// request's work, whether the request starts now, waits in a timed
	// queue, or is rejected unstarted (503 with Retry-After and
	// Sluice-Not-Started: 1, on a connection that stays open, perhaps
	// unread until its Retry-After: see HoldRefused). The zero
	// value rejects requests that arrived more than 100 ms before their
	// head was read, counted from the kernel's receive stamp of the read
	// that completed the head (5 ms while an overload's line stands: see
	// admit.Config): the protection of
	// CPU-bound handlers, whose waiting requests sit in the sockets where
	// no other signal sees them. Add gate.NewBusy for I/O-bound handlers,
	// and a queue. See package admit.
	Admission admit.Config
	// Lanes sends requests to lanes of the runtime by route, header,
	// admission class or a function of yours; the zero value runs every
	// request in the built-in lanes. See Lanes.
	Lanes Lanes
	// TLS, when set, makes the server speak HTTPS on every connection,
	// with the certificates and settings of this configuration (see
	// crypto/tls; tls.LoadX509KeyPair loads a certificate). The server
	// offers "h2" and "http/1.1" through ALPN, in that order, when it
	// speaks HTTP/2 (see DisableHTTP2), and only "http/1.1" otherwise
	// ("h2" is removed from NextProtos). The handshake runs on the
	// connection's worker, as new work (the Upstream lane), and must end
	// within ReadHeaderTimeout; a plain HTTP request is answered 400, as
	// net/http answers it. Request.TLS (and http.Request.TLS) describe
	// the session.
	TLS *tls.Config
	// DisableHTTP2 turns HTTP/2 off. By default a server whose handler
	// came from HTTPHandler speaks HTTP/2 as well as HTTP/1.1: over TLS
	// when the client's ALPN chooses "h2", and over plain TCP when the
	// client starts with the HTTP/2 preface (h2c with prior knowledge;
	// there is no h2c Upgrade from HTTP/1.1). A native Handler server
	// speaks HTTP/1.1 only: HTTP/2 needs an http.Handler, and the
	// preface is answered 505. (net/http speaks HTTP/2 over TLS by
	// default too, and h2c only when Protocols asks for it.)
	//
	// Each HTTP/2 stream goes through Admission as an HTTP/1.1 request
	// does, and a rejected one is answered on its stream (503 or 429,
	// Retry-After, Sluice-Not-Started: 1) while the connection's other
	// streams go on; a rejected gRPC call (Content-Type application/grpc)
	// gets a gRPC status instead, UNAVAILABLE, RESOURCE_EXHAUSTED or
	// DEADLINE_EXCEEDED, with grpc-retry-pushback-ms from Retry-After
	// (reject.Answer.SetGRPCHeader). Its handler runs as a coroutine on a worker, in its
	// lane (Lanes); the connection itself is served by
	// golang.org/x/net/http2 on goroutines, off the workers. The README's
	// "net/http differences" and docs/design.md ("HTTP/2") say what
	// differs from HTTP/1.1.
	DisableHTTP2 bool
	// MaxHandshakes bounds the TLS handshakes in progress at once, shared
	// out evenly among the workers, counted from the moment a client's
	// hello is complete to the end of its handshake: it bounds the memory
	// of handshakes that wait for their clients. So that clients that stall
	// cannot keep the others out, a client that has sent part of its hello
	// holds no place, one address holds at most a quarter of a worker's
	// places (its hellos beyond them wait unread for one,
	// TLSStats.Waited), and when a worker's share is taken, a new hello
	// takes the place of the oldest handshake, which is closed
	// (TLSStats.Evicted). Zero means DefaultMaxHandshakesPerWorker per
	// worker.
	MaxHandshakes int
	// HoldRefused is how long the refusal of a request refused for its
	// age (503 queue-timeout) on an HTTP/1.1 connection is held back, the
	// connection left unread meanwhile, when its client resent that
	// request the moment it was refused before, the pipeline has found
	// that its clients do so, and more connections are open than the
	// server can serve within its age limit (admit.Pipeline.Hold): such a
	// client, as wrk and retry loops without backoff are, then waits for
	// its answer at no cost instead of being refused again and again, as
	// a client that honours Retry-After would have waited. Only a request
	// refused anyway is held; a client that sends its next request on
	// another connection (a pool) is not slowed. Zero means the refusal's
	// own Retry-After (admit.DefaultRetryAfter unless the admission's
	// answers set another); negative means never, and every such client
	// is refused as often as it resends (docs/design.md, "Clients that
	// resend at once").
	HoldRefused time.Duration
	// LoadHint adds admit.LoadHeader to every response a handler writes:
	// the requests the server holds per worker, for clients that balance
	// on it (package client). Rejections do not carry it.
	LoadHint bool
	// Runtime configures the runtime that the front door (sluice.Listen
	// and the functions beside it) starts for the server: the workers,
	// their pinning, lanes and the blocked-worker rescue; see
	// runtime.Config. Listen and Serve in this package run on the runtime
	// they are given, built with runtime.New, and fail when Runtime is
	// set, rather than ignore it.
	Runtime srt.Config
}

// Server serves HTTP/1.1 on the workers of a runtime.
type Server struct {
	cfg     Config
	s       *sched.Scheduler
	h       Handler
	adapted bool     // h is an HTTPHandler: its requests become *http.Request
	picked  []string // header fields the admission keys by, picked out while parsing
	l       *netpoll.Listener
	log     *slog.Logger
	maxHead int
	stamps  bool // reads carry the kernel's receive stamps (the age limit)
	ws      []*workerState
	adm     *admit.Pipeline
	spares  *sparesPolicy // the server's first admission policy
	lanes   *laneRouter   // nil: every request in the built-in lanes

	// headTimeout is the time a head has to arrive: ReadHeaderTimeout,
	// or ReadTimeout when that is shorter; 0 for none.
	headTimeout time.Duration
	// hs describes the server to handlers (http.ServerContextKey); see
	// describe.
	hs *http.Server

	tls         *tls.Config // nil: plain HTTP
	hsPerWorker int         // each worker's share of Config.MaxHandshakes
	h2          *h2Server   // nil: no HTTP/2 (DisableHTTP2, or a native Handler)
	tlsc        tlsCounters

	// copyBufs holds the buffers of ResponseWriter.ReadFrom's copies
	// (*[copyBufSize]byte), as net/http pools its own.
	copyBufs sync.Pool
	// fileBytes counts the body bytes sent by sendfile(2) (ReadFrom).
	fileBytes atomic.Int64

	panics   *lograte.Limiter // rate-limits the log of handler panics
	open     atomic.Int64     // connections not yet closed
	parked   atomic.Int64     // connections parked after a refusal (park.go)
	holds    atomic.Int64     // holds begun (park.go)
	moves    atomic.Int64     // connections moved to an idle worker (move.go)
	stopping atomic.Bool      // Shutdown or Close began
	// unhookIdle removes workerIdle from the scheduler's idle hooks.
	unhookIdle func()
	closed     chan struct{}
	once       sync.Once
}

// Listen opens addr on every worker of rt, which must be started, and
// serves h there until Shutdown or Close. addr is what net.Listen("tcp",
// addr) takes (":8080", "127.0.0.1:8080", "[::1]:8080", "localhost:8080";
// netpoll.Listen says how each listens). It fails, naming the problem, on a
// bad address, a port it cannot bind or that another socket holds
// (EADDRINUSE, unless cfg.Listen.ReusePort), or an admission configuration
// that cannot work (see admit.New).
func Listen(rt *srt.Runtime, addr string, h Handler, cfg Config) (*Server, error) {
	if err := supported(); err != nil {
		return nil, err
	}
	srv, lopts, err := newServer(rt, h, cfg)
	if err != nil {
		return nil, err
	}
	l, err := netpoll.Listen(srv.s, addr, lopts, srv.accept)
	if err != nil {
		srv.release()
		return nil, fmt.Errorf("server: %w", err)
	}
	srv.l = l
	srv.hs.Addr = l.Addr().String()
	return srv, nil
}

// Serve serves h on l, a listener opened elsewhere (systemd's socket
// activation through net.FileListener, a socket handed over by the process
// this one replaces), on every worker of rt, which must be started. l must
// be a TCP listener; the server listens on a duplicate of its socket, so
// the caller closes l (at once, or when it likes) and Shutdown or Close
// stop the server. Every worker watches the one socket, and the kernel
// gives each new connection to an idle worker (netpoll.Config.Shared).
func Serve(rt *srt.Runtime, l net.Listener, h Handler, cfg Config) (*Server, error) {
	if err := supported(); err != nil {
		return nil, err
	}
	if l == nil {
		return nil, errors.New("server: Serve with a nil net.Listener")
	}
	sc, ok := l.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("server: Serve needs a listener with a socket (a *net.TCPListener), got %T", l)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	fd := -1
	var dupErr error
	if err := raw.Control(func(s uintptr) { fd, dupErr = dupFD(s) }); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if dupErr != nil {
		return nil, fmt.Errorf("server: duplicating the listener's socket: %w", dupErr)
	}
	srv, lopts, err := newServer(rt, h, cfg)
	if err != nil {
		closeFD(fd)
		return nil, err
	}
	nl, err := netpoll.Adopt(srv.s, fd, lopts, srv.accept)
	if err != nil {
		closeFD(fd)
		srv.release()
		return nil, fmt.Errorf("server: %w", err)
	}
	srv.l = nl
	srv.hs.Addr = nl.Addr().String()
	return srv, nil
}

// newServer checks the arguments, applies the defaults and builds the
// admission pipeline on rt; the caller opens the listener.
func newServer(rt *srt.Runtime, h Handler, cfg Config) (*Server, netpoll.Config, error) {
	if rt == nil {
		return nil, netpoll.Config{}, errors.New("server: nil runtime: create one with runtime.New and Start it")
	}
	if h == nil {
		return nil, netpoll.Config{}, errors.New("server: nil Handler")
	}
	if !reflect.ValueOf(cfg.Runtime).IsZero() {
		return nil, netpoll.Config{}, errors.New("server: Config.Runtime configures the runtime that sluice.Listen starts; this server runs on the runtime it was given: set those fields in the runtime.Config given to runtime.New")
	}
	if cfg.ReadHeaderTimeout == 0 {
		cfg.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
		if cfg.ReadTimeout > 0 {
			cfg.IdleTimeout = cfg.ReadTimeout // as net/http
		}
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	s := rt.Scheduler
	srv := &Server{
		cfg: cfg, s: s, h: h, log: cfg.Logger,
		maxHead: cfg.MaxHeaderBytes + 4096,
		closed:  make(chan struct{}),
		panics:  lograte.New(panicBurst),
	}
	if srv.log == nil {
		srv.log = slog.Default()
	}
	srv.headTimeout = max(cfg.ReadHeaderTimeout, 0)
	if rt := cfg.ReadTimeout; rt > 0 && (srv.headTimeout == 0 || rt < srv.headTimeout) {
		srv.headTimeout = rt
	}
	_, isHTTP := h.(httpHandler)
	srv.adapted = isHTTP
	h2 := isHTTP && !cfg.DisableHTTP2
	var err error
	if srv.tls, err = serverTLS(cfg.TLS, h2); err != nil {
		return nil, netpoll.Config{}, err
	}
	if srv.hsPerWorker, err = handshakesPerWorker(cfg, s.NumWorkers()); err != nil {
		return nil, netpoll.Config{}, err
	}
	srv.hs = srv.describe(h)
	srv.h2 = newH2Server(srv, h)
	for i := range s.NumWorkers() {
		srv.ws = append(srv.ws, &workerState{w: s.Worker(i), parked: connList{which: linkParked}, handshakes: connList{which: linkHandshake}})
	}
	acfg := cfg.Admission
	srv.spares = newSparesPolicy(srv)
	acfg.Policies = append([]admit.Policy{srv.spares}, acfg.Policies...)
	adm, err := admit.New(acfg, admit.Host{Executor: s, Shards: s.NumWorkers(), Clock: s.Now})
	if err != nil {
		return nil, netpoll.Config{}, fmt.Errorf("server: %w", err)
	}
	if srv.lanes, err = newLaneRouter(cfg.Lanes, s.Lanes(), adm); err != nil {
		adm.Close()
		return nil, netpoll.Config{}, err
	}
	srv.adm = adm
	srv.unhookIdle = s.OnIdle(srv.workerIdle)
	srv.picked = adm.PickedHeaders()
	srv.stamps = adm.AgeLimited()
	lopts := cfg.Listen
	lopts.Timestamps = lopts.Timestamps || srv.stamps
	if lopts.OnError == nil {
		lopts.OnError = func(err error) { srv.log.Warn("sluice server: accept", "err", err) }
	}
	return srv, lopts, nil
}

// Addr returns the address the server listens on.
func (srv *Server) Addr() net.Addr { return srv.l.Addr() }

// OpenConns returns the number of connections not yet closed, HTTP/2
// connections included (hijacked ones are not counted).
func (srv *Server) OpenConns() int { return int(srv.open.Load()) }

// ParkedConns returns the number of connections left unread after a
// refusal for overload, until their hold ends (Config.HoldRefused).
func (srv *Server) ParkedConns() int { return int(srv.parked.Load()) }

// Holds returns the number of times a connection has been left unread
// after a refusal (Config.HoldRefused) since the server started: each is a
// client that resent a refused request at once, beyond those the server
// serves within its age limit, made to wait its Retry-After.
func (srv *Server) Holds() int64 { return srv.holds.Load() }

// Moves returns the number of times a connection has moved to another
// worker since the server started. A connection belongs to the worker that
// accepted it; when its next request has waited 1 ms behind that worker's
// work while another worker is idle, it moves there between two requests,
// and the request starts at once. Clients that load some of their
// connections more than others (a pool that reuses the connection it got
// back last) make it count.
func (srv *Server) Moves() int64 { return srv.moves.Load() }

// Shutdown stops the server gracefully. It stops accepting at once, on
// every listening socket, whatever the workers are doing: the connections
// the kernel had already queued are accepted and served, new ones are
// refused. It closes idle connections, and lets every request already
// received finish: requests in progress, requests whose head has begun to
// arrive, requests that arrived and were not read yet, and the first
// request of a connection accepted in the last moments (it gets
// NewConnGrace to send it). Their answers carry Connection: close. An
// HTTP/2 connection gets a GOAWAY and closes once its streams in progress
// have ended. Shutdown returns when every connection is closed, or with
// ctx's error when ctx ends first; the connections left are then still
// served until they finish or Close is called.
func (srv *Server) Shutdown(ctx context.Context) error {
	return srv.stop(ctx, false)
}

// Close stops the server at once: it stops accepting as Shutdown does and
// closes every connection. Handlers still running see their request
// context cancelled and their reads and writes fail; Close waits for them
// to return, or for ctx to end.
func (srv *Server) Close(ctx context.Context) error {
	return srv.stop(ctx, true)
}

// NewConnGrace is how long a connection accepted just before Shutdown has
// to send its first request (net/http gives its new connections as long).
const NewConnGrace = 5 * time.Second

// stop is the one shutdown sequence of Shutdown (force false) and Close:
// stop accepting, shut the connections down, wait for them, close the
// listening sockets.
func (srv *Server) stop(ctx context.Context, force bool) error {
	// Accepted connections reach their workers before stopping is set, so
	// that the last one to close sees every one of them counted.
	err := srv.l.Stop(ctx)
	srv.stopping.Store(true)
	if force {
		srv.adm.Close()
	}
	for i := range srv.ws {
		w := srv.s.Worker(i)
		ws := srv.ws[i]
		serr := w.Submit(lanes.Continuation, func() {
			for c := ws.conns.head; c != nil; {
				next := c.links[linkAll].next
				c.shutdown(force)
				c = next
			}
		})
		if serr != nil && !errors.Is(serr, sched.ErrStopped) {
			err = errors.Join(err, serr)
		}
	}
	if srv.h2 != nil {
		srv.h2.shutdown(force)
	}
	if srv.open.Load() == 0 {
		srv.finished()
	}
	closed := srv.closed // nil once it has fired: a connection handed over late may still count
	for i := 1; srv.open.Load() > 0; i++ {
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-closed:
			closed = nil
		case <-time.After(5 * time.Millisecond):
		}
		if srv.h2 != nil && i%10 == 0 {
			// HTTP/2 connections that began meanwhile (a connection
			// being served when Shutdown came, a TLS handshake ending).
			srv.h2.shutdown(force)
		}
	}
	if srv.h2 != nil {
		srv.h2.wg.Wait()
	}
	return errors.Join(err, srv.l.Close())
}

// finished runs once, when a stopping server has no connection left.
func (srv *Server) finished() {
	srv.once.Do(func() {
		close(srv.closed)
		srv.release()
	})
}

// release lets go of what the server holds on its runtime: the admission
// pipeline and the idle hook.
func (srv *Server) release() {
	srv.adm.Close()
	srv.unhookIdle()
}

// connClosed is called by each connection as it closes.
func (srv *Server) connClosed() {
	if srv.open.Add(-1) == 0 && srv.stopping.Load() {
		srv.finished()
	}
}

// workerState is the server's state on one worker, touched only there:
// buffer pools, the list of connections, the cached Date header.
type workerState struct {
	w       *sched.Worker
	bufs    freeList[[]byte]      // free read buffers of readBufSize
	outs    freeList[[]byte]      // free output buffers of outBufSize
	heads   freeList[http.Header] // free response header maps, empty
	trimmer *sched.Timer          // trims the free lists (pool.go)
	conns   connList
	parked  connList // connections parked after a refusal, the latest first (park.go)
	// handshakes are the TLS handshakes in progress, the latest first, and
	// nHandshakes their number (tls.go).
	handshakes  connList
	nHandshakes int
	hsPeers     map[netip.Addr]*peerPlaces // places held and waited for, by client address
	sink        []byte                     // input dropped by lingering connections (discard)

	dateSec int64
	date    []byte
	fields  []field // scratch for sorting a response's header fields
	routes  routeBook
}

const (
	readBufSize = 4 << 10
	outBufSize  = 4 << 10
	// maxPooledFields bounds the size of the header maps kept for reuse.
	maxPooledFields = 16
)

func (ws *workerState) getBuf() []byte {
	if b, ok := ws.bufs.get(); ok {
		return b
	}
	return make([]byte, readBufSize)
}

func (ws *workerState) putBuf(b []byte) {
	if cap(b) == readBufSize && ws.bufs.put(b[:readBufSize]) {
		ws.armTrim()
	}
}

func (ws *workerState) getOut() []byte {
	if b, ok := ws.outs.get(); ok {
		return b[:0]
	}
	return make([]byte, 0, outBufSize)
}

func (ws *workerState) putOut(b []byte) {
	if cap(b) == outBufSize && ws.outs.put(b[:0]) {
		ws.armTrim()
	}
}

// getHeader returns an empty response header map.
func (ws *workerState) getHeader() http.Header {
	if h, ok := ws.heads.get(); ok {
		return h
	}
	return make(http.Header)
}

// putHeader empties h, which no one else holds, for a later getHeader.
func (ws *workerState) putHeader(h http.Header) {
	if len(h) <= maxPooledFields {
		clear(h)
		if ws.heads.put(h) {
			ws.armTrim()
		}
	}
}

// field is a header field's name and values.
type field struct {
	key    string
	values []string
}

// dateHeader returns the Date header value for now, formatted once a second.
func (ws *workerState) dateHeader() []byte {
	now := time.Now()
	if sec := now.Unix(); sec != ws.dateSec || ws.date == nil {
		ws.dateSec = sec
		ws.date = appendDate(ws.date[:0], now)
	}
	return ws.date
}

// appendDate appends t as a Date header value (RFC 9110 section 5.6.7).
func appendDate(b []byte, t time.Time) []byte {
	return t.UTC().AppendFormat(b, "Mon, 02 Jan 2006 15:04:05 GMT")
}

// Which of a connection's links a connList uses: every connection of a
// worker is in its conns list, and a parked one in its parked list too.
const (
	linkAll       = iota // workerState.conns
	linkParked           // workerState.parked (park.go)
	linkHandshake        // workerState.handshakes (tls.go)
	numLinks
)

// connLinks are a connection's place in one list.
type connLinks struct{ prev, next *conn }

// connList is an intrusive list of a worker's connections, the latest
// added first (head) and the oldest last (tail), through their
// links[which].
type connList struct {
	head, tail *conn
	which      uint8
}

func (l *connList) add(c *conn) {
	k := &c.links[l.which]
	k.prev, k.next = nil, l.head
	if l.head != nil {
		l.head.links[l.which].prev = c
	} else {
		l.tail = c
	}
	l.head = c
}

func (l *connList) remove(c *conn) {
	k := &c.links[l.which]
	if k.prev != nil {
		k.prev.links[l.which].next = k.next
	} else if l.head == c {
		l.head = k.next
	}
	if k.next != nil {
		k.next.links[l.which].prev = k.prev
	} else if l.tail == c {
		l.tail = k.prev
	}
	k.prev, k.next = nil, nil
}
