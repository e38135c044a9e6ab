//go:build linux

package netpoll

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/lanes"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// openConns counts the connections an echo server has open. (A WaitGroup
// would do, but the race detector cannot see that a client's exchange
// orders one worker's Add after another's Done, through the kernel's
// sockets, and would report a WaitGroup reused during its Wait.)
type openConns struct{ n atomic.Int64 }

func (o *openConns) Add(d int) { o.n.Add(int64(d)) }
func (o *openConns) Done()     { o.n.Add(-1) }

// Wait waits until every connection has closed.
func (o *openConns) Wait(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return o.n.Load() == 0 }, 10*time.Second, time.Millisecond,
		"every server side saw the close and closed")
}

// echo serves each connection by writing back what it reads, reading at most
// budget bytes per readiness callback.
func echo(budget int, conns *openConns, lanesSeen *sync.Map) AcceptFunc {
	return func(c *Conn) {
		conns.Add(1)
		buf := make([]byte, budget)
		var onRead func()
		onRead = func() {
			n, err := c.Read(buf)
			if errors.Is(err, unix.EAGAIN) {
				return
			}
			if err != nil {
				_ = c.Close()
				conns.Done()
				return
			}
			out := bytes.Clone(buf[:n])
			_ = c.OnReadable(lanes.Continuation, nil) // one write at a time
			_ = c.Write(out, func(err error) {
				if lanesSeen != nil {
					lanesSeen.Store("written", true)
				}
				if err != nil {
					_ = c.Close()
					conns.Done()
					return
				}
				_ = c.OnReadable(lanes.Continuation, onRead)
			})
		}
		_ = c.OnReadable(lanes.Upstream, onRead)
	}
}

func TestEchoManyConnections(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "reuseport", true: "exclusive"}[shared], func(t *testing.T) {
			testEcho(t, Config{Shared: shared})
		})
	}
}

func testEcho(t *testing.T, opts Config) {
	s := schedtest.Start(t, 2)
	var conns openConns
	l, err := Listen(s, "127.0.0.1:0", opts, echo(512, &conns, nil))
	require.NoError(t, err)
	defer l.Close()

	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", l.Addr().String())
			if !assert.NoError(t, err) {
				return
			}
			defer nc.Close()
			msg := bytes.Repeat([]byte{byte('a' + i)}, 3000) // several read budgets
			for r := 0; r < 5; r++ {
				_, err := nc.Write(msg)
				if !assert.NoError(t, err) {
					return
				}
				got := make([]byte, len(msg))
				_, err = io.ReadFull(nc, got)
				if !assert.NoError(t, err) || !assert.Equal(t, msg, got) {
					return
				}
			}
		}()
	}
	wg.Wait()
	conns.Wait(t)
}

func TestWriteWaitsForEPOLLOUT(t *testing.T) {
	s := schedtest.Start(t, 1)
	const size = 16 << 20 // far beyond the socket buffers
	payload := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	written := make(chan error, 1)
	var served atomic.Int64
	l, err := Listen(s, "127.0.0.1:0", Config{}, func(c *Conn) {
		assert.NoError(t, c.Write(payload, func(err error) {
			written <- err
			_ = c.Close()
		}))
		// The worker is not blocked meanwhile: other work runs.
		c.Worker().Push(lanes.Upstream, func() { served.Add(1) })
	})
	require.NoError(t, err)
	defer l.Close()
	nc, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer nc.Close()
	require.Eventually(t, func() bool { return served.Load() == 1 }, 10*time.Second, time.Millisecond)
	select {
	case <-written:
		t.Fatal("a 16 MiB write completed before the client read anything")
	default:
	}
	got, err := io.ReadAll(nc)
	require.NoError(t, err)
	assert.Equal(t, len(payload), len(got))
	assert.True(t, bytes.Equal(payload, got))
	assert.NoError(t, <-written)
}

