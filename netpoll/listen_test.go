//go:build linux

package netpoll

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/sched"
)

// haveIPv6Loopback reports whether this machine can listen on ::1.
func haveIPv6Loopback() bool {
	nl, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		return false
	}
	_ = nl.Close()
	return true
}

// offline resolves from /etc/hosts and /etc/services (or Go's own table of
// common services) only: a name they do not know fails at once, and no DNS
// server is asked.
var offline = &net.Resolver{
	PreferGo: true,
	Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no DNS server in this test")
	},
}

func TestResolveListenAddr(t *testing.T) {
	wildcard := netip.IPv6Unspecified()
	if !dualStack() {
		wildcard = netip.IPv4Unspecified()
	}
	ap := netip.MustParseAddrPort
	good := []struct {
		addr string
		want netip.AddrPort
		any  bool
	}{
		{":0", netip.AddrPortFrom(wildcard, 0), true},
		{":8080", netip.AddrPortFrom(wildcard, 8080), true},
		{":http", netip.AddrPortFrom(wildcard, 80), true},
		{"127.0.0.1:0", ap("127.0.0.1:0"), false},
		{"127.0.0.1:", ap("127.0.0.1:0"), false}, // an empty port is 0, as in net.Listen
		{"127.0.0.1:https", ap("127.0.0.1:443"), false},
		{"[::1]:0", ap("[::1]:0"), false},
		{"[::]:80", ap("[::]:80"), false},
		{"0.0.0.0:80", ap("0.0.0.0:80"), false},
		{"[::ffff:127.0.0.1]:8080", ap("127.0.0.1:8080"), false},
	}
	for _, c := range good {
		la, err := resolveListenAddr(context.Background(), offline, c.addr)
		if assert.NoError(t, err, c.addr) {
			assert.Equal(t, c.want, la.ap, c.addr)
			assert.Equal(t, c.any, la.any, c.addr)
			assert.Zero(t, la.zoneID, c.addr)
		}
	}

	// A host name: its first IPv4 address, as net.Listen binds.
	la, err := resolveListenAddr(context.Background(), offline, "localhost:0")
	require.NoError(t, err)
	assert.True(t, la.ap.Addr().IsLoopback(), "localhost is %v", la.ap.Addr())
	assert.False(t, la.any)
	ips, err := offline.LookupNetIP(context.Background(), "ip", "localhost")
	require.NoError(t, err)
	for _, ip := range ips {
		if ip.Unmap().Is4() {
			assert.True(t, la.ap.Addr().Is4(), "localhost has an IPv4 address, and it is the one")
		}
	}

	// A zone names an interface, by name or by index.
	if lo, err := net.InterfaceByName("lo"); err == nil {
		for _, zone := range []string{"lo", fmt.Sprint(lo.Index)} {
			la, err := resolveListenAddr(context.Background(), offline, "[fe80::1%"+zone+"]:0")
			if assert.NoError(t, err, zone) {
				assert.Equal(t, uint32(lo.Index), la.zoneID, zone)
				assert.Equal(t, "fe80::1", la.ap.Addr().WithZone("").String())
			}
		}
	}

	bad := []struct {
		addr string
		says []string
	}{
		{"1.2.3.4", []string{`"1.2.3.4"`, "missing port", "want host:port"}},
		{"8080", []string{`"8080"`, "missing port", "want host:port"}},
		{"[::1:80", []string{"want host:port"}},
		{"nohost:", []string{`"nohost:"`, "lookup nohost", "a host name this machine resolves"}},
		{"unresolvable.invalid:80", []string{`"unresolvable.invalid:80"`, "lookup unresolvable.invalid", "a host name this machine resolves"}},
		{"256.0.0.1:80", []string{`"256.0.0.1:80"`, `"256.0.0.1" is not a valid IP address`}},
		{"[::g]:80", []string{`"::g" is not a valid IP address`}},
		{"127.0.0.1:65536", []string{`"127.0.0.1:65536"`, "invalid port", "from 0 to 65535"}},
		{"127.0.0.1:-1", []string{"invalid port", "from 0 to 65535"}},
		{"127.0.0.1:nosuchservice", []string{"unknown port", "a service name such as http"}},
		{"[fe80::1%nosuchif0]:80", []string{`zone "nosuchif0"`, "name an interface"}},
	}
	for _, c := range bad {
		_, err := resolveListenAddr(context.Background(), offline, c.addr)
		if assert.Error(t, err, c.addr) {
			for _, s := range c.says {
				assert.ErrorContains(t, err, s, c.addr)
			}
		}
	}
	_, err = resolveListenAddr(context.Background(), offline, "unresolvable.invalid:80")
	var dnsErr *net.DNSError
	assert.ErrorAs(t, err, &dnsErr, "the resolver's error is wrapped")
}

