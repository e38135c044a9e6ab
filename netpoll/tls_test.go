//go:build linux

package netpoll

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/internal/selfsigned"
	"github.com/sluice-go/sluice/lanes"
)

// goConn returns a net.Conn of Go's poller on a duplicate of c's socket.
func goConn(t *testing.T, c *Conn) net.Conn {
	fd, err := unix.FcntlInt(uintptr(c.FD()), unix.F_DUPFD_CLOEXEC, 0)
	require.NoError(t, err)
	f := os.NewFile(uintptr(fd), "detached")
	defer f.Close()
	gc, err := net.FileConn(f)
	require.NoError(t, err)
	return gc
}

// TestDetachDoesNotWaitForTheClient: records the worker queued for a
// client that reads nothing are written after Detach by a goroutine, not
// by the worker, which goes on with its work; what the new owner writes
// then follows them, in order.
func TestDetachDoesNotWaitForTheClient(t *testing.T) {
	s := schedtest.Start(t, 1)
	cert, pool, err := selfsigned.New()
	require.NoError(t, err)
	payload := bytes.Repeat([]byte("0123456789abcdef"), (8<<20)/16) // far beyond the socket buffers
	detached := make(chan *tls.Conn, 1)
	var served atomic.Int64
	l, err := Listen(s, "127.0.0.1:0", Config{}, func(c *Conn) {
		require.NoError(t, c.StartTLS(&tls.Config{Certificates: []tls.Certificate{cert}}, nil))
		c.Worker().GoNow(context.Background(), func(ctx context.Context) {
			if !assert.NoError(t, c.Handshake(ctx)) {
				_ = c.Close()
				return
			}
			n, err := c.TLS().Write(payload) // queued: the client reads nothing yet
			assert.NoError(t, err)
			assert.Equal(t, len(payload), n)
			assert.True(t, c.Queued())
			tc, err := c.Detach(goConn(t, c))
			assert.NoError(t, err)
			assert.NoError(t, c.Close())
			detached <- tc
			c.Worker().Push(lanes.Upstream, func() { served.Add(1) })
		})
	})
	require.NoError(t, err)
	defer l.Close()
	raw, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	client := tls.Client(raw, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	defer client.Close()
	require.NoError(t, client.Handshake())

	require.Eventually(t, func() bool { return served.Load() == 1 }, 10*time.Second, time.Millisecond,
		"the worker goes on while the client reads nothing")
	tc := <-detached
	defer tc.Close()
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(payload)+len("after"))
		_, err := io.ReadFull(client, b)
		assert.NoError(t, err)
		got <- b
	}()
	_, err = tc.Write([]byte("after"))
	require.NoError(t, err)
	b := <-got
	assert.True(t, bytes.Equal(payload, b[:len(payload)]), "the queued records come first")
	assert.Equal(t, "after", string(b[len(payload):]))
}
