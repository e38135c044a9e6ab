package netpoll

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/sched"
)

// TLS on a worker's connection
//
// crypto/tls's record layer is driven by the worker itself, over the
// non-blocking socket: a Conn that has started TLS (StartTLS) encrypts in
// Write and WriteNow and decrypts in Read and ReadStamped, with no thread
// or goroutine of its own and no system call more than a plain connection
// makes. Two properties of crypto/tls make this work. A read error that
// is a net.Error whose Temporary method reports true does not break a
// tls.Conn: the bytes of a record read so far stay in its buffer and the
// next Read goes on, so the socket below answers "nothing yet" with such
// an error. And a tls.Conn writes each record to the connection below as
// it is sealed, which here takes what the socket takes and queues the
// rest, to be sent at EPOLLOUT like any pending write.
//
// The handshake cannot be driven that way (crypto/tls keeps its first
// error), so Handshake runs it in a coroutine of the worker, which waits
// for the client's messages with the worker released.

// errWouldBlock is what the socket under a tls.Conn answers when nothing
// can be read now: Temporary, so crypto/tls keeps the connection usable.
var errWouldBlock error = wouldBlock{}

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "netpoll: read would block" }
func (wouldBlock) Timeout() bool   { return false }
func (wouldBlock) Temporary() bool { return true }

// tlsState is a Conn's TLS session.
type tlsState struct {
	conn *tls.Conn
	raw  *rawConn
	// more is set when a Read filled its buffer: plaintext or whole
	// records may wait inside conn, where epoll cannot see them, so the
	// read callback is queued again as a level-triggered watch would.
	more bool
}

// rawConn is the net.Conn under a tls.Conn: the worker's socket, read and
// written without blocking, or a goroutine's while one blocks on it.
type rawConn struct {
	c   *Conn
	pre []byte // bytes read before the handshake began, read first

	// stamp is the kernel's receive stamp of the first socket read since
	// ReadStamped reset it (when stamps is set).
	stamps bool
	stamp  int64

	// wait, set during Handshake, waits for the socket to be readable
	// (or the handshake to time out) instead of answering errWouldBlock.
	wait func() error

	// readBlock and writeBlock are set while a goroutine off the worker
	// reads or writes the connection through ReadBlocking or
	// WriteBlocking: the socket is then waited for in poll(2), under
	// readDL or writeDL. The worker may meanwhile use the other direction
	// (it reads behind a response a helper goroutine writes), so each
	// direction has its own, and the flags are atomic.
	readBlock, writeBlock atomic.Bool
	readDL, writeDL       Deadline

	// gc is the connection moved to Go's poller (Detach): every call goes
	// to it. flushed, when set, closes once the records the worker had
	// queued at the move are written, by a goroutine of their own, with
	// flushErr its error: a write waits for it.
	gc       net.Conn
	flushed  chan struct{}
	flushErr error
}

// StartTLS makes c a TLS server connection configured by cfg: call
// Handshake next, from a coroutine on c's worker. pre holds bytes already
// read from the socket (the start of the ClientHello), which crypto/tls
// reads first.
func (c *Conn) StartTLS(cfg *tls.Config, pre []byte) error {
	if c.closed {
		return ErrClosed
	}
	if c.tls != nil {
		return errors.New("netpoll: StartTLS on a TLS connection")
	}
	raw := &rawConn{c: c, pre: pre}
	c.tls = &tlsState{conn: tls.Server(raw, cfg), raw: raw}
	return nil
}

// TLS returns the connection's TLS session, or nil on a plain connection.
func (c *Conn) TLS() *tls.Conn {
	if c.tls == nil {
		return nil
	}
	return c.tls.conn
}

