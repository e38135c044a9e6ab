//go:build linux

package bench

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProcReadings(t *testing.T) {
	rss, threads, err := procStatus(os.Getpid())
	require.NoError(t, err)
	assert.Positive(t, rss)
	assert.Positive(t, threads)
	self := countFDs("self")
	assert.GreaterOrEqual(t, self, 3, "stdin, stdout, stderr at least")
	assert.InDelta(t, self, countFDs(strconv.Itoa(os.Getpid())), 2, "by name or by number, the same process")
	_, _, err = procStatus(1 << 30)
	assert.Error(t, err)
	assert.Equal(t, -1, countFDs("nope"))
}

func TestServeChildProbes(t *testing.T) {
	in, stop := io.Pipe()
	var out strings.Builder
	done := make(chan error, 1)
	go func() {
		done <- serveChild(context.Background(), `{"target":"nethttp","probe":10000000}`, in, &out, nil)
	}()
	time.Sleep(60 * time.Millisecond)
	require.NoError(t, stop.Close())
	require.NoError(t, <-done)

	p := &Process{}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.GreaterOrEqual(t, len(lines), 3, out.String())
	assert.True(t, strings.HasPrefix(lines[0], "listening http://127.0.0.1:"), lines[0])
	probes := 0
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "probe ") {
			probes++
		}
		p.readLine(l)
	}
	assert.GreaterOrEqual(t, probes, 2, "one at once, then every 10 ms")
	r := p.probe.Load()
	require.NotNil(t, r)
	assert.Positive(t, r.Goroutines)
	assert.Positive(t, r.HeapBytes)
	require.NotNil(t, p.Exit, "the exit line")
	assert.True(t, strings.HasPrefix(lines[len(lines)-1], "exit "))
	// In this process, other tests' goroutines may still be ending: the
	// counts can only fall.
	assert.LessOrEqual(t, p.Exit.GoroutinesAfter, p.Exit.GoroutinesBefore)
	assert.LessOrEqual(t, p.Exit.FDsAfter, p.Exit.FDsBefore)
	assert.Nil(t, p.Stats, "net/http has no counters")
}

func TestProcessReadLine(t *testing.T) {
	p := &Process{}
	p.readLine(`stats {"admitted":3}`)
	p.readLine(`probe {"goroutines":7,"heap_bytes":1024}`)
	p.readLine(`exit {"goroutines_before":1,"goroutines_after":2,"fds_before":3,"fds_after":4,"after":5}`)
	p.readLine(`report {"batch":[1,2]}`)
	p.readLine(`probe not json`)
	p.readLine(`other line`)
	assert.JSONEq(t, `{"admitted":3}`, string(p.Stats))
	assert.JSONEq(t, `{"batch":[1,2]}`, string(p.Report))
	r := p.probe.Load()
	require.NotNil(t, r)
	assert.Equal(t, childProbe{Goroutines: 7, HeapBytes: 1024}, r.childProbe)
	assert.Equal(t, &ChildExit{GoroutinesBefore: 1, GoroutinesAfter: 2, FDsBefore: 3, FDsAfter: 4, After: 5}, p.Exit)
}

func TestProcNetAddrs(t *testing.T) {
	assert.Equal(t, [2]string{"0100007F:1F90", "0000000000000000FFFF00000100007F:1F90"},
		procNetAddrs(netip.MustParseAddrPort("127.0.0.1:8080")))
	assert.Equal(t, [2]string{"-", "00000000000000000000000001000000:0050"},
		procNetAddrs(netip.MustParseAddrPort("[::1]:80")))
}

func TestTCPConns(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	addr := l.Addr().(*net.TCPAddr).AddrPort()
	var clients, servers []net.Conn
	defer func() {
		for _, c := range append(clients, servers...) {
			c.Close()
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", l.Addr().String())
		require.NoError(t, err)
		clients = append(clients, c)
	}
	for range 2 {
		s, err := l.Accept()
		require.NoError(t, err)
		servers = append(servers, s)
	}
	// Another address with the same port (a server on ::1, or another
	// process's client there) is not this server's: one connection to it.
	if l6, err := net.Listen("tcp", net.JoinHostPort("::1", strconv.Itoa(int(addr.Port())))); err == nil {
		defer l6.Close()
		c, err := net.Dial("tcp", l6.Addr().String())
		require.NoError(t, err)
		clients = append(clients, c)
		s, err := l6.Accept()
		require.NoError(t, err)
		servers = append(servers, s)
	} else {
		t.Logf("no second address with port %d: %v", addr.Port(), err)
	}
	// Two accepted, one still in the listener's queue (no process has
	// it); the clients' own sockets have another local port.
	est, cw, err := tcpConns(addr)
	require.NoError(t, err)
	assert.Equal(t, 2, est)
	assert.Zero(t, cw)
	// A client closes: its accepted connection waits in CLOSE_WAIT.
	require.NoError(t, clients[0].Close())
	assert.Eventually(t, func() bool {
		est, cw, err = tcpConns(addr)
		return err == nil && est == 1 && cw == 1
	}, 2*time.Second, 10*time.Millisecond, "established %d, close-wait %d", est, cw)
}