func TestListenErrors(t *testing.T) {
	s := schedtest.Start(t, 1)
	_, err := Listen(s, "nonsense", Config{}, func(*Conn) {})
	assert.Error(t, err)
	_, err = Listen(s, "127.0.0.1:0", Config{}, nil)
	assert.Error(t, err)
	l, err := Listen(s, "127.0.0.1:0", Config{}, func(c *Conn) { _ = c.Close() })
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "Close is idempotent")
	_, err = net.DialTimeout("tcp", l.Addr().String(), time.Second)
	assert.Error(t, err, "closed listener refuses")
}

// A port alone listens on every address, IPv6 and IPv4 together, as
// net.Listen does: one socket per worker (or one shared socket) bound to ::
// with IPV6_V6ONLY off.
func TestListenOnEveryInterface(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "reuseport", true: "shared"}[shared], func(t *testing.T) {
			s := schedtest.Start(t, 2)
			l, err := Listen(s, ":0", Config{Shared: shared}, func(c *Conn) { _ = c.Close() })
			require.NoError(t, err)
			defer l.Close()
			port := l.Addr().(*net.TCPAddr).Port
			require.NotZero(t, port)
			hosts := []string{"127.0.0.1"}
			if haveIPv6Loopback() {
				hosts = append(hosts, "::1")
			} else {
				t.Log("no IPv6 loopback here: IPv4 only")
			}
			for _, h := range hosts {
				nc, err := net.Dial("tcp", net.JoinHostPort(h, fmt.Sprint(port)))
				require.NoError(t, err, "reachable over %s", h)
				_, err = nc.Read(make([]byte, 1))
				assert.Equal(t, io.EOF, err, "served over %s", h)
				require.NoError(t, nc.Close())
			}
			_, err = Listen(s, "8080", Config{}, func(*Conn) {})
			assert.ErrorContains(t, err, "want host:port")
		})
	}
}

// Adopt serves a socket opened elsewhere (here by net.Listen, as systemd or
// a parent process would hand it over) on every worker, and refuses what is
// not a listening TCP socket without closing it.
func TestAdoptServesAnInheritedSocket(t *testing.T) {
	s := schedtest.Start(t, 2)
	nl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f, err := nl.(*net.TCPListener).File() // a duplicate, ours to give away
	require.NoError(t, err)
	require.NoError(t, nl.Close())
	fd, err := unix.Dup(int(f.Fd()))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	var conns openConns
	l, err := Adopt(s, fd, Config{Timestamps: true}, echo(512, &conns, nil))
	require.NoError(t, err)
	assert.Equal(t, nl.Addr().String(), l.Addr().String())
	for range 4 {
		nc, err := net.Dial("tcp", l.Addr().String())
		require.NoError(t, err)
		_, err = nc.Write([]byte("ping"))
		require.NoError(t, err)
		got := make([]byte, 4)
		_, err = io.ReadFull(nc, got)
		require.NoError(t, err)
		assert.Equal(t, "ping", string(got))
		require.NoError(t, nc.Close())
	}
	conns.Wait(t)
	require.NoError(t, l.Close())
	_, err = unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	assert.ErrorIs(t, err, unix.EBADF, "Close closed the adopted socket")

	var p [2]int
	require.NoError(t, unix.Pipe2(p[:], unix.O_CLOEXEC))
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	_, err = Adopt(s, p[0], Config{}, func(*Conn) {})
	assert.ErrorContains(t, err, "not a socket")
	_, err = unix.FcntlInt(uintptr(p[0]), unix.F_GETFD, 0)
	assert.NoError(t, err, "a refused descriptor stays open")
	unconnected, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(unconnected)
	_, err = Adopt(s, unconnected, Config{}, func(*Conn) {})
	assert.ErrorContains(t, err, "not a listening TCP socket")
}

func TestIPv6Loopback(t *testing.T) {
	s := schedtest.Start(t, 1)
	l, err := Listen(s, "[::1]:0", Config{}, func(c *Conn) { _ = c.Close() })
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	defer l.Close()
	nc, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer nc.Close()
	_, err = nc.Read(make([]byte, 1))
	assert.Equal(t, io.EOF, err)
}

