//go:build linux

package netpoll

import (
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/lanes"
)

// until is a Deadline at a fixed time, which a test may move.
type until struct{ at atomic.Int64 } // Unix nanoseconds; 0: none

func (u *until) left() (time.Duration, bool) {
	at := u.at.Load()
	if at == 0 {
		return 0, false
	}
	return time.Until(time.Unix(0, at)), true
}

// TestBlockingDeadlines: a blocked read or write fails with
// os.ErrDeadlineExceeded once its deadline passes, a deadline set while it
// waits takes effect within MaxDeadlinePoll, a passed deadline fails the
// next call at once, and a nil Deadline never expires.
func TestBlockingDeadlines(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	a, b := fds[0], fds[1]
	defer unix.Close(a)
	defer unix.Close(b)

	var dl until
	dl.at.Store(time.Now().Add(100 * time.Millisecond).UnixNano())
	start := time.Now()
	_, err = ReadBlockingDeadline(b, make([]byte, 8), dl.left)
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)
	_, err = ReadBlockingDeadline(b, make([]byte, 8), dl.left)
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded, "a passed deadline fails at once")

	// No deadline while it waits, then one.
	dl.at.Store(0)
	done := make(chan error, 1)
	go func() {
		_, err := ReadBlockingDeadline(b, make([]byte, 8), dl.left)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	dl.at.Store(time.Now().UnixNano())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	case <-time.After(5 * time.Second):
		t.Fatal("a deadline set during the wait did not end it")
	}

	// A write that fills the socket waits, then fails at its deadline.
	dl.at.Store(time.Now().Add(100 * time.Millisecond).UnixNano())
	err = WriteBlockingDeadline(a, make([]byte, 8<<20), dl.left)
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)

	// Bytes that are there are read before a deadline in the future.
	dl.at.Store(time.Now().Add(time.Minute).UnixNano())
	n, err := ReadBlockingDeadline(b, make([]byte, 8), dl.left)
	assert.NoError(t, err)
	assert.Equal(t, 8, n)
	n, err = ReadBlockingDeadline(b, make([]byte, 8), nil)
	assert.NoError(t, err)
	assert.Equal(t, 8, n)
}

// TestAbortWriteEndsAPendingWrite: AbortWrite ends a Write waiting for
// room with the error given, in the Continuation lane, and leaves the
// connection usable (its events no longer ask for EPOLLOUT).
func TestAbortWriteEndsAPendingWrite(t *testing.T) {
	s := schedtest.Start(t, 1)
	type result struct {
		err      error
		local    netip.AddrPort
		localErr error
	}
	results := make(chan result, 1)
	l, err := Listen(s, "127.0.0.1:0", Config{}, func(c *Conn) {
		c.AbortWrite(os.ErrDeadlineExceeded) // nothing pending: nothing happens
		local, lerr := c.LocalAddr()
		assert.NoError(t, c.Write(make([]byte, 64<<20), func(err error) { // on a worker: assert, never require
			results <- result{err: err, local: local, localErr: lerr}
			_ = c.Close()
		}))
		c.Worker().Push(lanes.Upstream, func() { c.AbortWrite(os.ErrDeadlineExceeded) })
	})
	require.NoError(t, err)
	defer l.Close()
	nc, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer nc.Close()
	select {
	case r := <-results:
		assert.ErrorIs(t, r.err, os.ErrDeadlineExceeded)
		assert.NoError(t, r.localErr)
		assert.Equal(t, nc.RemoteAddr().String(), r.local.String(), "LocalAddr is the address the client reached")
	case <-time.After(10 * time.Second):
		t.Fatal("the aborted write's done never ran")
	}
}