// A host name is resolved (by the default resolver) and served.
func TestListenOnHostName(t *testing.T) {
	s := schedtest.Start(t, 2)
	l, err := Listen(s, "localhost:0", Config{}, func(c *Conn) { _ = c.Close() })
	require.NoError(t, err)
	defer l.Close()
	ta := l.Addr().(*net.TCPAddr)
	assert.True(t, ta.IP.IsLoopback(), "bound to %v", ta)
	assert.NotZero(t, ta.Port)
	nc, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	_, err = nc.Read(make([]byte, 1))
	assert.Equal(t, io.EOF, err)
	require.NoError(t, nc.Close())
}

// holder holds a port on 127.0.0.1 as another program, or another
// Listener of this one, could.
type holder struct {
	name string
	hold func(t *testing.T, s *sched.Scheduler) (port int, closeFn func())
}

func netListen(addr string, reusePort bool) func(*testing.T, *sched.Scheduler) (int, func()) {
	return func(t *testing.T, _ *sched.Scheduler) (int, func()) {
		var lc net.ListenConfig
		if reusePort {
			lc.Control = func(_, _ string, rc syscall.RawConn) error {
				var serr error
				err := rc.Control(func(fd uintptr) {
					serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
				})
				return errors.Join(err, serr)
			}
		}
		nl, err := lc.Listen(context.Background(), "tcp", addr)
		require.NoError(t, err)
		return nl.Addr().(*net.TCPAddr).Port, func() { _ = nl.Close() }
	}
}

func netpollListen(opts Config) func(*testing.T, *sched.Scheduler) (int, func()) {
	return func(t *testing.T, s *sched.Scheduler) (int, func()) {
		l, err := Listen(s, "127.0.0.1:0", opts, func(c *Conn) { _ = c.Close() })
		require.NoError(t, err)
		return l.Addr().(*net.TCPAddr).Port, func() { _ = l.Close() }
	}
}

var holders = []holder{
	{"net.Listen", netListen("127.0.0.1:0", false)},
	{"net.Listen on every address", netListen(":0", false)},
	{"a socket of the same user with SO_REUSEPORT", netListen("127.0.0.1:0", true)},
	{"a Listener", netpollListen(Config{})},
	{"a shared Listener", netpollListen(Config{Shared: true})},
	{"a Listener with ReusePort", netpollListen(Config{ReusePort: true})},
	{"a shared Listener with ReusePort", netpollListen(Config{Shared: true, ReusePort: true})},
}

// As net.Listen, Listen refuses a port another socket holds, whatever that
// socket is, with net.Listen's error: SO_REUSEPORT on the workers' sockets
// does not let it join a port someone else listens on.
func TestListenRefusesAPortHeldElsewhere(t *testing.T) {
	s := schedtest.Start(t, 2)
	for _, h := range holders {
		for _, shared := range []bool{false, true} {
			name := h.name + map[bool]string{false: ", then a Listener", true: ", then a shared Listener"}[shared]
			t.Run(name, func(t *testing.T) {
				port, release := h.hold(t, s)
				defer release()
				fds := openFDs(t)
				for _, addr := range []string{fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf(":%d", port)} {
					l, err := Listen(s, addr, Config{Shared: shared}, func(c *Conn) { _ = c.Close() })
					if !assert.Error(t, err, addr) {
						_ = l.Close()
						continue
					}
					assert.ErrorIs(t, err, syscall.EADDRINUSE, addr)
					assert.EqualError(t, err, fmt.Sprintf("netpoll: listen tcp %s: bind: address already in use", addr))
					var opErr *net.OpError
					assert.ErrorAs(t, err, &opErr, "a *net.OpError, as net.Listen's")
				}
				assert.Equal(t, fds, openFDs(t), "a Listen that failed left no socket open")
				nc, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second)
				require.NoError(t, err, "the holder still has its port")
				require.NoError(t, nc.Close())
			})
		}
	}
}

// openFDs counts the process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(entries)
}

