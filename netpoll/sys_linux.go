package netpoll

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file and sys_other.go are the package's system interface: sockets,
// epoll's event bits, poll(2) and the kernel's receive timestamps. The
// Linux versions here are the system calls; the small ones are inlined.

// supported reports whether the executor can run here: on Linux, always.
func supported() error { return nil }

// The epoll events the package watches for.
const (
	epollIn        = unix.EPOLLIN
	epollOut       = unix.EPOLLOUT
	epollRDHup     = unix.EPOLLRDHUP
	epollErr       = unix.EPOLLERR
	epollHup       = unix.EPOLLHUP
	epollET        = unix.EPOLLET
	epollExclusive = unix.EPOLLEXCLUSIVE
)

// The poll(2) events that a blocking read and write wait for.
const (
	pollIn  = unix.POLLIN | unix.POLLRDHUP
	pollOut = unix.POLLOUT
)

// sockaddr is a socket address as accept(2) and getsockname(2) return it.
type sockaddr = unix.Sockaddr

func closeFD(fd int) error { return unix.Close(fd) }

// setNoDelay turns Nagle's algorithm off on a connection, ignoring errors.
func setNoDelay(fd int) { _ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1) }

// accept takes a connection of the listening socket fd, non-blocking.
func accept(fd int) (int, sockaddr, error) {
	return unix.Accept4(fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
}

// shutdownRead shuts a listening socket down: the kernel refuses new
// connections.
func shutdownRead(fd int) error { return unix.Shutdown(fd, unix.SHUT_RD) }

// localAddr returns the address of the connected socket fd, with the zone
// of an IPv6 link-local one.
func localAddr(fd int) (netip.AddrPort, error) {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("netpoll: getsockname: %w", err)
	}
	ap := addrPort(sa)
	if a, ok := sa.(*unix.SockaddrInet6); ok && a.ZoneId != 0 {
		ap = netip.AddrPortFrom(ap.Addr().WithZone(zoneName(a.ZoneId)), ap.Port())
	}
	return ap, nil
}

// parseStamp returns the SCM_TIMESTAMPNS stamp among the control messages
// in oob, in Unix nanoseconds, or 0. It does not allocate.
func parseStamp(oob []byte) int64 {
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(oob) {
			return 0
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS &&
			l >= unix.CmsgLen(int(unsafe.Sizeof(unix.Timespec{}))) {
			var ts unix.Timespec
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&ts)), unsafe.Sizeof(ts)), oob[unix.CmsgLen(0):l])
			return ts.Nano()
		}
		oob = oob[min(unix.CmsgSpace(l-unix.CmsgLen(0)), len(oob)):]
	}
	return 0
}

func readFD(fd int, p []byte) (int, error) {
	n, _, err := recvFD(fd, p, nil)
	return n, err
}

// recvFD reads from fd into p, with read(2), or with recvmsg(2) when oob
// is not nil to take the control messages too; it retries on EINTR and
// reports the end of the stream as ErrEOF.
func recvFD(fd int, p, oob []byte) (n, oobn int, err error) {
	for {
		if oob == nil {
			n, err = unix.Read(fd, p)
		} else {
			n, oobn, err = recvmsg(fd, p, oob)
		}
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, 0, err
		case n == 0 && len(p) > 0:
			return 0, 0, ErrEOF
		}
		return n, oobn, nil
	}
}

// recvmsg is recvmsg(2) on a connected socket, without the source address
// that unix.Recvmsg returns and allocates for: it allocates nothing.
func recvmsg(fd int, p, oob []byte) (n, oobn int, err error) {
	var iov unix.Iovec
	if len(p) > 0 {
		iov.Base = &p[0]
		iov.SetLen(len(p))
	}
	var msg unix.Msghdr
	msg.Iov = &iov
	msg.SetIovlen(1)
	if len(oob) > 0 {
		msg.Control = &oob[0]
		msg.SetControllen(len(oob))
	}
	r, _, e := unix.Syscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&msg)), 0)
	if e != 0 {
		return 0, 0, e
	}
	return int(r), int(msg.Controllen), nil
}

// pollFor blocks until fd has one of events (or an error or hang-up, which
// the next read or write reports), or for at most wait when wait is not
// negative (rounded up to the millisecond).
func pollFor(fd int, events int16, wait time.Duration) error {
	ms := -1
	if wait >= 0 {
		ms = int((wait + time.Millisecond - 1) / time.Millisecond)
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: events}}
	for {
		_, err := unix.Poll(fds, ms)
		if err != unix.EINTR {
			if err != nil {
				return fmt.Errorf("netpoll: poll: %w", err)
			}
			return nil
		}
	}
}

