// Package server is an HTTP/1.1 server that runs on the sluice executor:
// connections are accepted, read, parsed and answered by the worker that owns
// them, in the lanes of the design (a new request is Upstream work; the rest
// of a request already started, its handler's resumptions and its response
// are Continuation work), and handlers run as coroutines on that worker, so
// that Await releases the worker while a handler waits.
//
// Handlers come in two forms: the native Handler, which gets the server's
// own Request, and any net/http Handler through HTTPHandler, which gets an
// ordinary *http.Request whose context ends when the client goes away, and a
// ResponseWriter that is also an http.Flusher. Routers and middleware written
// for net/http run unchanged.
//
// A handler that blocks without Await (time.Sleep, a raw socket, a blocking
// driver) holds its worker for the duration: that is the "isolated" model,
// which works but caps throughput at workers / blocking time. The await
// package has an http.RoundTripper, a database/sql connector and a Sleep that
// release the worker instead.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/netpoll"
	"github.com/sluice-go/sluice/queue"
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
type Config struct {
	// ReadHeaderTimeout bounds the time from the first byte of a request
	// (or from accepting the connection) to the end of its head; the
	// connection is closed when it passes. Zero means
	// DefaultReadHeaderTimeout; negative means none.
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a kept-alive
	// connection. Zero means DefaultIdleTimeout; negative means none.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and header fields; a larger
	// head is answered 431. As in net/http, 4 KB of slack are added. Zero
	// means DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// MaxBodyBytes bounds a request body: a larger Content-Length is
	// answered 413 before the handler runs, and reading a larger chunked
	// body fails with *http.MaxBytesError. Zero means DefaultMaxBodyBytes;
	// negative means no limit.
	MaxBodyBytes int64
	// Listen configures the listening sockets (per-worker SO_REUSEPORT
	// sockets by default, or one shared EPOLLEXCLUSIVE socket).
	Listen netpoll.Options
	// Logger receives handler panics and accept errors; nil means
	// slog.Default().
	Logger *slog.Logger
	// Gate, if set, decides before each handler whether the request may
	// start; a refused request is answered with Reject at once, before any
	// of its work (see package gate). Nil admits everything.
	Gate Gate
	// Reject configures the answer to a refused request.
	Reject Rejection
	// Queue, with a Gate, makes refused requests wait instead of being
	// rejected at once: each waits up to the queue's timeout (100 ms by
	// default), in its order and class, and starts as soon as the gate
	// opens (a request ends, a worker goes idle: no polling); when its
	// time is up it is rejected, with the reason "queue-timeout" (or
	// "queue-full", "queue-evicted", "queue-closed"). The server creates
	// the queue from these options, on its scheduler's clock; Server.Queue
	// returns it. While a request waits, nothing more of its connection is
	// read.
	Queue *queue.Options
	// Classify gives a request its priority class in the queue; nil
	// means queue.Default for all (queue.ClassFromHeader reads a header).
	Classify func(r *Request) queue.Class
	// MaxAge bounds how long a request may have waited, from the moment
	// the kernel received its first bytes to the moment its head is
	// parsed: an older request is rejected without starting, with the
	// reason "queue-timeout", whatever the gate says. A server that cannot
	// keep up leaves requests in its sockets' receive buffers, where no
	// gate sees them; this is the queue timeout applied to that part of
	// the wait. With a queue, a request's time in the queue counts from
	// its arrival too, so no request waits more than the timeout in all.
	// The age comes from the kernel's receive timestamps
	// (netpoll.Options.Timestamps, turned on when MaxAge applies); it is
	// known for the request whose bytes arrive on an empty buffer, and a
	// request pipelined behind another in one packet shares its stamp.
	// With a queue in CoDel order, the limit follows CoDel as the queue
	// does: once every request parsed on a worker for a whole Interval
	// has been older than Target (a standing queue in the sockets), the
	// limit there drops to Target until every request parsed there for a
	// tenth of the Interval has been younger; old requests are then
	// rejected at once and the fresh ones served.
	// Zero means the queue's timeout when Queue and Gate are set, and no
	// limit otherwise; negative means no limit.
	MaxAge time.Duration
}

// Server serves HTTP/1.1 on the workers of a scheduler.
type Server struct {
	cfg     Config
	s       *sched.Scheduler
	h       Handler
	l       *netpoll.Listener
	log     *slog.Logger
	maxHead int
	pumpAll bool  // the gate reserves slots: a pump may start several
	maxAge  int64 // Config.MaxAge in effect, in nanoseconds; 0: none (reads need no stamps)
	// With a CoDel queue, the age limit drops to ageTarget once requests
	// have all been older than it for ageInterval, until they have all
	// been younger for ageExit (0: no CoDel).
	ageTarget, ageInterval, ageExit int64
	ws                              []*workerState

	adm      admission
	q        *queue.Queue
	expirer  chan struct{} // wakes the queue's expiry goroutine
	done     chan struct{} // closed when the server stops: ends it
	expired  sync.WaitGroup
	open     atomic.Int64 // connections not yet closed
	stopping atomic.Bool  // Shutdown or Close began
	closed   chan struct{}
	once     sync.Once
}

