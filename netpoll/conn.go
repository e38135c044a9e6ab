package netpoll

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"syscall"
	"time"

	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/sched"
)

// ErrClosed is returned by the methods of a closed Conn.
var ErrClosed = errors.New("netpoll: connection closed")

// Conn is a non-blocking TCP connection owned by one worker. Its methods are
// local: call them only from code running on that worker (callbacks, tasks,
// coroutines there).
type Conn struct {
	w      *sched.Worker
	fd     int
	remote netip.AddrPort
	watch  *sched.Watch
	events uint32

	onReadable func()
	readyFn    func() // c.readReady and c.flush, bound once: a method value
	flushFn    func() // made per Push would allocate per event
	readLane   lanes.ID
	readQueued bool // a read callback is queued: don't queue another
	// reports counts readiness's reports of a queued read that waits its
	// turn; at muteAfter the read interest is left out of the watch until
	// the read runs (see ready).
	reports uint8
	flushQd bool // a flush is queued

	onHangup func() // OnHangup's callback
	hangupFn func() // c.hangupReady, bound once
	hangupQd bool   // a hang-up callback is queued

	pending   []byte // bytes of a write that would have blocked
	onWritten func(error)
	closed    bool

	tls    *tlsState // nil on a plain connection (StartTLS)
	hsWake func()    // wakes a Handshake waiting for the client
}

func newConn(w *sched.Worker, fd int, sa sockaddr) *Conn {
	setNoDelay(fd)
	c := &Conn{w: w, fd: fd, remote: addrPort(sa), events: idleEvents}
	c.readyFn, c.flushFn = c.readReady, c.flush
	// The socket joins the worker's epoll set with the first interest in
	// it (setEvents): one epoll_ctl instead of two for a connection that is
	// read at once, as almost all are. Until then it is as if watched with
	// idleEvents, whose events (a hang-up) do nothing without a reader or a
	// pending write.
	return c
}

// Worker returns the worker that owns the connection.
func (c *Conn) Worker() *sched.Worker { return c.w }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() netip.AddrPort { return c.remote }

// FD returns the socket descriptor, for socket options.
func (c *Conn) FD() int { return c.fd }

// OnReadable asks for fn to be queued in lane each time the connection has
// data to read (or the peer closed it); nil stops reading. The watch is
// level-triggered: data left unread makes fn run again, so a handler may read
// a bounded amount per call (a read budget) and let other connections run.
func (c *Conn) OnReadable(lane lanes.ID, fn func()) error {
	if c.closed {
		return ErrClosed
	}
	c.onReadable, c.readLane = fn, lane
	if c.tls != nil && c.tls.more {
		// Plaintext may wait inside the TLS session, where epoll does
		// not see it.
		c.QueueRead()
	}
	return c.setEvents(c.wantEvents())
}

// Read reads what is available without blocking. It returns syscall.EAGAIN
// when nothing is, and ErrEOF once the peer has closed its side.
func (c *Conn) Read(p []byte) (int, error) {
	if c.closed {
		return 0, ErrClosed
	}
	if c.tls != nil {
		return c.tlsRead(p)
	}
	return readFD(c.fd, p)
}

// ReadStamped is Read that also returns when the kernel received the last
// packet of the bytes read, in nanoseconds since the Unix epoch
// (CLOCK_REALTIME, as time.Now), or 0 when the kernel gave no stamp: the
// listener's Config.Timestamps was off, or nothing was read. The stamp
// tells how long the bytes waited in the socket's receive queue; a caller
// wanting the age of a message should take the stamp of the read that
// brought its first bytes.
func (c *Conn) ReadStamped(p []byte) (n int, stamp int64, err error) {
	if c.closed {
		return 0, 0, ErrClosed
	}
	if t := c.tls; t != nil {
		t.raw.stamps, t.raw.stamp = true, 0
		n, err := c.tlsRead(p)
		stamp := t.raw.stamp
		t.raw.stamps = false
		return n, stamp, err
	}
	// SOL_SOCKET/SCM_TIMESTAMPNS: a cmsghdr (16 bytes on 64-bit Linux,
	// 12 on 32-bit, padded to the word) then a timespec.
	var oob [64]byte
	n, oobn, err := recvFD(c.fd, p, oob[:])
	if err != nil {
		return 0, 0, err
	}
	return n, parseStamp(oob[:oobn]), nil
}