func TestCloseAbandonsPendingWriteAndReadSeesEOF(t *testing.T) {
	s := schedtest.Start(t, 1)
	results := make(chan error, 4)
	l, err := Listen(s, "127.0.0.1:0", Config{}, func(c *Conn) {
		big := make([]byte, 16<<20)
		assert.NoError(t, c.Write(big, func(err error) { results <- err }))
		assert.Error(t, c.Write([]byte("x"), nil), "one write at a time")
		var onRead func()
		onRead = func() {
			_, err := c.Read(make([]byte, 64))
			if errors.Is(err, unix.EAGAIN) {
				return
			}
			results <- err // the client closed: ErrEOF (or a reset)
			assert.NoError(t, c.Close())
			assert.NoError(t, c.Close(), "Close is idempotent")
			_, err = c.Read(make([]byte, 1))
			results <- err
		}
		assert.NoError(t, c.OnReadable(lanes.Upstream, onRead))
	})
	require.NoError(t, err)
	defer l.Close()
	nc, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	_, err = nc.Read(make([]byte, 1024)) // some bytes arrive; most wait
	require.NoError(t, err)
	require.NoError(t, nc.(*net.TCPConn).CloseWrite())
	first := <-results
	assert.True(t, errors.Is(first, ErrEOF), "got %v", first)
	assert.ErrorIs(t, <-results, ErrClosed)
	assert.ErrorIs(t, <-results, ErrClosed, "the abandoned write reports ErrClosed")
	nc.Close()
}

func TestWriteNowReportsShortWrite(t *testing.T) {
	s := schedtest.Start(t, 1)
	type result struct {
		n1, n2 int
		err2   error
	}
	res := make(chan result, 1)
	l, err := Listen(s, "127.0.0.1:0", Config{}, func(c *Conn) {
		big := make([]byte, 64<<20) // more than any socket buffer holds
		n1, err := c.WriteNow(big)
		assert.NoError(t, err)
		// the rest waits for room; a WriteNow meanwhile is refused
		assert.NoError(t, c.Write(big[n1:], nil))
		_, err2 := c.WriteNow([]byte("x"))
		res <- result{n1: n1, n2: len(big), err2: err2}
		c.Close()
	})
	require.NoError(t, err)
	defer l.Close()
	nc, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer nc.Close()
	r := <-res
	assert.Greater(t, r.n1, 0)
	assert.Less(t, r.n1, r.n2)
	assert.Error(t, r.err2)
}

func TestBlockingReadAndWriteWait(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	a, b := fds[0], fds[1]
	defer unix.Close(a)
	payload := bytes.Repeat([]byte("x"), 8<<20) // more than the socket buffers
	written := make(chan error, 1)
	go func() { written <- WriteBlocking(a, payload) }() // must wait for room
	var got []byte
	buf := make([]byte, 64<<10)
	for len(got) < len(payload) {
		n, err := ReadBlocking(b, buf) // waits while nothing has come
		require.NoError(t, err)
		got = append(got, buf[:n]...)
	}
	require.NoError(t, <-written)
	assert.Equal(t, len(payload), len(got))
	unix.Close(b)
	// The peer gone: a write fails, not blocks.
	assert.Error(t, WriteBlocking(a, payload))
}

func TestReadBlockingEndOfStream(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fds[1])
	go func() { time.Sleep(10 * time.Millisecond); unix.Close(fds[0]) }()
	_, err = ReadBlocking(fds[1], make([]byte, 16))
	assert.ErrorIs(t, err, ErrEOF)
}