// Handshake runs the server side of the TLS handshake in the coroutine
// that ctx belongs to, which must be on c's worker: the computing runs
// there, and while the handshake waits for the client the coroutine is
// suspended and the worker does other work. To bound it in time, close c
// (from a timer): the handshake then fails with ErrClosed. It leaves c
// without a read callback.
func (c *Conn) Handshake(ctx context.Context) error {
	if c.tls == nil {
		return errors.New("netpoll: Handshake without StartTLS")
	}
	if !sched.InCoroutine(ctx) {
		return errors.New("netpoll: Handshake outside a coroutine")
	}
	var resume func()
	wake := func() {
		if r := resume; r != nil {
			resume = nil
			r()
		}
	}
	c.hsWake = wake
	c.tls.raw.wait = func() error {
		err := sched.Pause(ctx, func(r func()) {
			resume = r
			if err := c.OnReadable(lanes.Continuation, wake); err != nil {
				resume = nil
				r()
			}
		})
		if err == nil && c.closed {
			err = ErrClosed
		}
		return err
	}
	defer func() {
		c.hsWake = nil
		c.tls.raw.wait = nil
		if !c.closed {
			_ = c.OnReadable(lanes.Continuation, nil)
		}
	}()
	if err := c.tls.conn.HandshakeContext(ctx); err != nil {
		return err
	}
	// The client may have sent its first request with its last handshake
	// message: a reader must look inside conn before waiting for epoll.
	c.tls.more = true
	return nil
}

// tlsRead fills p with plaintext until it is full or nothing more can be
// read without waiting.
func (c *Conn) tlsRead(p []byte) (int, error) {
	t := c.tls
	n := 0
	for n < len(p) {
		m, err := t.conn.Read(p[n:])
		n += m
		if err == nil {
			continue
		}
		t.more = false
		switch {
		case err == errWouldBlock:
			if n > 0 {
				return n, nil
			}
			return 0, syscall.EAGAIN
		case n > 0:
			// Deliver what came; the next read reports the end or error.
			return n, nil
		case err == io.EOF || err == ErrEOF:
			return 0, ErrEOF
		}
		return 0, err
	}
	t.more = true
	c.QueueRead()
	return n, nil
}

// Queued reports whether bytes the connection took wait to be sent: after
// a WriteNow that took all of p on a TLS connection, sealed records the
// socket had no room for. Write (of what is left of p, possibly nothing)
// waits for them.
func (c *Conn) Queued() bool { return c.pending != nil }

// Read implements net.Conn for crypto/tls.
func (r *rawConn) Read(p []byte) (int, error) {
	if r.gc != nil {
		return r.gc.Read(p)
	}
	if len(r.pre) > 0 {
		n := copy(p, r.pre)
		r.pre = r.pre[n:]
		if len(r.pre) == 0 {
			r.pre = nil
		}
		return n, nil
	}
	c := r.c
	block := r.readBlock.Load()
	for {
		if !block && c.closed {
			return 0, ErrClosed
		}
		var n int
		var err error
		if r.stamps && r.stamp == 0 {
			var oob [64]byte
			var oobn int
			n, oobn, err = recvFD(c.fd, p, oob[:])
			if err == nil {
				r.stamp = parseStamp(oob[:oobn])
			}
		} else {
			n, err = readFD(c.fd, p)
		}
		switch {
		case err == nil:
			return n, nil
		case err == ErrEOF:
			return 0, io.EOF
		case err != syscall.EAGAIN:
			return 0, err
		case r.wait != nil:
			if err := r.wait(); err != nil {
				return 0, err
			}
		case block:
			wait, err := waitFor(r.readDL)
			if err != nil {
				return 0, err
			}
			if err := pollFor(c.fd, pollIn, wait); err != nil {
				return 0, err
			}
		default:
			return 0, errWouldBlock
		}
	}
}