// ReadBlocking reads at least one byte from the non-blocking socket fd into
// p, blocking the calling goroutine in poll(2) while there is nothing to
// read, and returns ErrEOF at the end of the stream. It is for a goroutine
// off the worker (a handler's helper goroutine, say) reading a Conn's FD at
// a time the worker neither reads nor closes it; on the worker, use
// Conn.Read and Conn.OnReadable.
func ReadBlocking(fd int, p []byte) (int, error) { return ReadBlockingDeadline(fd, p, nil) }

// WriteBlocking writes all of p to the non-blocking socket fd, blocking the
// calling goroutine in poll(2) while the socket's buffer is full. Like
// ReadBlocking, it is for a goroutine off the worker, at a time the worker
// neither writes nor closes the connection.
func WriteBlocking(fd int, p []byte) error { return WriteBlockingDeadline(fd, p, nil) }

// A Deadline tells a blocking read or write how long it may still wait:
// limited false for as long as it takes, else left, which is zero or
// negative once the deadline has passed. The wait asks again each time it
// wakes, and wakes at least every MaxDeadlinePoll, so a deadline that
// another goroutine sets or moves while a read or write waits takes effect
// within that time. It is called on the waiting goroutine.
type Deadline func() (left time.Duration, limited bool)

// MaxDeadlinePoll is the longest a read or write of ReadBlockingDeadline
// and WriteBlockingDeadline sleeps in poll(2) before it asks its Deadline
// again.
const MaxDeadlinePoll = 250 * time.Millisecond

// ReadBlockingDeadline is ReadBlocking with a deadline: once dl says it
// has passed, the read fails with os.ErrDeadlineExceeded, before reading
// anything (as a net.Conn's read does). A nil dl never expires.
func ReadBlockingDeadline(fd int, p []byte, dl Deadline) (int, error) {
	for {
		wait, err := waitFor(dl)
		if err != nil {
			return 0, err
		}
		n, err := readFD(fd, p)
		if err != syscall.EAGAIN {
			return n, err
		}
		if err := pollFor(fd, pollIn, wait); err != nil {
			return 0, err
		}
	}
}

// WriteAvailable writes what the non-blocking socket fd takes of p now,
// without waiting, from any goroutine, and returns the rest: empty when
// all of p went.
func WriteAvailable(fd int, p []byte) (rest []byte, err error) { return writeFD(fd, p) }

// WriteBlockingDeadline is WriteBlocking with a deadline: once dl says it
// has passed, the write fails with os.ErrDeadlineExceeded, having written
// some of p or none. A nil dl never expires.
func WriteBlockingDeadline(fd int, p []byte, dl Deadline) error {
	for {
		wait, err := waitFor(dl)
		if err != nil {
			return err
		}
		rest, err := writeFD(fd, p)
		if err != nil || len(rest) == 0 {
			return err
		}
		p = rest
		if err := pollFor(fd, pollOut, wait); err != nil {
			return err
		}
	}
}

// SendFileBlockingDeadline sends n bytes of the regular file in, from its
// offset (which it advances), to the socket out by sendfile(2), waiting
// with poll(2) while the socket is full, for a goroutine that is not the
// worker's: the bytes sent, fewer than n with a nil error when the file
// ended first. Once dl says it has passed, it fails with
// os.ErrDeadlineExceeded. A nil dl never expires.
func SendFileBlockingDeadline(out, in int, n int64, dl Deadline) (int64, error) {
	var sent int64
	for sent < n {
		wait, err := waitFor(dl)
		if err != nil {
			return sent, err
		}
		k, err := sendFileFD(out, in, n-sent)
		sent += k
		switch {
		case err == syscall.EAGAIN:
			if err := pollFor(out, pollOut, wait); err != nil {
				return sent, err
			}
		case err != nil || k == 0:
			return sent, err
		}
	}
	return sent, nil
}