// Listen starts serving h on addr ("127.0.0.1:8080", "[::]:80") on every
// worker of s, which must be started. The server runs until Shutdown or
// Close.
func Listen(s *sched.Scheduler, addr string, h Handler, cfg Config) (*Server, error) {
	if h == nil {
		return nil, errors.New("server: Listen with a nil Handler")
	}
	if cfg.ReadHeaderTimeout == 0 {
		cfg.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	srv := &Server{
		cfg: cfg, s: s, h: h, log: cfg.Logger,
		maxHead: cfg.MaxHeaderBytes + 4096,
		closed:  make(chan struct{}),
	}
	if srv.log == nil {
		srv.log = slog.Default()
	}
	for range s.NumWorkers() {
		srv.ws = append(srv.ws, &workerState{})
	}
	srv.adm.init(&cfg.Reject)
	if cfg.Queue != nil && cfg.Gate != nil {
		srv.pumpAll = gate.Reserves(cfg.Gate)
		srv.startQueue(*cfg.Queue)
	}
	switch {
	case cfg.MaxAge > 0:
		srv.maxAge = int64(cfg.MaxAge)
	case cfg.MaxAge == 0 && srv.q != nil:
		srv.maxAge = int64(cmp.Or(max(cfg.Queue.Timeout, 0), queue.DefaultTimeout))
	}
	if srv.maxAge > 0 && srv.q != nil && cfg.Queue.Order == queue.CoDel {
		srv.ageTarget = min(int64(cmp.Or(max(cfg.Queue.Target, 0), queue.DefaultTarget)), srv.maxAge)
		srv.ageInterval = int64(cmp.Or(max(cfg.Queue.Interval, 0), queue.DefaultInterval))
		srv.ageExit = srv.ageInterval / ageExitDivisor
	}
	lopts := cfg.Listen
	lopts.Timestamps = lopts.Timestamps || srv.maxAge > 0
	if lopts.OnError == nil {
		lopts.OnError = func(err error) { srv.log.Warn("sluice server: accept", "err", err) }
	}
	l, err := netpoll.Listen(s, addr, lopts, srv.accept)
	if err != nil {
		srv.stopQueue()
		return nil, fmt.Errorf("server: %w", err)
	}
	srv.l = l
	return srv, nil
}

// Addr returns the address the server listens on.
func (srv *Server) Addr() net.Addr { return srv.l.Addr() }

// OpenConns returns the number of connections not yet closed.
func (srv *Server) OpenConns() int { return int(srv.open.Load()) }

// Shutdown stops the server gracefully: it stops accepting, closes idle
// connections, lets requests in progress (and requests whose head has begun
// to arrive) finish, answering them with Connection: close, and returns
// when every connection is closed, or with ctx's error when ctx ends first;
// the connections left are then still served until they finish or Close is
// called.
func (srv *Server) Shutdown(ctx context.Context) error {
	return srv.wait(ctx, srv.stop(false))
}

// Close stops the server at once: it stops accepting and closes every
// connection. Handlers still running see their request context cancelled
// and their reads and writes fail; Close waits for them to return, or for
// ctx to end.
func (srv *Server) Close(ctx context.Context) error {
	return srv.wait(ctx, srv.stop(true))
}

// wait returns err once every connection is closed, or joined with ctx's
// error when ctx ends first.
func (srv *Server) wait(ctx context.Context, err error) error {
	for srv.open.Load() > 0 {
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-srv.closed:
		case <-time.After(5 * time.Millisecond):
		}
	}
	return err
}

func (srv *Server) stop(force bool) error {
	srv.stopping.Store(true)
	err := srv.l.Close()
	if force {
		srv.stopQueue()
	}
	for i := range srv.ws {
		w := srv.s.Worker(i)
		ws := srv.ws[i]
		serr := w.Submit(lanes.Continuation, func() {
			for c := ws.conns.head; c != nil; {
				next := c.next
				c.shutdown(force)
				c = next
			}
		})
		if serr != nil && !errors.Is(serr, sched.ErrStopped) {
			err = errors.Join(err, serr)
		}
	}
	if srv.open.Load() == 0 {
		srv.finished()
	}
	return err
}

// finished runs once, when a stopping server has no connection left.
func (srv *Server) finished() {
	srv.once.Do(func() {
		close(srv.closed)
		srv.stopQueue()
	})
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
	bufs  [][]byte // free read buffers of readBufSize
	outs  [][]byte // free output buffers of outBufSize
	conns connList

	dateSec int64
	date    []byte
	keys    []string // scratch for sorting header keys

	// Admission counts, written by this worker only (see bump), read by
	// Server.Stats.
	admitted atomic.Int64
	inFlight atomic.Int64

	// age is the worker's state of the CoDel age limit (Server.ageLimit).
	age ageState
}

