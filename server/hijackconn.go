package server

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"

	"github.com/sluice-go/sluice/sched"
)

// handlerConn is the net.Conn that Hijack returns over a connection's
// socket (wrapped in a tls.Conn for HTTPS). Read and Write called from the
// handler's own coroutine never hold the worker's thread while they wait:
// what the socket has (or takes) now is read (written) at once, and a wait
// goes through sched.Await, so the coroutine is suspended and the worker
// serves its other connections meanwhile. A WebSocket served inside its
// handler, the loop of the coder/websocket and gorilla/websocket examples,
// so costs a suspended coroutine and a goroutine parked in Go's poller
// while it is idle, as on net/http, and no thread. Called from any other
// goroutine (or after the handler returned) they are the socket's own.
//
// Each Write is whole, as net.Conn's are: a write that waits holds the
// connection's write lock across the wait.
type handlerConn struct {
	net.Conn
	ctx context.Context // the handler's: tells its coroutine from others
	rc  syscall.RawConn // nil when the conn has none: every wait awaits
	wmu sync.Mutex
}

func newHandlerConn(ctx context.Context, nc net.Conn) *handlerConn {
	h := &handlerConn{Conn: nc, ctx: ctx}
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			h.rc = rc
		}
	}
	return h
}

// Read reads into b; in the handler's coroutine a wait for data releases
// the worker.
func (h *handlerConn) Read(b []byte) (int, error) {
	if len(b) == 0 || !sched.InCoroutine(h.ctx) {
		return h.Conn.Read(b)
	}
	if n := h.tryRead(b); n > 0 {
		return n, nil
	}
	// Nothing there now (or an end or error, which the socket's own Read
	// reports at once, in net's words).
	return sched.Await(h.ctx, func(context.Context) (int, error) { return h.Conn.Read(b) })
}

// Write writes b; in the handler's coroutine a wait for room in the
// socket's buffer releases the worker.
func (h *handlerConn) Write(b []byte) (int, error) {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	if len(b) == 0 || !sched.InCoroutine(h.ctx) {
		return h.Conn.Write(b)
	}
	n := h.tryWrite(b)
	if n == len(b) {
		return n, nil
	}
	m, err := sched.Await(h.ctx, func(context.Context) (int, error) { return h.Conn.Write(b[n:]) })
	return n + m, err
}

// tryRead reads what the socket holds now, without waiting; 0 when it
// holds nothing, has ended or fails.
func (h *handlerConn) tryRead(b []byte) int {
	if h.rc == nil {
		return 0
	}
	var n int
	if h.rc.Read(func(fd uintptr) bool {
		n = readNow(fd, b)
		return true
	}) != nil {
		return 0
	}
	return n
}

// tryWrite writes as much of b as the socket takes now, without waiting.
func (h *handlerConn) tryWrite(b []byte) int {
	if h.rc == nil {
		return 0
	}
	var n int
	if h.rc.Write(func(fd uintptr) bool {
		for n < len(b) {
			m := writeNow(fd, b[n:])
			if m <= 0 {
				break
			}
			n += m
		}
		return true
	}) != nil {
		return 0
	}
	return n
}

// NetConn returns the connection under h: the socket as Go's net package
// serves it (a *net.TCPConn for TCP), as net/http's Hijack returns it.
func (h *handlerConn) NetConn() net.Conn { return h.Conn }

// CloseWrite shuts down the sending side of the connection, when the
// connection under it can (TCP).
func (h *handlerConn) CloseWrite() error {
	if c, ok := h.Conn.(interface{ CloseWrite() error }); ok {
		return c.CloseWrite()
	}
	return errors.ErrUnsupported
}

// CloseRead shuts down the reading side of the connection, when the
// connection under it can (TCP).
func (h *handlerConn) CloseRead() error {
	if c, ok := h.Conn.(interface{ CloseRead() error }); ok {
		return c.CloseRead()
	}
	return errors.ErrUnsupported
}
