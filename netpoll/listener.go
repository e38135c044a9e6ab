// Package netpoll puts sockets on the sluice executor: listening sockets
// whose accepts run as Upstream work on every worker, and non-blocking
// connections owned by one worker, whose readiness is reported by that
// worker's epoll instance (the one it parks in) and whose writes that would
// block wait for EPOLLOUT and resume as Continuation work.
//
// All callbacks run on the connection's worker. This package is the
// transport under the HTTP server; it knows nothing of HTTP.
//
// # Off Linux
//
// The package builds everywhere, but its listeners need the Linux executor:
// elsewhere Listen and Adopt fail with an error that wraps
// errors.ErrUnsupported.
package netpoll

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/sched"
)

// AcceptFunc is called on a worker for each accepted connection; the
// connection belongs to that worker from then on.
type AcceptFunc func(c *Conn)

// Config configures a Listener. The zero value is usable.
type Config struct {
	// Backlog is the listen(2) backlog; zero means 1024.
	Backlog int
	// AcceptBatch is how many connections one accept task takes before it
	// yields to other work; zero means 64.
	AcceptBatch int
	// Shared makes one listening socket that every worker watches with
	// EPOLLEXCLUSIVE, instead of one SO_REUSEPORT socket per worker. The
	// kernel then wakes one idle worker per new connection, so a busy
	// worker's share of connections goes to the others; with SO_REUSEPORT
	// the kernel hashes connections to sockets whatever their worker is
	// doing. SO_REUSEPORT spreads long-lived connections evenly and is the
	// default.
	Shared bool
	// ReusePort lets Listen share its port with sockets of other
	// Listeners or processes that set SO_REUSEPORT too, for a restart
	// without downtime: the new process listens on the port while the old
	// one still does, the kernel spreads new connections over both, and
	// the old one stops accepting (Listener.Stop) once the new one
	// serves. Without it, as with net.Listen, Listen fails with an error
	// that wraps syscall.EADDRINUSE when any other socket holds the port.
	//
	// The risk: while a Listener with ReusePort is open, any process of
	// the same user that sets SO_REUSEPORT on a socket can bind the port
	// as well and take a share of the new connections, silently. (A
	// Listener without ReusePort and without Shared can be joined that way
	// too once it is listening, since its per-worker sockets carry
	// SO_REUSEPORT; but it never joins a port someone else holds. A Shared
	// Listener without ReusePort cannot be joined at all.)
	ReusePort bool
	// OnError is told of accept failures other than "try again"; nil
	// ignores them. It runs on a worker. When the process or the system is
	// out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM),
	// retrying at once cannot succeed: the socket pauses, 5 ms and then
	// twice as long at each failure in a row, up to 1 s, while the
	// connections already open are served, and OnError is told once per
	// pause.
	OnError func(error)
	// Timestamps turns on the kernel's receive timestamps
	// (SO_TIMESTAMPNS) on the listening sockets, which accepted
	// connections inherit, so that Conn.ReadStamped can tell when the
	// bytes it reads arrived. It costs the kernel a clock read per
	// received packet.
	Timestamps bool
}

// Listener is a TCP address served by every worker of a scheduler through
// its own SO_REUSEPORT socket, so the kernel spreads new connections over
// the workers and no worker steals another's (or through one shared
// socket, Config.Shared).
type Listener struct {
	opts   Config
	addr   netip.AddrPort
	accept AcceptFunc

	events   uint32         // the sockets' epoll events
	stopped  atomic.Bool    // Stop began: accept nothing more of the kernel
	handoffs sync.WaitGroup // connections Stop accepted, not yet handed to their worker

	mu       sync.Mutex
	socks    []*listenSock
	sharedFD int // the one socket of a Shared listener, or -1
	closed   bool
}

// listenSock is one worker's watch of a listening socket. Its fields other
// than fd and w are the worker's.
type listenSock struct {
	fd    int
	w     *sched.Worker
	watch *sched.Watch
	// backoff is the pause after accept ran out of a resource (EMFILE and
	// the like), doubled at each failure in a row; 0 after a success.
	backoff time.Duration
}