// writeFD writes what the socket takes of p and returns the rest.
func writeFD(fd int, p []byte) ([]byte, error) {
	for len(p) > 0 {
		n, err := unix.Write(fd, p)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return p, nil
		case err != nil:
			return nil, fmt.Errorf("netpoll: write: %w", err)
		}
		p = p[n:]
	}
	return nil, nil
}

// sendFileFD sends up to n bytes of the file in, from its offset (which
// it advances), to the socket out by sendfile(2), as much as the socket
// takes now: the bytes sent, with syscall.EAGAIN when the socket is full
// before n, and 0 with a nil error when the file has no more.
func sendFileFD(out, in int, n int64) (int64, error) {
	var sent int64
	for sent < n {
		k, err := unix.Sendfile(out, in, nil, int(min(n-sent, maxSendFile)))
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return sent, syscall.EAGAIN
		case err != nil:
			return sent, fmt.Errorf("netpoll: sendfile: %w", err)
		case k == 0:
			return sent, nil // the file ended
		}
		sent += int64(k)
	}
	return sent, nil
}

// maxSendFile is the most one sendfile(2) is asked to send, under Linux's
// own cap of a little under 2 GiB.
const maxSendFile = 1 << 30

// zoneName names the interface of index i, as Go's net package does: its
// name, or the number when it has none.
func zoneName(i uint32) string {
	if ifi, err := net.InterfaceByIndex(int(i)); err == nil {
		return ifi.Name
	}
	return strconv.FormatUint(uint64(i), 10)
}

// adoptFD makes the listening socket fd non-blocking, turns on
// SO_TIMESTAMPNS when stamps asks for it, and returns its address.
func adoptFD(fd int, stamps bool) (netip.AddrPort, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		return netip.AddrPort{}, fmt.Errorf("netpoll: adopt fd %d: %w", fd, err)
	}
	if stamps {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			return netip.AddrPort{}, fmt.Errorf("netpoll: adopt fd %d: SO_TIMESTAMPNS: %w", fd, err)
		}
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("netpoll: adopt fd %d: getsockname: %w", fd, err)
	}
	return addrPort(sa), nil
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

// dualStack reports whether the machine can open an IPv6 socket that
// accepts IPv4 too (IPV6_V6ONLY off); decided once.
var dualStack = sync.OnceValue(func() bool {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0) == nil
})

// sockaddr is la's address with port, for bind(2).
func (la listenAddr) sockaddr(port uint16) unix.Sockaddr {
	ip := la.ap.Addr()
	if ip.Is4() {
		return &unix.SockaddrInet4{Port: int(port), Addr: ip.As4()}
	}
	return &unix.SockaddrInet6{Port: int(port), Addr: ip.As16(), ZoneId: la.zoneID}
}

// family is the socket family for la.
func (la listenAddr) family() int {
	if la.ap.Addr().Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// addrPort is the address of a socket address. The zone of an IPv6
// link-local address is left out: naming it takes a look-up of the
// interfaces, too slow for every accepted connection.
func addrPort(sa unix.Sockaddr) netip.AddrPort {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port))
	}
	return netip.AddrPort{}
}

// listenFD opens a non-blocking listening socket on la's address and port
// (0: the kernel chooses) and returns it with the port it is bound to.
// SO_REUSEADDR is set, as net.Listen sets it, so that connections of an
// earlier process in TIME_WAIT do not hold the port. SO_TIMESTAMPNS, when
// so.stamps asks for it, is set before the first connection, so that the
// kernel stamps every byte the accepted sockets (which inherit it)
// receive. An IPv6 socket accepts IPv4 too (IPV6_V6ONLY off), as Go's.
func listenFD(la listenAddr, port uint16, so sockOpts) (int, uint16, error) {
	fd, err := unix.Socket(la.family(), unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, 0, la.listenError("socket", port, err)
	}
	fail := func(op string, err error) (int, uint16, error) {
		unix.Close(fd)
		return -1, 0, la.listenError(op, port, err)
	}
	if la.family() == unix.AF_INET6 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0); err != nil {
			return fail("setsockopt IPV6_V6ONLY", err)
		}
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fail("setsockopt SO_REUSEADDR", err)
	}
	if so.reusePort {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			return fail("setsockopt SO_REUSEPORT", err)
		}
	}
	if so.stamps {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			return fail("setsockopt SO_TIMESTAMPNS", err)
		}
	}
	if err := unix.Bind(fd, la.sockaddr(port)); err != nil {
		return fail("bind", err)
	}
	if err := unix.Listen(fd, so.backlog); err != nil {
		return fail("listen", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return fail("getsockname", err)
	}
	port = addrPort(sa).Port()
	if so.joinable {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			return fail("setsockopt SO_REUSEPORT", err)
		}
	}
	return fd, port, nil
}