// waitFor returns how long poll(2) may sleep under dl, or
// os.ErrDeadlineExceeded when dl has passed. Without a Deadline it sleeps
// until the descriptor is ready.
func waitFor(dl Deadline) (time.Duration, error) {
	if dl == nil {
		return -1, nil
	}
	left, limited := dl()
	if !limited {
		return MaxDeadlinePoll, nil
	}
	if left <= 0 {
		return 0, os.ErrDeadlineExceeded
	}
	return min(left, MaxDeadlinePoll), nil
}

// ErrEOF reports that the peer closed its side of the connection.
var ErrEOF = errors.New("netpoll: end of stream")

// SendFile sends up to n bytes of the regular file in, from its offset
// (which it advances), by sendfile(2): from the page cache to the socket,
// without a copy through the process. It sends what the socket takes now
// and returns how much, with syscall.EAGAIN when the socket is full before
// n (WaitWritable then says when to go on), and 0 with a nil error when the
// file has no more. A TLS connection cannot: its bytes must be sealed by
// the process, and SendFile fails with errors.ErrUnsupported. It does not
// wait for a Write in progress: it fails with an error.
func (c *Conn) SendFile(in int, n int64) (int64, error) {
	switch {
	case c.closed:
		return 0, ErrClosed
	case c.tls != nil:
		return 0, fmt.Errorf("netpoll: sendfile on a TLS connection: %w", errors.ErrUnsupported)
	case c.writing():
		return 0, errInProgress
	}
	return sendFileFD(c.fd, in, n)
}

// WaitWritable calls done, in the Continuation lane, once the socket has
// room for more bytes, for a writer that sends by other means than Write
// (SendFile), or with the error that ended the wait: the connection closed,
// or AbortWrite (a write deadline). It counts as a Write in progress.
func (c *Conn) WaitWritable(done func(error)) error {
	switch {
	case c.closed:
		return ErrClosed
	case c.tls != nil:
		return fmt.Errorf("netpoll: WaitWritable on a TLS connection: %w", errors.ErrUnsupported)
	case c.writing():
		return errInProgress
	case done == nil:
		return errors.New("netpoll: WaitWritable with a nil callback")
	}
	// Nothing to write, but a write waits (a non-nil pending, which
	// costs no allocation): flush finds no bytes and calls done.
	c.pending, c.onWritten = []byte{}, done
	return c.setEvents(c.wantEvents())
}

// Write writes all of p. What the socket takes at once is written now; the
// rest waits for EPOLLOUT without blocking the worker. done, if not nil, runs
// in the Continuation lane once everything is written or the write failed;
// a second Write before then is an error. p must not be modified until done.
// On a TLS connection p is encrypted at once, and done waits for the
// records queued before it as well.
func (c *Conn) Write(p []byte, done func(error)) error {
	if c.closed {
		return ErrClosed
	}
	if c.writing() {
		return errInProgress
	}
	if c.tls != nil {
		var err error
		if len(p) > 0 {
			_, err = c.tls.conn.Write(p)
		}
		if err != nil || c.pending == nil {
			if done != nil {
				c.w.Push(lanes.Continuation, func() { done(err) })
			}
			return nil
		}
		c.onWritten = done
		return nil
	}
	rest, err := c.writeSome(p)
	if err != nil || len(rest) == 0 {
		if done != nil {
			c.w.Push(lanes.Continuation, func() { done(err) })
		}
		return nil
	}
	c.pending, c.onWritten = rest, done
	return c.setEvents(c.wantEvents())
}