func TestReadStampedTellsWhenBytesArrived(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) {
			if on {
				keepTimestampsOn(t)
			}
			s := schedtest.Start(t, 1)
			type got struct {
				n            int
				stamp, after int64
				err          error
			}
			results := make(chan got, 1)
			const held = 50 * time.Millisecond
			l, err := Listen(s, "127.0.0.1:0", Config{Timestamps: on}, func(c *Conn) {
				assert.NoError(t, c.OnReadable(lanes.Upstream, func() {
					// The bytes are in the socket already; let them wait.
					time.Sleep(held)
					n, stamp, err := c.ReadStamped(make([]byte, 64))
					results <- got{n, stamp, time.Now().UnixNano(), err}
					assert.NoError(t, c.OnReadable(lanes.Upstream, nil))
					assert.NoError(t, c.Close())
				}))
			})
			require.NoError(t, err)
			defer l.Close()
			nc, err := net.Dial("tcp", l.Addr().String())
			require.NoError(t, err)
			defer nc.Close()
			before := time.Now().UnixNano()
			_, err = nc.Write([]byte("hello"))
			require.NoError(t, err)
			r := <-results
			require.NoError(t, r.err)
			assert.Equal(t, 5, r.n)
			if !on {
				assert.Zero(t, r.stamp, "no stamp without Config.Timestamps")
				return
			}
			// Clocks are the same (CLOCK_REALTIME); allow 1 ms of slack.
			assert.GreaterOrEqual(t, r.stamp, before-int64(time.Millisecond))
			assert.GreaterOrEqual(t, r.after-r.stamp, int64(held), "the bytes waited at least the worker's hold")
		})
	}
}

// keepTimestampsOn holds a socket with SO_TIMESTAMPNS open for the test.
// The kernel stamps received packets only once some socket has asked for
// it, and turns that on in a deferred work item: the bytes of the first
// connection after the first request can arrive unstamped. A process that
// keeps a timestamping listener open meets this only in its first moments.
func keepTimestampsOn(t *testing.T) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	require.NoError(t, unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1))
	time.Sleep(20 * time.Millisecond) // let the deferred enabling run
}

func TestParseStampRejectsMalformedControlMessages(t *testing.T) {
	assert.Zero(t, parseStamp(nil))
	assert.Zero(t, parseStamp(make([]byte, 8)), "shorter than a header")
	bad := make([]byte, 64)
	h := (*unix.Cmsghdr)(unsafe.Pointer(&bad[0]))
	h.Level, h.Type = unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS
	h.SetLen(200)
	assert.Zero(t, parseStamp(bad), "length past the buffer")
	h.SetLen(unix.CmsgLen(4))
	assert.Zero(t, parseStamp(bad), "too short for a timespec")
	h.SetLen(unix.CmsgLen(16))
	ts := unix.NsecToTimespec(1_700_000_000_123_456_789)
	copy(bad[unix.CmsgLen(0):], unsafe.Slice((*byte)(unsafe.Pointer(&ts)), unsafe.Sizeof(ts)))
	assert.Equal(t, int64(1_700_000_000_123_456_789), parseStamp(bad))
	h.Type = unix.SCM_RIGHTS
	assert.Zero(t, parseStamp(bad), "another message type")
}

// A stamped read allocates nothing: it is on the path of every request.
func TestReadStampedAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	p, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	buf := make([]byte, 64)
	var oob [64]byte
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = unix.Write(p[1], []byte("x"))
		n, _, err := recvFD(p[0], buf, oob[:])
		if err != nil || n != 1 {
			t.Fatalf("read %d, %v", n, err)
		}
	})
	assert.Zero(t, allocs)
}