// A Listener holds its port against net.Listen too.
func TestNetListenRefusesAListenersPort(t *testing.T) {
	s := schedtest.Start(t, 2)
	for _, opts := range []Config{{}, {Shared: true}} {
		l, err := Listen(s, "127.0.0.1:0", opts, func(c *Conn) { _ = c.Close() })
		require.NoError(t, err)
		_, err = net.Listen("tcp", l.Addr().String())
		assert.ErrorIs(t, err, syscall.EADDRINUSE)
		require.NoError(t, l.Close())
	}
}

// countAccepts closes each connection and counts it.
func countAccepts(n *atomic.Int64) AcceptFunc {
	return func(c *Conn) {
		n.Add(1)
		_ = c.Close()
	}
}

// dialClosed dials addr n times and waits each time for the server to
// close the connection.
func dialClosed(t *testing.T, addr string, n int) {
	t.Helper()
	for range n {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		require.NoError(t, err)
		require.NoError(t, nc.SetReadDeadline(time.Now().Add(5*time.Second)))
		_, err = nc.Read(make([]byte, 1))
		require.Equal(t, io.EOF, err)
		require.NoError(t, nc.Close())
	}
}

// With ReusePort, a second Listener (another process, in a restart) joins
// the port of the first, and both take connections; the first may have
// ReusePort or not, unless it is a shared one.
func TestReusePortSharesThePort(t *testing.T) {
	s := schedtest.Start(t, 2)
	for _, c := range []struct {
		name          string
		first, second Config
	}{
		{"ReusePort, then ReusePort", Config{ReusePort: true}, Config{ReusePort: true}},
		{"default, then ReusePort", Config{}, Config{ReusePort: true}},
		{"default, then shared with ReusePort", Config{}, Config{ReusePort: true, Shared: true}},
		{"shared with ReusePort, then ReusePort", Config{ReusePort: true, Shared: true}, Config{ReusePort: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var a, b atomic.Int64
			first, err := Listen(s, "127.0.0.1:0", c.first, countAccepts(&a))
			require.NoError(t, err)
			defer first.Close()
			second, err := Listen(s, first.Addr().String(), c.second, countAccepts(&b))
			require.NoError(t, err)
			defer second.Close()
			assert.Equal(t, first.Addr().String(), second.Addr().String())
			const n = 64
			dialClosed(t, first.Addr().String(), n)
			assert.Equal(t, int64(n), a.Load()+b.Load())
			assert.Positive(t, a.Load(), "the first Listener took a share")
			assert.Positive(t, b.Load(), "the second Listener took a share")
		})
	}

	// A shared Listener without ReusePort has no SO_REUSEPORT: nobody joins.
	first, err := Listen(s, "127.0.0.1:0", Config{Shared: true}, func(c *Conn) { _ = c.Close() })
	require.NoError(t, err)
	defer first.Close()
	_, err = Listen(s, first.Addr().String(), Config{ReusePort: true}, func(c *Conn) { _ = c.Close() })
	assert.ErrorIs(t, err, syscall.EADDRINUSE)
}

// Every worker's socket takes connections, the first one too (bound and
// listening before it took SO_REUSEPORT), and every worker got the port
// the kernel chose for the first.
func TestListenSpreadsOverEveryWorker(t *testing.T) {
	const workers = 4
	s := schedtest.Start(t, workers)
	for _, addr := range []string{"127.0.0.1:0", ":0"} {
		t.Run(addr, func(t *testing.T) {
			var mu sync.Mutex
			seen := map[*sched.Worker]int{}
			l, err := Listen(s, addr, Config{}, func(c *Conn) {
				mu.Lock()
				seen[c.Worker()]++
				mu.Unlock()
				_ = c.Close()
			})
			require.NoError(t, err)
			defer l.Close()
			port := l.Addr().(*net.TCPAddr).Port
			require.NotZero(t, port)
			require.Len(t, l.socks, workers)
			for _, ls := range l.socks {
				sa, err := unix.Getsockname(ls.fd)
				require.NoError(t, err)
				assert.Equal(t, port, int(addrPort(sa).Port()), "every socket on the same port")
			}
			dialClosed(t, fmt.Sprintf("127.0.0.1:%d", port), 128)
			mu.Lock()
			defer mu.Unlock()
			assert.Len(t, seen, workers, "every worker accepted some of 128 connections: %v", seen)
		})
	}
}