// Write implements net.Conn for crypto/tls: on the worker it never
// blocks, queueing what the socket does not take; for a goroutine in
// WriteBlocking it waits for room.
func (r *rawConn) Write(p []byte) (int, error) {
	if r.gc != nil {
		if r.flushed != nil {
			<-r.flushed
			if err := r.flushErr; err != nil {
				return 0, err
			}
		}
		return r.gc.Write(p)
	}
	c := r.c
	if r.writeBlock.Load() {
		if err := WriteBlockingDeadline(c.fd, p, r.writeDL); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	if c.closed {
		return 0, ErrClosed
	}
	if c.pending != nil {
		c.pending = append(c.pending, p...)
		return len(p), nil
	}
	rest, err := writeFD(c.fd, p)
	if err != nil {
		return 0, err
	}
	if len(rest) > 0 {
		// p is crypto/tls's scratch buffer: keep a copy.
		c.pending = append([]byte(nil), rest...)
		if err := c.setEvents(c.wantEvents()); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Close implements net.Conn: the worker's socket is closed by Conn.Close.
func (r *rawConn) Close() error {
	if r.gc != nil {
		return r.gc.Close()
	}
	return nil
}

func (r *rawConn) LocalAddr() net.Addr {
	if r.gc != nil {
		return r.gc.LocalAddr()
	}
	if ap, err := r.c.LocalAddr(); err == nil {
		return net.TCPAddrFromAddrPort(ap)
	}
	return nil
}

func (r *rawConn) RemoteAddr() net.Addr {
	if r.gc != nil {
		return r.gc.RemoteAddr()
	}
	return net.TCPAddrFromAddrPort(r.c.remote)
}

// The deadlines are the caller's business on the worker (its timers) and
// Go's once the connection moved there.
func (r *rawConn) SetDeadline(t time.Time) error {
	if r.gc != nil {
		return r.gc.SetDeadline(t)
	}
	return nil
}

func (r *rawConn) SetReadDeadline(t time.Time) error {
	if r.gc != nil {
		return r.gc.SetReadDeadline(t)
	}
	return nil
}

func (r *rawConn) SetWriteDeadline(t time.Time) error {
	if r.gc != nil {
		return r.gc.SetWriteDeadline(t)
	}
	return nil
}

// ReadBlocking reads at least one byte into p, blocking the calling
// goroutine in poll(2) while there is nothing to read, under dl (nil: no
// deadline), and returns ErrEOF at the end of the stream; a passed
// deadline fails it with os.ErrDeadlineExceeded. It is for a goroutine off
// the worker, at a time the worker neither reads nor closes the
// connection: on a plain connection it is ReadBlockingDeadline on FD, on a
// TLS connection it decrypts.
func (c *Conn) ReadBlocking(p []byte, dl Deadline) (int, error) {
	if c.tls == nil {
		return ReadBlockingDeadline(c.fd, p, dl)
	}
	if _, err := waitFor(dl); err != nil {
		return 0, err
	}
	r := c.tls.raw
	r.readDL = dl
	r.readBlock.Store(true)
	defer r.readBlock.Store(false)
	n, err := c.tls.conn.Read(p)
	switch {
	case n > 0:
		return n, nil
	case err == io.EOF:
		return 0, ErrEOF
	case errors.Is(err, os.ErrDeadlineExceeded):
		return 0, os.ErrDeadlineExceeded
	}
	return n, err
}

// WriteBlocking writes all of p, blocking the calling goroutine in poll(2)
// while the socket's buffer is full, under dl, like ReadBlocking: on a
// plain connection it is WriteBlockingDeadline on FD, on a TLS connection
// it encrypts. Nothing the worker wrote may still be queued (Queued).
func (c *Conn) WriteBlocking(p []byte, dl Deadline) error {
	if c.tls == nil {
		return WriteBlockingDeadline(c.fd, p, dl)
	}
	r := c.tls.raw
	r.writeDL = dl
	r.writeBlock.Store(true)
	defer r.writeBlock.Store(false)
	if _, err := c.tls.conn.Write(p); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return os.ErrDeadlineExceeded
		}
		return err
	}
	return nil
}

// Detach hands the connection's TLS session to Go's network poller, for a
// server giving the connection away (http.Hijacker): gc is a net.Conn on a
// duplicate of the socket, and the returned tls.Conn reads and writes
// through it from now on, with what it had buffered. Records queued for
// the socket are written first, through gc by a goroutine of their own,
// so that the caller never waits for a client that does not read: a write
// on the tls.Conn waits for them (under gc's write deadline), a read does
// not, and closing gc ends them. The worker's Conn must be closed after.
func (c *Conn) Detach(gc net.Conn) (*tls.Conn, error) {
	if c.tls == nil {
		return nil, errors.New("netpoll: Detach of a plain connection")
	}
	r := c.tls.raw
	r.gc = gc
	if p := c.pending; p != nil {
		c.pending = nil
		done := make(chan struct{})
		r.flushed = done
		go func() {
			defer close(done)
			_, r.flushErr = gc.Write(p)
		}()
	}
	return c.tls.conn, nil
}