// Out of descriptors, accept backs off instead of retrying at every poll:
// a handful of reports where the old code made thousands, and the
// connections waiting are accepted once descriptors are free again.
func TestAcceptBacksOffWhenOutOfDescriptors(t *testing.T) {
	s := schedtest.Start(t, 1)
	var reports atomic.Int32
	var mu sync.Mutex
	var accepted []*Conn
	l, err := Listen(s, "127.0.0.1:0", Config{OnError: func(err error) {
		if errors.Is(err, unix.EMFILE) {
			reports.Add(1)
		}
	}}, func(c *Conn) {
		mu.Lock()
		accepted = append(accepted, c)
		mu.Unlock()
	})
	require.NoError(t, err)
	defer l.Close()

	// Hold the worker while the clients connect, so that every accept
	// happens once the process is out of descriptors.
	running, release := make(chan struct{}), make(chan struct{})
	require.NoError(t, s.Worker(0).Submit(lanes.Upstream, func() { close(running); <-release }))
	<-running
	var lim unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &lim))
	restore := func() { _ = unix.Setrlimit(unix.RLIMIT_NOFILE, &lim) }
	t.Cleanup(restore)
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	const clients = 3
	low := lim
	low.Cur = uint64(len(fds) + clients) // room for the clients, none for the server
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &low))
	var conns []net.Conn
	for range clients {
		nc, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			restore()
			require.NoError(t, err)
		}
		conns = append(conns, nc)
	}
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	close(release)
	time.Sleep(300 * time.Millisecond)
	n := reports.Load()
	restore()
	assert.Positive(t, n, "the worker tried and reported")
	assert.LessOrEqual(t, n, int32(20), "backed off: 5 ms doubling covers 300 ms in about 6 tries, not thousands")
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted) == clients
	}, 10*time.Second, time.Millisecond, "accepted once descriptors are free")
	mu.Lock()
	for _, c := range accepted {
		c := c
		require.NoError(t, c.Worker().Submit(lanes.Upstream, func() { _ = c.Close() }))
	}
	mu.Unlock()
}

// Stop stops accepting at once, even while the worker of the socket is busy:
// connections already queued in the kernel are accepted and served, and new
// ones are refused rather than queued and later reset.
func TestStopAcceptsWhatIsQueuedAndRefusesTheRest(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "reuseport", true: "exclusive"}[shared], func(t *testing.T) {
			s := schedtest.Start(t, 1)
			var conns openConns
			l, err := Listen(s, "127.0.0.1:0", Config{Shared: shared}, echo(512, &conns, nil))
			require.NoError(t, err)
			defer l.Close()
			running, release := make(chan struct{}), make(chan struct{})
			require.NoError(t, s.Worker(0).Submit(lanes.Upstream, func() { close(running); <-release }))
			<-running
			// Queued in the kernel: the only worker is busy.
			var queued []net.Conn
			for range 5 {
				nc, err := net.Dial("tcp", l.Addr().String())
				require.NoError(t, err)
				defer nc.Close()
				queued = append(queued, nc)
			}
			stopped := make(chan error, 1)
			go func() { stopped <- l.Stop(context.Background()) }()
			// Stop refuses new connections at once, whatever the worker does.
			require.Eventually(t, func() bool {
				nc, err := net.DialTimeout("tcp", l.Addr().String(), time.Second)
				if err == nil {
					nc.Close()
				}
				return err != nil
			}, 10*time.Second, time.Millisecond)
			select {
			case err := <-stopped:
				t.Fatalf("Stop returned %v before its connections reached the busy worker", err)
			default:
			}
			close(release)
			require.NoError(t, <-stopped)
			for i, nc := range queued {
				_, err := nc.Write([]byte("ping"))
				require.NoError(t, err, "connection %d", i)
				got := make([]byte, 4)
				_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
				_, err = io.ReadFull(nc, got)
				require.NoError(t, err, "connection %d queued before Stop is served", i)
				nc.Close()
			}
			conns.Wait(t)
			require.NoError(t, l.Close())
		})
	}
}

// TestConnJoinsEpollWithItsFirstInterest checks that an accepted
// connection takes no watch until something reads or writes it, that the
// first interest gives it one (a single epoll_ctl: ADD with that interest),
// and that one never watched closes.
func TestConnJoinsEpollWithItsFirstInterest(t *testing.T) {
	s := schedtest.Start(t, 1)
	type seen struct{ before, after bool }
	got := make(chan seen, 2)
	data := make(chan string, 1)
	first := true
	l, err := Listen(s, "127.0.0.1:0", Config{}, func(c *Conn) {
		if !first {
			got <- seen{c.watch != nil, false}
			assert.NoError(t, c.Close(), "a connection never watched closes")
			return
		}
		first = false
		before := c.watch != nil
		assert.NoError(t, c.OnReadable(lanes.Upstream, func() {
			b := make([]byte, 16)
			if n, err := c.Read(b); err == nil {
				data <- string(b[:n])
				assert.NoError(t, c.Close())
			}
		}))
		got <- seen{before, c.watch != nil}
	})
	require.NoError(t, err)
	defer l.Close()
	nc, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer nc.Close()
	assert.Equal(t, seen{false, true}, <-got, "watched from the first OnReadable")
	_, err = nc.Write([]byte("hi"))
	require.NoError(t, err)
	assert.Equal(t, "hi", <-data)

	nc2, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer nc2.Close()
	assert.Equal(t, seen{false, false}, <-got)
	require.NoError(t, nc2.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = nc2.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "closed by the server")
}