// ageState is one worker's state of the CoDel age limit, in worker clock
// nanoseconds (see Server.ageLimit).
type ageState struct {
	// above is since when every request parsed here has been older than
	// the CoDel target (0: the last one was not).
	above int64
	// standing is set while the sockets hold a standing queue: the limit
	// is the target.
	standing bool
	// young is, while standing, since when every request parsed here has
	// been younger than the target (0: the last one was not).
	young int64
}

// bump adds d to a counter only one goroutine writes: a load and a store,
// no read-modify-write, which readers elsewhere still see whole.
func bump(c *atomic.Int64, d int64) { c.Store(c.Load() + d) }

const (
	readBufSize = 4 << 10
	outBufSize  = 4 << 10
	maxFreeBufs = 1024 // per worker and kind: bounds what the pools keep
)

func (ws *workerState) getBuf() []byte {
	if n := len(ws.bufs); n > 0 {
		b := ws.bufs[n-1]
		ws.bufs = ws.bufs[:n-1]
		return b
	}
	return make([]byte, readBufSize)
}

func (ws *workerState) putBuf(b []byte) {
	if cap(b) == readBufSize && len(ws.bufs) < maxFreeBufs {
		ws.bufs = append(ws.bufs, b[:readBufSize])
	}
}

func (ws *workerState) getOut() []byte {
	if n := len(ws.outs); n > 0 {
		b := ws.outs[n-1]
		ws.outs = ws.outs[:n-1]
		return b[:0]
	}
	return make([]byte, 0, outBufSize)
}

func (ws *workerState) putOut(b []byte) {
	if cap(b) == outBufSize && len(ws.outs) < maxFreeBufs {
		ws.outs = append(ws.outs, b[:0])
	}
}

// dateHeader returns the Date header value for now, formatted once a second.
func (ws *workerState) dateHeader() []byte {
	now := time.Now()
	if sec := now.Unix(); sec != ws.dateSec || ws.date == nil {
		ws.dateSec = sec
		ws.date = now.UTC().AppendFormat(ws.date[:0], "Mon, 02 Jan 2006 15:04:05 GMT")
	}
	return ws.date
}

// connList is an intrusive list of a worker's connections.
type connList struct {
	head *conn
}

func (l *connList) add(c *conn) {
	c.prev, c.next = nil, l.head
	if l.head != nil {
		l.head.prev = c
	}
	l.head = c
}

func (l *connList) remove(c *conn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else if l.head == c {
		l.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	}
	c.prev, c.next = nil, nil
}

// Queue returns the admission queue, or nil when Config.Queue is not set;
// for its Stats.
func (srv *Server) Queue() *queue.Queue { return srv.q }

// startQueue creates the admission queue and the goroutine that expires its
// entries: the queue reports its earliest deadline through Arm, and the
// goroutine sleeps until then (no polling).
func (srv *Server) startQueue(opts queue.Options) {
	srv.expirer = make(chan struct{}, 1)
	srv.done = make(chan struct{})
	var next atomic.Int64
	opts.Clock = srv.s.Now
	opts.Admit = srv.cfg.Gate.Acquire
	opts.Arm = func(deadline int64) {
		next.Store(deadline)
		select {
		case srv.expirer <- struct{}{}:
		default:
		}
	}
	srv.q = queue.New(opts)
	if w, ok := srv.cfg.Gate.(gate.Waker); ok {
		w.OnOpen(func() { srv.pump(true) })
	}
	srv.expired.Add(1)
	go func() {
		defer srv.expired.Done()
		t := time.NewTimer(time.Hour)
		defer t.Stop()
		for {
			select {
			case <-srv.done:
				return
			case <-srv.expirer:
			case <-t.C:
				srv.q.Expire()
			}
			// Each deadline is taken once: the queue reports the next
			// one through Arm when entries remain.
			if d := next.Swap(0); d > 0 {
				t.Reset(max(time.Duration(d-srv.s.Now()), 0))
			}
		}
	}()
}

// stopQueue rejects what still waits and ends the expiry goroutine.
func (srv *Server) stopQueue() {
	if srv.q == nil {
		return
	}
	srv.q.Close()
	select {
	case <-srv.done:
	default:
		close(srv.done)
	}
	srv.expired.Wait()
}

// pump starts waiting requests while the gate admits them: all it admits
// for a gate that reserves slots, one for a gate that reads a measurement
// (gate.Reserves). idle is set when called from a worker's idle hook, where
// the worker that calls is not busy: the gate then counts the worker the
// request will run on.
func (srv *Server) pump(idle bool) {
	q := srv.q
	if q == nil || q.Len() == 0 {
		return
	}
	g := srv.cfg.Gate
	admit := g.Acquire
	if ia, ok := g.(gate.IdleAcquirer); ok && idle {
		admit = ia.AcquireIdle
	}
	if srv.pumpAll {
		q.Pump(admit)
	} else {
		// A reading (busy workers) does not change until the started
		// request runs: one start per opening.
		q.PumpOne(admit)
	}
}