// WriteNow writes what the socket takes of p without waiting and returns how
// much that was: less than len(p), with a nil error, when the socket's
// buffer is full. It fails while a Write is in progress. Follow it with
// Write for the rest to wait for room. A TLS connection takes all of p,
// encrypted, and queues the records the socket has no room for: Queued
// reports them, and a Write (of nothing) waits for them.
func (c *Conn) WriteNow(p []byte) (int, error) {
	if c.closed {
		return 0, ErrClosed
	}
	if c.writing() {
		return 0, errInProgress
	}
	if c.tls != nil {
		if _, err := c.tls.conn.Write(p); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	rest, err := c.writeSome(p)
	return len(p) - len(rest), err
}

func (c *Conn) writeSome(p []byte) ([]byte, error) { return writeFD(c.fd, p) }

var errInProgress = errors.New("netpoll: write already in progress")

// writing reports whether a Write waits for room: one with a callback, or
// on a plain connection any (a TLS connection may also queue records with
// no Write waiting, see WriteNow).
func (c *Conn) writing() bool { return c.onWritten != nil || c.pending != nil && c.tls == nil }

// idleEvents is the interest of a connection nobody reads or writes: none,
// edge-triggered, so that a hang-up (which epoll always reports) wakes the
// worker once instead of at every poll.
const idleEvents = epollET

func (c *Conn) wantEvents() uint32 {
	ev := uint32(0)
	switch {
	case c.onReadable != nil:
		if c.reports < muteAfter {
			ev |= epollIn | epollRDHup
		}
	case c.onHangup != nil:
		ev |= epollRDHup
	}
	if c.pending != nil {
		ev |= epollOut
	}
	if ev == 0 {
		return idleEvents
	}
	return ev
}

func (c *Conn) setEvents(ev uint32) error {
	if ev == c.events {
		return nil
	}
	if c.watch == nil {
		wt, err := c.w.Watch(c.fd, ev, c.ready)
		if err != nil {
			return err
		}
		c.watch, c.events = wt, ev
		return nil
	}
	c.events = ev
	return c.watch.Modify(ev)
}

// muteAfter is how many times readiness may report a connection again
// while its queued read waits its turn before the read interest is left
// out of its watch until the read runs (Conn.reports). A level-triggered
// watch reports it at every poll until then: with a line of 2,000
// connections, a tenth of the server's CPU went to polls that found only
// those. Leaving the interest out and putting it back costs two epoll_ctl
// calls, more than a few reports: muting at the second report cost a
// kept-alive hello, whose reads wait behind a short line, 6% more CPU per
// request. The read puts the interest back (readReady), and the kernel
// then reports what is still unread.
const muteAfter = 8

// ready is the watch handler, inline on the worker during a poll.
func (c *Conn) ready(ev uint32) {
	if c.closed {
		return
	}
	// Level-triggered events repeat at every poll until served: queue at
	// most one callback of each kind.
	if ev&(epollOut|epollErr|epollHup) != 0 && c.pending != nil && !c.flushQd {
		c.flushQd = true
		c.w.Push(lanes.Continuation, c.flushFn)
	}
	if ev&(epollIn|epollRDHup|epollErr|epollHup) != 0 {
		if c.readQueued && c.onReadable != nil && c.reports < muteAfter {
			if c.reports++; c.reports == muteAfter {
				_ = c.setEvents(c.wantEvents())
			}
		}
		c.QueueRead()
	}
	if ev&(epollRDHup|epollErr|epollHup) != 0 && c.onReadable == nil && c.onHangup != nil && !c.hangupQd {
		c.hangupQd = true
		c.w.Push(c.readLane, c.hangupFn)
	}
}

// OnHangup asks for fn to be queued, in the read callback's lane, when the
// peer closes or resets the connection while nobody reads it (OnReadable
// with nil): data arriving does not call it, and nothing is read. A
// connection left unread for a while (the sluice server's held
// connections) learns so that its client has gone. nil stops it; a read
// callback set meanwhile takes precedence.
func (c *Conn) OnHangup(fn func()) error {
	if c.closed {
		return ErrClosed
	}
	if fn != nil && c.hangupFn == nil {
		c.hangupFn = c.hangupReady
	}
	c.onHangup = fn
	return c.setEvents(c.wantEvents())
}

func (c *Conn) hangupReady() {
	c.hangupQd = false
	if !c.closed && c.onReadable == nil && c.onHangup != nil {
		c.onHangup()
	}
}

// QueueRead queues the read callback in its lane as readiness would, for a
// caller that expects data without waiting for the next poll (a client
// usually writes right after connecting); it does nothing when there is no
// callback or one is queued already, and the callback, when it runs, is
// the one set then (none: it does not run).
func (c *Conn) QueueRead() {
	if c.onReadable != nil && !c.readQueued {
		c.readQueued = true
		c.w.Push(c.readLane, c.readyFn)
	}
}

func (c *Conn) readReady() {
	c.readQueued = false
	muted := c.reports >= muteAfter
	c.reports = 0
	if muted && !c.closed {
		// The interest goes back before the callback, not after: the
		// callback may move the connection to another worker (MoveTo),
		// after which nothing of it is this worker's to touch. What the
		// callback reads before the next poll is not reported then, as
		// epoll checks readiness again when it reports.
		_ = c.setEvents(c.wantEvents())
	}
	if !c.closed && c.onReadable != nil {
		c.onReadable()
	}
}

// flush continues a blocked write, as Continuation work.
func (c *Conn) flush() {
	c.flushQd = false
	if c.closed || c.pending == nil {
		return
	}
	rest, err := c.writeSome(c.pending)
	if err == nil && len(rest) > 0 {
		c.pending = rest
		return
	}
	done := c.onWritten
	c.pending, c.onWritten = nil, nil
	_ = c.setEvents(c.wantEvents())
	if done != nil {
		done(err)
	}
}

// AbortWrite abandons a Write still waiting for room in the socket: its
// done callback runs, in the Continuation lane, with err, and what it had
// not written is dropped (what it had is on its way to the peer, so the
// stream is cut: close the connection after). Without such a write it does
// nothing. A server uses it when a write deadline passes.
func (c *Conn) AbortWrite(err error) {
	if c.closed || c.pending == nil {
		return
	}
	done := c.onWritten
	c.pending, c.onWritten = nil, nil
	_ = c.setEvents(c.wantEvents())
	if done != nil {
		c.w.Push(lanes.Continuation, func() { done(err) })
	}
}

// LocalAddr returns the connection's own address (getsockname(2)): on a
// socket listening on every address, the address the client reached.
func (c *Conn) LocalAddr() (netip.AddrPort, error) {
	if c.closed {
		return netip.AddrPort{}, ErrClosed
	}
	return localAddr(c.fd)
}

// Close unwatches and closes the socket. A write still pending is abandoned
// and its done callback runs with ErrClosed.
func (c *Conn) Close() error {
	if c.closed {
		return nil
	}
	if t := c.tls; t != nil && t.raw.gc == nil && c.hsWake == nil {
		// A close_notify alert, if the socket takes it now.
		_ = t.conn.Close()
	}
	c.closed = true
	if wake := c.hsWake; wake != nil {
		wake() // the handshake fails with ErrClosed
	}
	var err error
	if c.watch != nil {
		err = c.watch.Close()
	}
	if cerr := closeFD(c.fd); err == nil {
		err = cerr
	}
	if done := c.onWritten; done != nil {
		c.pending, c.onWritten = nil, nil
		c.w.Push(lanes.Continuation, func() { done(ErrClosed) })
	}
	return err
}

// errBusy is MoveTo's answer for a connection in use.
var errBusy = errors.New("netpoll: connection in use: a write waits, a callback is queued, a TLS handshake runs or a goroutine holds it")

// MoveTo hands the connection to worker to, of the same scheduler, between
// two uses: it leaves this worker's set of watched sockets now, with its
// read and hang-up callbacks dropped, and joins to's with the next
// OnReadable, OnHangup or Write, which must run on to (a task Submitted
// there). Call it on the connection's worker, when nothing of the
// connection is under way: no write waiting for room, no callback queued,
// no TLS handshake, no goroutine reading or writing it (ReadBlocking,
// Detach). It fails otherwise, and the connection stays where it was. Bytes
// that arrive meanwhile wait in the socket: the first OnReadable on to
// reports them.
func (c *Conn) MoveTo(to *sched.Worker) error {
	switch {
	case c.closed:
		return ErrClosed
	case to == nil || to.Scheduler() != c.w.Scheduler():
		return errors.New("netpoll: MoveTo a worker of another scheduler")
	case to == c.w:
		return nil
	case c.pending != nil || c.onWritten != nil || c.readQueued || c.flushQd || c.hangupQd || c.hsWake != nil:
		return errBusy
	case c.tls != nil && (c.tls.raw.gc != nil || c.tls.raw.readBlock.Load() || c.tls.raw.writeBlock.Load()):
		return errBusy
	}
	if c.watch != nil {
		if err := c.watch.Close(); err != nil {
			return err
		}
		c.watch = nil
	}
	c.events = idleEvents
	c.onReadable, c.onHangup = nil, nil
	c.w = to
	return nil
}