// A connection whose queued read waits behind other work is reported by
// epoll muteAfter times more at most: then the read interest is left out
// of its watch until the read runs, instead of the level-triggered watch
// reporting it at every poll meanwhile. The read puts the interest back,
// and what it left unread is reported again. The polls before the read are
// played here by calling the watch's handler.
func TestQueuedReadMutesItsWatch(t *testing.T) {
	s := schedtest.Start(t, 1)
	type state struct{ queued, watchingIn bool }
	states := make(chan state, 4)
	got := make(chan string, 4)
	l, err := Listen(s, "127.0.0.1:0", Config{}, func(c *Conn) {
		reads := 0
		assert.NoError(t, c.OnReadable(lanes.Upstream, func() {
			if reads == 1 {
				states <- state{c.readQueued, c.events&epollIn != 0}
			}
			b := make([]byte, 1) // a byte a call: the rest must be reported again
			n, err := c.Read(b)
			if err != nil {
				if !errors.Is(err, unix.EAGAIN) {
					assert.NoError(t, c.Close())
				}
				return
			}
			reads++
			got <- string(b[:n])
			if reads == 3 {
				assert.NoError(t, c.Close())
			}
		}))
		c.ready(epollIn)
		states <- state{c.readQueued, c.events&epollIn != 0}
		for range muteAfter - 1 {
			c.ready(epollIn)
		}
		states <- state{c.readQueued, c.events&epollIn != 0}
		c.ready(epollIn)
		states <- state{c.readQueued, c.events&epollIn != 0}
	})
	require.NoError(t, err)
	defer l.Close()
	nc, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer nc.Close()
	_, err = nc.Write([]byte("abc"))
	require.NoError(t, err)
	assert.Equal(t, state{queued: true, watchingIn: true}, <-states, "the first report queues the read")
	assert.Equal(t, state{queued: true, watchingIn: true}, <-states, "a few more leave the watch as it was")
	assert.Equal(t, state{queued: true}, <-states, "the last, before the read ran, leaves the interest out")
	var all string
	for range 3 {
		select {
		case b := <-got:
			all += b
		case <-time.After(10 * time.Second):
			t.Fatalf("read %q of \"abc\": the rest was not reported again", all)
		}
	}
	assert.Equal(t, "abc", all)
	assert.Equal(t, state{watchingIn: true}, <-states, "the read put the interest back")
}

// OnHangup: a connection nobody reads learns that its peer has gone,
// without reading, and data arriving does not wake it.
func TestOnHangupWithoutReading(t *testing.T) {
	s := schedtest.Start(t, 1)
	hung := make(chan int, 2)
	watched := make(chan struct{})
	l, err := Listen(s, "127.0.0.1:0", Config{}, func(c *Conn) {
		assert.NoError(t, c.OnHangup(func() {
			n, _ := unix.IoctlGetInt(c.FD(), unix.SIOCINQ)
			hung <- n
			assert.NoError(t, c.Close())
		}))
		close(watched)
	})
	require.NoError(t, err)
	defer l.Close()
	nc, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	<-watched
	_, err = nc.Write([]byte("unread"))
	require.NoError(t, err)
	select {
	case <-hung:
		t.Fatal("data woke a connection that only watches for a hang-up")
	case <-time.After(100 * time.Millisecond):
	}
	require.NoError(t, nc.Close())
	select {
	case n := <-hung:
		assert.Equal(t, len("unread"), n, "nothing was read")
	case <-time.After(10 * time.Second):
		t.Fatal("the hang-up was not reported")
	}
}

