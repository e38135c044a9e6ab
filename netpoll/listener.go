// Package netpoll puts sockets on the sluice executor: listening sockets
// whose accepts run as Upstream work on every worker, and non-blocking
// connections owned by one worker, whose readiness is reported by that
// worker's epoll instance (the one it parks in) and whose writes that would
// block wait for EPOLLOUT and resume as Continuation work.
//
// All callbacks run on the connection's worker. This package is the
// transport under the HTTP server; it knows nothing of HTTP.
package netpoll

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/sched"
)

// AcceptFunc is called on a worker for each accepted connection; the
// connection belongs to that worker from then on.
type AcceptFunc func(c *Conn)

// Options configure a Listener. The zero value is usable.
type Options struct {
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
// the workers and no worker steals another's.
type Listener struct {
	opts   Options
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

// Listen binds addr ("127.0.0.1:0", "[::1]:8080", ...) once per worker of s,
// which must be started, and calls accept for every connection.
func Listen(s *sched.Scheduler, addr string, opts Options, accept AcceptFunc) (*Listener, error) {
	if accept == nil {
		return nil, errors.New("netpoll: Listen with a nil AcceptFunc")
	}
	ap, err := parseListenAddr(addr)
	if err != nil {
		return nil, err
	}
	if opts.Backlog <= 0 {
		opts.Backlog = 1024
	}
	if opts.AcceptBatch <= 0 {
		opts.AcceptBatch = 64
	}
	l := &Listener{opts: opts, addr: ap, accept: accept, sharedFD: -1}
	events := uint32(unix.EPOLLIN)
	shared := -1
	if opts.Shared {
		events |= unix.EPOLLEXCLUSIVE
		fd, bound, err := listenFD(l.addr, opts.Backlog, false, opts.Timestamps)
		if err != nil {
			return nil, err
		}
		shared, l.addr = fd, bound
		l.sharedFD = fd
	}
	for i := 0; i < s.NumWorkers(); i++ {
		fd := shared
		if fd < 0 {
			var bound netip.AddrPort
			fd, bound, err = listenFD(l.addr, opts.Backlog, true, opts.Timestamps)
			if err != nil {
				l.Close()
				return nil, err
			}
			l.addr = bound // a port chosen by the kernel is reused by the others
		}
		ls := &listenSock{fd: fd, w: s.Worker(i)}
		l.socks = append(l.socks, ls)
		if err := l.watch(ls, events); err != nil {
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
func Adopt(s *sched.Scheduler, fd int, opts Options, accept AcceptFunc) (*Listener, error) {
	if accept == nil {
		return nil, errors.New("netpoll: Adopt with a nil AcceptFunc")
	}
	if err := checkListening(fd); err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("netpoll: adopt fd %d: %w", fd, err)
	}
	if opts.Timestamps {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			return nil, fmt.Errorf("netpoll: adopt fd %d: SO_TIMESTAMPNS: %w", fd, err)
		}
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return nil, fmt.Errorf("netpoll: adopt fd %d: getsockname: %w", fd, err)
	}
	if opts.AcceptBatch <= 0 {
		opts.AcceptBatch = 64
	}
	l := &Listener{opts: opts, addr: addrPort(sa), accept: accept, sharedFD: fd}
	if err := l.watchAll(s, fd, unix.EPOLLIN|unix.EPOLLEXCLUSIVE); err != nil {
		return nil, err
	}
	return l, nil
}

// checkListening reports whether fd is a listening TCP socket.
func checkListening(fd int) error {
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return fmt.Errorf("netpoll: fd %d is not a socket: %w", fd, err)
	}
	listening, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	if err != nil {
		return fmt.Errorf("netpoll: fd %d: SO_ACCEPTCONN: %w", fd, err)
	}
	domain, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return fmt.Errorf("netpoll: fd %d: SO_DOMAIN: %w", fd, err)
	}
	if typ != unix.SOCK_STREAM || listening != 1 || (domain != unix.AF_INET && domain != unix.AF_INET6) {
		return fmt.Errorf("netpoll: fd %d is not a listening TCP socket (type %d, listening %d, family %d)", fd, typ, listening, domain)
	}
	return nil
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
// batch as Upstream work.
func (l *Listener) watch(ls *listenSock, events uint32) error {
	l.events = events
	return onWorker(ls.w, func() error { return l.watchLocal(ls) })
}

// watchLocal is watch on the worker.
func (l *Listener) watchLocal(ls *listenSock) error {
	wt, err := ls.w.Watch(ls.fd, l.events, func(uint32) {
		ls.w.Push(lanes.Upstream, func() { l.acceptBatch(ls) })
	})
	ls.watch = wt
	return err
}

// parseListenAddr parses a listening address: an IP literal and a port
// ("127.0.0.1:8080", "[::1]:0"), or a port alone (":8080"), which means every
// interface, IPv6 and IPv4 together where the machine has IPv6, as in
// net.Listen.
func parseListenAddr(addr string) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("netpoll: listen address %q: %w (want host:port, such as 127.0.0.1:8080 or :8080)", addr, err)
	}
	if host == "" {
		host = "::"
		if !hasIPv6() {
			host = "0.0.0.0"
		}
	}
	ap, err := netip.ParseAddrPort(net.JoinHostPort(host, port))
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("netpoll: listen address %q: %w (the host must be an IP address or empty)", addr, err)
	}
	return ap, nil
}