// Accept back-off after an error that retrying at once cannot cure (the
// process or the system is out of descriptors or memory): the socket is
// unwatched for minBackoff, doubling up to maxBackoff while it lasts, so
// that the worker neither spins nor floods the log, and the connections
// already open are served meanwhile.
const (
	minBackoff = 5 * time.Millisecond
	maxBackoff = time.Second
)

// Listen listens on addr once per worker of s, which must be started, and
// calls accept for every connection. addr is what net.Listen("tcp", addr)
// takes: ":8080" or ":0" listens on every address, IPv6 and IPv4 together
// (IPv4 alone where the machine has no IPv6); "[::]:8080" on every address
// too; "0.0.0.0:8080" on every IPv4 address only (unlike net.Listen, which
// has "tcp4" for that); "127.0.0.1:0", "[::1]:8080" on one address;
// "localhost:8080" on the host name's first IPv4 address (its first
// address when it has no IPv4 one), resolved by net.DefaultResolver. The
// port may be a service name (":http"); port 0 lets the kernel choose one,
// the same for every worker, which Addr reports.
//
// As with net.Listen, Listen fails when another socket already holds the
// port, with an error that wraps syscall.EADDRINUSE and names the address
// ("netpoll: listen tcp 127.0.0.1:8080: bind: address already in use"),
// unless opts.ReusePort asks to share it. A bad address fails with an
// error that says what Listen takes.
func Listen(s *sched.Scheduler, addr string, opts Config, accept AcceptFunc) (*Listener, error) {
	if err := supported(); err != nil {
		return nil, err
	}
	if accept == nil {
		return nil, errors.New("netpoll: Listen with a nil AcceptFunc")
	}
	la, err := resolveListenAddr(context.Background(), net.DefaultResolver, addr)
	if err != nil {
		return nil, err
	}
	if opts.Backlog <= 0 {
		opts.Backlog = 1024
	}
	if opts.AcceptBatch <= 0 {
		opts.AcceptBatch = 64
	}
	l := &Listener{opts: opts, addr: la.ap, accept: accept, sharedFD: -1}
	so := sockOpts{backlog: opts.Backlog, stamps: opts.Timestamps}
	if opts.Shared {
		so.reusePort = opts.ReusePort // one socket: it needs SO_REUSEPORT only to share the port
		fd, port, err := listenFD(la, la.ap.Port(), so)
		if err != nil {
			return nil, err
		}
		l.sharedFD = fd
		l.addr = netip.AddrPortFrom(la.ap.Addr(), port)
		if err := l.watchAll(s, fd, epollIn|epollExclusive); err != nil {
			closeFD(fd)
			return nil, err
		}
		return l, nil
	}
	port := la.ap.Port()
	for i := 0; i < s.NumWorkers(); i++ {
		so.reusePort, so.joinable = true, false
		if i == 0 && !opts.ReusePort {
			// The first socket binds and listens without SO_REUSEPORT,
			// so the kernel refuses the port if any other socket holds
			// it, as it would net.Listen's; only then does it take
			// SO_REUSEPORT, and the other workers' sockets join it.
			so.reusePort, so.joinable = false, true
		}
		fd, bound, err := listenFD(la, port, so)
		if err != nil {
			l.Close()
			return nil, err
		}
		port = bound // a port chosen by the kernel is the others' too
		l.addr = netip.AddrPortFrom(la.ap.Addr(), port)
		ls := &listenSock{fd: fd, w: s.Worker(i)}
		l.mu.Lock()
		l.socks = append(l.socks, ls)
		l.mu.Unlock()
		if err := l.watch(ls, epollIn); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// Adopt serves a listening TCP socket opened elsewhere (inherited from
// systemd's socket activation, handed over by a process being replaced, or
// taken from a net.Listener) on every worker of s, which must be started:
// like a Shared listener, every worker watches it with EPOLLEXCLUSIVE. Adopt
// takes fd over: it makes it non-blocking, turns on SO_TIMESTAMPNS when
// opts.Timestamps is set (connections already in its backlog may have
// arrived unstamped), and Close closes it. It fails, without closing fd,
// when fd is not a listening TCP socket. opts.Shared and opts.Backlog do not
// apply.
func Adopt(s *sched.Scheduler, fd int, opts Config, accept AcceptFunc) (*Listener, error) {
	if err := supported(); err != nil {
		return nil, err
	}
	if accept == nil {
		return nil, errors.New("netpoll: Adopt with a nil AcceptFunc")
	}
	if err := checkListening(fd); err != nil {
		return nil, err
	}
	addr, err := adoptFD(fd, opts.Timestamps)
	if err != nil {
		return nil, err
	}
	if opts.AcceptBatch <= 0 {
		opts.AcceptBatch = 64
	}
	l := &Listener{opts: opts, addr: addr, accept: accept, sharedFD: fd}
	if err := l.watchAll(s, fd, epollIn|epollExclusive); err != nil {
		return nil, err
	}
	return l, nil
}

// watchAll watches the one socket fd on every worker of s; on failure it
// unwatches what it had watched, and fd stays open.
func (l *Listener) watchAll(s *sched.Scheduler, fd int, events uint32) error {
	for i := 0; i < s.NumWorkers(); i++ {
		ls := &listenSock{fd: fd, w: s.Worker(i)}
		l.socks = append(l.socks, ls)
		if err := l.watch(ls, events); err != nil {
			_ = l.unwatch(l.socks[:len(l.socks)-1]) // fd stays the caller's
			return err
		}
	}
	return nil
}

// watch registers ls's socket on its worker: readiness queues an accept
// batch as the Upstream lane's next task (sched.Worker.PushFirst). Accepting
// is cheap, and a connection's first read is queued behind the lane when it
// is accepted: accepted at once, its request waits in the lane in the order
// it arrived among the others (kept-alive and pipelined requests, queued as
// their bytes arrive). An accept queued behind the lane made that wait
// twice, while its bytes' age counted.
func (l *Listener) watch(ls *listenSock, events uint32) error {
	l.events = events
	return onWorker(ls.w, func() error { return l.watchLocal(ls) })
}

// watchLocal is watch on the worker.
func (l *Listener) watchLocal(ls *listenSock) error {
	wt, err := ls.w.Watch(ls.fd, l.events, func(uint32) {
		ls.w.PushFirst(lanes.Upstream, func() { l.acceptBatch(ls) })
	})
	ls.watch = wt
	return err
}

// Addr returns the bound address.
func (l *Listener) Addr() net.Addr { return net.TCPAddrFromAddrPort(l.addr) }

// acceptBatch runs on the socket's worker as Upstream work, ahead of the
// lane's queue (watchLocal).
func (l *Listener) acceptBatch(ls *listenSock) {
	if ls.watch == nil {
		return // queued before a pause or Stop unwatched the socket
	}
	for i := 0; i < l.opts.AcceptBatch; i++ {
		nfd, sa, err := accept(ls.fd)
		if err != nil {
			switch {
			case err == syscall.EAGAIN || err == syscall.EINTR || err == syscall.ECONNABORTED:
			case err == syscall.EINVAL && l.stopped.Load():
				// Stop shut the socket down: it reports a hang-up at
				// every poll until it is unwatched.
				l.unwatchLocal(ls)
			case err == syscall.EMFILE || err == syscall.ENFILE || err == syscall.ENOBUFS || err == syscall.ENOMEM:
				l.pause(ls, err)
			default:
				if l.opts.OnError != nil {
					l.opts.OnError(fmt.Errorf("netpoll: accept: %w", err))
				}
			}
			return
		}
		ls.backoff = 0
		l.accept(newConn(ls.w, nfd, sa))
	}
	// More may be waiting: the level-triggered watch fires again.
}

// pause unwatches the socket for its next back-off, reports err once for
// it, and watches it again afterwards (on the worker, Upstream work).
func (l *Listener) pause(ls *listenSock, err error) {
	ls.backoff = min(max(2*ls.backoff, minBackoff), maxBackoff)
	if l.opts.OnError != nil {
		l.opts.OnError(fmt.Errorf("netpoll: accept: %w (accepting again in %v)", err, ls.backoff))
	}
	l.unwatchLocal(ls)
	ls.w.AfterFunc(ls.backoff, lanes.Upstream, func() {
		if l.stopped.Load() || ls.watch != nil {
			return
		}
		if err := l.watchLocal(ls); err != nil && l.opts.OnError != nil {
			l.opts.OnError(fmt.Errorf("netpoll: accept: watching the socket again: %w", err))
		}
	})
}

// unwatchLocal removes the socket from its worker's epoll; on the worker.
func (l *Listener) unwatchLocal(ls *listenSock) {
	if ls.watch != nil {
		_ = ls.watch.Close()
		ls.watch = nil
	}
}

// Stop stops accepting at once, on every socket, whatever the workers are
// doing: the connections already in the sockets' accept queues are
// accepted and handed to their workers (Upstream work, as every accepted
// connection), then the sockets are shut down, so that the kernel refuses
// new connections rather than queueing them for a worker that is busy and
// resetting them when the socket closes. Stop returns once the connections
// it accepted have reached their workers' AcceptFunc, or with ctx's error.
// The workers unwatch the sockets at their next poll; Close closes them.
// Stop may be called from any goroutine, more than once.
func (l *Listener) Stop(ctx context.Context) error {
	if l.stopped.CompareAndSwap(false, true) {
		l.mu.Lock()
		socks := l.socks
		l.mu.Unlock()
		var errs []error
		next := 0 // the worker of the next connection of a shared socket
		for i, ls := range socks {
			if l.sharedFD >= 0 && i > 0 {
				break // one socket for all: drained once
			}
			for {
				nfd, sa, err := accept(ls.fd)
				if err == syscall.EINTR || err == syscall.ECONNABORTED {
					continue
				}
				if err != nil {
					break // EAGAIN: drained; anything else: nothing more to take
				}
				owner := ls
				if l.sharedFD >= 0 {
					owner = socks[next%len(socks)]
					next++
				}
				l.handOff(owner.w, nfd, sa)
			}
			if err := shutdownRead(ls.fd); err != nil && err != syscall.ENOTCONN {
				errs = append(errs, fmt.Errorf("netpoll: shutting the listening socket down: %w", err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	done := make(chan struct{})
	go func() { l.handoffs.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// handOff gives an accepted connection to worker w, which makes it its own
// and calls the AcceptFunc; if w has stopped, the connection is closed.
func (l *Listener) handOff(w *sched.Worker, nfd int, sa sockaddr) {
	l.handoffs.Add(1)
	err := w.Submit(lanes.Upstream, func() {
		defer l.handoffs.Done()
		l.accept(newConn(w, nfd, sa))
	})
	if err != nil {
		closeFD(nfd)
		l.handoffs.Done()
	}
}

// Close stops accepting (Stop, if it was not called), then unwatches and
// closes each worker's socket, waiting for each worker to do its part.
// Connections already accepted are not affected.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	socks := l.socks
	l.mu.Unlock()
	errs := []error{l.Stop(context.Background()), l.unwatch(socks)}
	for _, ls := range socks {
		if l.sharedFD < 0 {
			if err := closeFD(ls.fd); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if l.sharedFD >= 0 {
		if err := closeFD(l.sharedFD); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// unwatch removes the sockets' watches from their workers.
func (l *Listener) unwatch(socks []*listenSock) error {
	var errs []error
	for _, ls := range socks {
		err := onWorker(ls.w, func() error {
			if wt := ls.watch; wt != nil {
				ls.watch = nil
				return wt.Close()
			}
			return nil
		})
		if errors.Is(err, sched.ErrStopped) {
			err = nil // the worker is gone, and its epoll with it
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// onWorker runs fn on w and returns its error; for set-up and tear-down only.
func onWorker(w *sched.Worker, fn func() error) error {
	done := make(chan error, 1)
	if err := w.Submit(lanes.Upstream, func() { done <- fn() }); err != nil {
		return err
	}
	return <-done
}

// sockOpts are the options of a listening socket.
type sockOpts struct {
	backlog int
	// reusePort sets SO_REUSEPORT before bind: the socket may share a
	// port that sockets of the same user with SO_REUSEPORT hold.
	reusePort bool
	// joinable sets SO_REUSEPORT once the socket listens: it got the
	// port to itself, and sockets with SO_REUSEPORT may join it now.
	joinable bool
	// stamps sets SO_TIMESTAMPNS.
	stamps bool
}
