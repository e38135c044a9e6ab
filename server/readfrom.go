package server

import (
	"errors"
	"io"
	"net/http"
	"os"
	"syscall"

	"github.com/sluice-go/sluice/netpoll"
	"github.com/sluice-go/sluice/sched"
)

// copyBufSize is the size of ReadFrom's copy buffers, io.Copy's own.
const copyBufSize = 32 << 10

// ReadFrom copies src into the response body until src ends, and returns
// how many bytes it copied; io.Copy and io.CopyN call it, and so do
// http.ServeContent and http.FileServer. A regular file (an *os.File, or an
// io.LimitedReader over one, which is what http.ServeContent passes) goes
// by sendfile(2) on a plain connection once the response has a
// Content-Length and a Content-Type (as http.ServeContent sets them): from
// the page cache to the socket, with no copy through the process, as
// net/http sends it. Anything else, and a file over TLS, is read into a
// buffer the server keeps for copies, so that a copy allocates none. The
// body's rules are Write's (a Content-Length is not exceeded, HEAD sends
// nothing).
func (w *ResponseWriter) ReadFrom(src io.Reader) (int64, error) {
	if w.returned.Load() {
		return 0, errWriterDone
	}
	var sent int64
	if f, limit, ok := regularFile(src); ok {
		n, finished, err := w.sendFile(f, limit)
		sent += n
		if lr, ok := src.(*io.LimitedReader); ok {
			lr.N -= n
		}
		if err != nil || finished {
			return sent, err
		}
	}
	n, err := w.copyFrom(src)
	return sent + n, err
}

// copyFrom is ReadFrom through a buffer of the server's.
func (w *ResponseWriter) copyFrom(src io.Reader) (int64, error) {
	bp, _ := w.c.srv.copyBufs.Get().(*[copyBufSize]byte)
	if bp == nil {
		bp = new([copyBufSize]byte)
	}
	defer w.c.srv.copyBufs.Put(bp)
	var total int64
	for {
		n, rerr := src.Read(bp[:])
		if n > 0 {
			k, werr := w.Write(bp[:n])
			total += int64(k)
			if werr != nil {
				return total, werr
			}
		}
		if rerr == io.EOF {
			return total, nil
		}
		if rerr != nil {
			return total, rerr
		}
	}
}

// fileConn is what ReadFrom needs of a file to send it by sendfile(2):
// its descriptor, and whether it is a regular file. *os.File has both, and
// so has the wrapper of one that os.File.WriteTo hands to io.Copy.
type fileConn interface {
	syscall.Conn
	Stat() (os.FileInfo, error)
}

// regularFile returns the regular file src reads, and how much of it src
// lets be read (-1: to its end), if it is one or an io.LimitedReader over
// one.
func regularFile(src io.Reader) (f fileConn, limit int64, ok bool) {
	limit = -1
	if lr, isLimited := src.(*io.LimitedReader); isLimited {
		src, limit = lr.R, lr.N
	}
	f, ok = src.(fileConn)
	if !ok {
		return nil, 0, false
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, 0, false
	}
	return f, limit, true
}

// sendFile sends what it can of f (up to limit bytes, -1: to its end) by
// sendfile(2), and reports whether ReadFrom is finished: the file ended, or
// the body is complete, or a write failed. When the response cannot go by
// sendfile (TLS, no Content-Length or Content-Type yet, chunked for
// trailers, HEAD) it sends nothing and leaves the copy to copyFrom.
func (w *ResponseWriter) sendFile(f fileConn, limit int64) (sent int64, finished bool, err error) {
	c := w.c
	if c.w == nil || c.tlsState != nil {
		return 0, false, nil
	}
	defer c.leave(c.enter())
	if w.hijacked {
		return 0, true, http.ErrHijacked
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, true, w.err
	}
	if w.bodyless || !bodyAllowed(w.status) || w.declared < 0 || w.trailers ||
		!w.headerSent && len(w.header["Content-Type"]) == 0 {
		return 0, false, nil
	}
	n := w.declared - w.written
	if limit >= 0 {
		n = min(n, limit)
	}
	if n <= 0 {
		return 0, false, nil
	}
	if err := w.flush(false); err != nil {
		return 0, true, err
	}
	if w.chunking {
		return 0, false, nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	var serr error
	cerr := rc.Control(func(fd uintptr) {
		sent, serr = w.sendFD(int(fd), n)
	})
	w.written += sent
	c.srv.fileBytes.Add(sent)
	if serr == nil {
		serr = cerr
	}
	if serr != nil {
		return sent, true, w.fail(serr)
	}
	// The body is complete, or the file ended before it: the rest (more
	// than the Content-Length, or nothing) is copyFrom's to find.
	return sent, false, nil
}

// sendFD sends n bytes of the file in by sendfile(2), fewer if it ends
// first, waiting off the worker while the socket is full: through the
// worker's poller from the handler's coroutine, with poll(2) from a
// goroutine of the handler's; under the write deadline either way.
func (w *ResponseWriter) sendFD(in int, n int64) (int64, error) {
	c := w.c
	if !sched.InCoroutine(w.ctx) {
		sent, err := netpoll.SendFileBlockingDeadline(c.fd, in, n, c.writeLeft)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = c.timeoutError("write")
		}
		return sent, err
	}
	var sent int64
	for sent < n {
		if c.writeDeadlinePassed() {
			return sent, c.timeoutError("write")
		}
		k, err := c.nc.SendFile(in, n-sent)
		sent += k
		switch {
		case err == syscall.EAGAIN:
			if err := c.awaitWrite(w.ctx, c.nc.WaitWritable); err != nil {
				return sent, err
			}
		case err != nil || k == 0:
			return sent, err
		}
	}
	return sent, nil
}