// hasIPv6 reports whether the machine can open an IPv6 socket.
func hasIPv6() bool {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// Addr returns the bound address.
func (l *Listener) Addr() net.Addr { return net.TCPAddrFromAddrPort(l.addr) }

// acceptBatch runs on the socket's worker as Upstream work.
func (l *Listener) acceptBatch(ls *listenSock) {
	if ls.watch == nil {
		return // queued before a pause or Stop unwatched the socket
	}
	for i := 0; i < l.opts.AcceptBatch; i++ {
		nfd, sa, err := unix.Accept4(ls.fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			switch {
			case err == unix.EAGAIN || err == unix.EINTR || err == unix.ECONNABORTED:
			case err == unix.EINVAL && l.stopped.Load():
				// Stop shut the socket down: it reports a hang-up at
				// every poll until it is unwatched.
				l.unwatchLocal(ls)
			case err == unix.EMFILE || err == unix.ENFILE || err == unix.ENOBUFS || err == unix.ENOMEM:
				l.pause(ls, err)
			default:
				if l.opts.OnError != nil {
					l.opts.OnError(fmt.Errorf("netpoll: accept: %w", err))
				}
			}
			return
		}
		ls.backoff = 0
		c, err := newConn(ls.w, nfd, sa)
		if err != nil {
			unix.Close(nfd)
			continue
		}
		l.accept(c)
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
				nfd, sa, err := unix.Accept4(ls.fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
				if err == unix.EINTR || err == unix.ECONNABORTED {
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
			if err := unix.Shutdown(ls.fd, unix.SHUT_RD); err != nil && err != unix.ENOTCONN {
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
func (l *Listener) handOff(w *sched.Worker, nfd int, sa unix.Sockaddr) {
	l.handoffs.Add(1)
	err := w.Submit(lanes.Upstream, func() {
		defer l.handoffs.Done()
		c, err := newConn(w, nfd, sa)
		if err != nil {
			unix.Close(nfd)
			return
		}
		l.accept(c)
	})
	if err != nil {
		unix.Close(nfd)
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
			if err := unix.Close(ls.fd); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if l.sharedFD >= 0 {
		if err := unix.Close(l.sharedFD); err != nil {
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

// listenFD opens a non-blocking listening socket on ap, with SO_REUSEPORT
// when reuse is set and SO_TIMESTAMPNS when stamps is, and returns it with
// the address it is bound to. Accepted sockets inherit SO_TIMESTAMPNS, and
// setting it before the first connection turns the kernel's receive
// stamping on before any byte of it arrives.
func listenFD(ap netip.AddrPort, backlog int, reuse, stamps bool) (int, netip.AddrPort, error) {
	family := unix.AF_INET
	if ap.Addr().Is6() && !ap.Addr().Is4In6() {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, ap, fmt.Errorf("netpoll: socket: %w", err)
	}
	fail := func(what string, err error) (int, netip.AddrPort, error) {
		unix.Close(fd)
		return -1, ap, fmt.Errorf("netpoll: %s %v: %w", what, ap, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fail("SO_REUSEADDR", err)
	}
	if reuse {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			return fail("SO_REUSEPORT", err)
		}
	}
	if stamps {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			return fail("SO_TIMESTAMPNS", err)
		}
	}
	if err := unix.Bind(fd, sockaddr(ap)); err != nil {
		return fail("bind", err)
	}
	if err := unix.Listen(fd, backlog); err != nil {
		return fail("listen", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return fail("getsockname", err)
	}
	return fd, addrPort(sa), nil
}

func sockaddr(ap netip.AddrPort) unix.Sockaddr {
	if ap.Addr().Is4() || ap.Addr().Is4In6() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().Unmap().As4()}
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
}

func addrPort(sa unix.Sockaddr) netip.AddrPort {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port))
	}
	return netip.AddrPort{}
}