// MoveTo: a connection read on one worker moves to another between two
// reads, and is read, written and closed there; one with a write waiting
// for room refuses to move and stays usable.
func TestMoveToAnotherWorker(t *testing.T) {
	t.Run("watched", func(t *testing.T) { testMoveToAnotherWorker(t, false) })
	// The read that moves it ran with its watch muted (Conn.reports): the
	// old worker touches nothing of it after the callback (a data race
	// with the new worker's OnReadable, under -race, when it put the
	// interest back after the callback).
	t.Run("muted", func(t *testing.T) { testMoveToAnotherWorker(t, true) })
}

func testMoveToAnotherWorker(t *testing.T, mute bool) {
	s := schedtest.Start(t, 2)
	type read struct {
		worker int
		data   string
	}
	reads := make(chan read, 4)
	moved := make(chan error, 1)
	l, err := Listen(s, "127.0.0.1:0", Config{Shared: true}, func(c *Conn) {
		var onRead func()
		onRead = func() {
			b := make([]byte, 16)
			n, err := c.Read(b)
			if err != nil {
				if !errors.Is(err, unix.EAGAIN) {
					assert.NoError(t, c.Close())
				}
				return
			}
			reads <- read{c.Worker().ID(), string(b[:n])}
			if string(b[:n]) != "first" {
				assert.NoError(t, c.Write(b[:n], nil))
				return
			}
			from := c.Worker()
			to := s.Worker(1 - from.ID())
			if err := c.MoveTo(to); err != nil {
				moved <- err
				return
			}
			assert.Same(t, to, c.Worker())
			assert.Nil(t, c.watch, "out of the old worker's epoll set")
			moved <- to.Submit(lanes.Upstream, func() {
				assert.NoError(t, c.OnReadable(lanes.Upstream, onRead))
			})
		}
		assert.NoError(t, c.OnReadable(lanes.Upstream, onRead))
		if mute {
			for range 1 + muteAfter {
				c.ready(epollIn)
			}
			assert.Zero(t, c.events&epollIn, "muted")
		}
	})
	require.NoError(t, err)
	defer l.Close()
	nc, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = nc.Write([]byte("first"))
	require.NoError(t, err)
	first := schedtest.Recv(t, reads, "the first read")
	require.NoError(t, schedtest.Recv(t, moved, "the move"))
	_, err = nc.Write([]byte("second"))
	require.NoError(t, err)
	second := schedtest.Recv(t, reads, "the read after the move")
	assert.Equal(t, read{1 - first.worker, "second"}, second, "read on the other worker")
	b := make([]byte, 16)
	n, err := nc.Read(b)
	require.NoError(t, err)
	assert.Equal(t, "second", string(b[:n]), "written from there")
	require.NoError(t, nc.Close())
	select {
	case r := <-reads:
		t.Fatalf("unexpected read %+v", r)
	case <-time.After(20 * time.Millisecond):
	}
}

func TestMoveToRefusesAConnectionInUse(t *testing.T) {
	s := schedtest.Start(t, 2)
	got := make(chan error, 2)
	l, err := Listen(s, "127.0.0.1:0", Config{}, func(c *Conn) {
		to := s.Worker(1 - c.Worker().ID())
		// More than the socket takes at once: the rest waits for room.
		assert.NoError(t, c.Write(make([]byte, 64<<20), func(error) {}))
		got <- c.MoveTo(to)
		assert.NoError(t, c.Close())
		got <- c.MoveTo(to)
	})
	require.NoError(t, err)
	defer l.Close()
	nc, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer nc.Close()
	assert.ErrorIs(t, schedtest.Recv(t, got, "the move"), errBusy, "a write waits for room")
	assert.ErrorIs(t, schedtest.Recv(t, got, "the move"), ErrClosed)
}
