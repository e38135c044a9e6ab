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
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

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
	// OnError is told of accept failures other than "try again" (for
	// example EMFILE); nil ignores them. It runs on a worker.
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

	mu       sync.Mutex
	socks    []*listenSock
	sharedFD int // the one socket of a Shared listener, or -1
	closed   bool
}

type listenSock struct {
	fd    int
	w     *sched.Worker
	watch *sched.Watch
}

// Listen binds addr ("127.0.0.1:0", "[::1]:8080", ...) once per worker of s,
// which must be started, and calls accept for every connection.
func Listen(s *sched.Scheduler, addr string, opts Options, accept AcceptFunc) (*Listener, error) {
	if accept == nil {
		return nil, errors.New("netpoll: Listen with a nil AcceptFunc")
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("netpoll: listen address %q: %w", addr, err)
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
		if err := onWorker(ls.w, func() error {
			wt, err := ls.w.Watch(fd, events, func(uint32) {
				ls.w.Push(lanes.Upstream, func() { l.acceptBatch(ls) })
			})
			ls.watch = wt
			return err
		}); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// Addr returns the bound address.
func (l *Listener) Addr() net.Addr { return net.TCPAddrFromAddrPort(l.addr) }

// acceptBatch runs on the socket's worker as Upstream work.
func (l *Listener) acceptBatch(ls *listenSock) {
	for i := 0; i < l.opts.AcceptBatch; i++ {
		nfd, sa, err := unix.Accept4(ls.fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			switch err {
			case unix.EAGAIN, unix.EINTR, unix.ECONNABORTED:
				return
			default:
				// EMFILE and the like: the socket stays readable,
				// so the next poll retries; report it.
				if l.opts.OnError != nil {
					l.opts.OnError(fmt.Errorf("netpoll: accept: %w", err))
				}
				return
			}
		}
		c, err := newConn(ls.w, nfd, sa)
		if err != nil {
			unix.Close(nfd)
			continue
		}
		l.accept(c)
	}
	// More may be waiting: the level-triggered watch fires again.
}

// Close stops accepting: each worker's socket is unwatched and closed.
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
	var errs []error
	for _, ls := range socks {
		err := onWorker(ls.w, func() error {
			if ls.watch != nil {
				return ls.watch.Close()
			}
			return nil
		})
		if errors.Is(err, sched.ErrStopped) {
			err = nil // the worker is gone, and its epoll with it
		}
		if err != nil {
			errs = append(errs, err)
		}
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
