package await

import (
	"context"
	"io"
	"net/http"
	"sync"

	"github.com/sluice-go/sluice/sched"
)

// Transport is an http.RoundTripper that waits off the worker: in a
// coroutine (see the package documentation), RoundTrip runs Base's round
// trip through sched.Await with the request's context, and every Read and
// Close of the response body goes through sched.Await with that context too,
// since a body read may wait on the network. Elsewhere it behaves exactly as
// Base. The zero value is usable.
//
// The response body it returns has no optional methods besides Write: it
// implements io.Writer, each Write waiting off the worker as well, exactly
// when Base's body does (the io.ReadWriteCloser of a 101 Switching Protocols
// response). It deliberately hides io.WriterTo and others, which would wait
// without releasing the worker.
//
// If the scheduler cancels the coroutine while Base's round trip runs,
// RoundTrip returns sched.ErrStopped at once; the round trip goes on in the
// background and its response, if any, is closed. Close of a body always
// closes it, in place if the coroutine has been cancelled.
type Transport struct {
	// Base performs the round trips; nil means http.DefaultTransport.
	Base http.RoundTripper
	// NoDeadlineHeader stops RoundTrip from sending the time left before
	// the request context's deadline (see withTimeout).
	NoDeadlineHeader bool
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

// RoundTrip implements http.RoundTripper: it runs Base.RoundTrip(req),
// releasing the worker meanwhile when called from a coroutine, and wraps the
// response body so that reading it does the same.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base()
	ctx := req.Context()
	if !t.NoDeadlineHeader {
		req = withTimeout(req)
	}
	resp, err, out := run(ctx, func(context.Context) (*http.Response, error) {
		return base.RoundTrip(req)
	}, func(resp *http.Response, _ error) {
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
	})
	if out != ran {
		return nil, err
	}
	if err != nil || resp == nil {
		return resp, err
	}
	if resp.Body != nil && resp.Body != http.NoBody {
		b := &body{ctx: ctx, rc: resp.Body}
		if w, ok := resp.Body.(io.Writer); ok {
			resp.Body = &rwBody{body: b, w: w}
		} else {
			resp.Body = b
		}
	}
	return resp, nil
}

// CloseIdleConnections closes Base's idle connections, if Base has a
// CloseIdleConnections method (as *http.Transport does); http.Client's
// method of the same name relies on it.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// NewClient returns a shallow copy of base whose Transport is wrapped in a
// Transport, so that requests made through it release the worker while
// they wait (see the package documentation). A nil base means a new client
// over http.DefaultTransport; a base whose Transport is already a *Transport
// is copied as is. base itself is not modified.
func NewClient(base *http.Client) *http.Client {
	if base == nil {
		return &http.Client{Transport: &Transport{}}
	}
	c := *base
	if _, ok := c.Transport.(*Transport); !ok {
		c.Transport = &Transport{Base: c.Transport}
	}
	return &c
}

// body is a response body whose Read and Close wait off the worker.
type body struct {
	ctx context.Context // the request's
	rc  io.ReadCloser
}

func (b *body) Read(p []byte) (int, error) {
	if !sched.InCoroutine(b.ctx) {
		return b.rc.Read(p)
	}
	// Read into a buffer of our own: if the read is abandoned it goes on
	// after Read returns, and must not write into the caller's p then.
	bp := getBuf(0)
	buf := (*bp)[:min(len(p), bufSize)]
	n, err, out := run(b.ctx, func(context.Context) (int, error) {
		return b.rc.Read(buf)
	}, func(int, error) { putBuf(bp) })
	switch out {
	case skipped:
		putBuf(bp)
		return 0, err
	case abandoned:
		return 0, err
	}
	copy(p, buf[:n])
	putBuf(bp)
	return n, err
}

func (b *body) Close() error {
	_, err, out := run(b.ctx, func(context.Context) (struct{}, error) {
		return struct{}{}, b.rc.Close()
	}, nil)
	if out == skipped {
		// The scheduler cancelled the coroutine: close anyway, in place,
		// rather than leak the connection. net/http's bodies allow this
		// even while an abandoned Read is still under way.
		return b.rc.Close()
	}
	return err
}

// rwBody is a body that is also an io.Writer, such as that of a 101
// Switching Protocols response; its Write waits off the worker too.
type rwBody struct {
	*body
	w io.Writer
}

func (b *rwBody) Write(p []byte) (int, error) {
	if !sched.InCoroutine(b.ctx) {
		return b.w.Write(p)
	}
	// Write a copy, for the same reason as in Read: an abandoned write
	// still reads its buffer after Write returns.
	bp := getBuf(len(p))
	buf := append((*bp)[:0], p...)
	n, err, out := run(b.ctx, func(context.Context) (int, error) {
		return b.w.Write(buf)
	}, func(int, error) { putBuf(bp) })
	if out == abandoned {
		return 0, err
	}
	putBuf(bp)
	return n, err
}

// Buffers for body reads and writes in coroutines.
const bufSize = 32 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

// getBuf returns a buffer of bufSize bytes from the pool, or a new one of n
// bytes when n is larger (which putBuf does not keep).
func getBuf(n int) *[]byte {
	if n > bufSize {
		b := make([]byte, n)
		return &b
	}
	return bufPool.Get().(*[]byte)
}

func putBuf(bp *[]byte) {
	if cap(*bp) == bufSize {
		bufPool.Put(bp)
	}
}
