package load

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/bench/internal/wire"
)

// rawClient is the generator's own HTTP/1.1 client: GET requests on a pool
// of kept-alive connections, or on a new connection each, with just enough
// response parsing to tell a 2xx from a rejection and to find the end of
// the body. It spends a fraction of the CPU time of net/http's Transport per
// request (no per-connection goroutines, no header maps), which matters on a
// machine whose CPUs the generator shares with the target.
type rawClient struct {
	addr   string
	head   bool   // HEAD requests: answers have no body
	prefix []byte // "GET /path HTTP/1.1\r\nHost: h\r\n"
	plain  []byte // prefix and the empty line: the request without extras
	dialer net.Dialer
	// tls, for an https URL, makes every connection a TLS client's:
	// HTTP/1.1 by ALPN, the server's certificate not verified (the
	// targets are this machine's, with throwaway certificates), and no
	// session resumption, so that each new connection pays a full
	// handshake.
	tls *tls.Config
	// keep is ClientKeep: a pooled request that passes its deadline
	// leaves its connection to a background read of the late answer
	// (drainLate), which then returns it to the pool.
	keep bool
	// waitDeadline makes a request that finds every connection busy wait
	// for one until its deadline at most (a keeping client always does;
	// so does a client of Config.Clients, whose one connection carries
	// its requests one after the other).
	waitDeadline bool
	ndials       atomic.Int64   // connections dialled
	drains       sync.WaitGroup // the drainLate goroutines

	mu     sync.Mutex
	idle   []*rawConn
	all    map[*rawConn]struct{} // every connection open, for abort
	open   int                   // pooled connections open or being dialled
	limit  int
	waitCh chan struct{} // signalled when a connection becomes available
	closed bool
}

type rawConn struct {
	nc net.Conn
	br *bufio.Reader // reads through the rawConn, which counts
	// read counts the bytes read from nc; written is set once the
	// current request has been written whole. Together they tell a
	// request timed out before any of its answer came.
	read    int64
	written bool
}

// Read reads from the connection and counts the bytes.
func (rc *rawConn) Read(p []byte) (int, error) {
	n, err := rc.nc.Read(p)
	rc.read += int64(n)
	return n, err
}

func newRawClient(target *url.URL, method string, conns int, dialTimeout time.Duration) (*rawClient, error) {
	var tcfg *tls.Config
	port := "80"
	switch target.Scheme {
	case "http":
	case "https":
		port = "443"
		tcfg = &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}, ServerName: target.Hostname()}
	default:
		return nil, fmt.Errorf("load: the built-in client speaks http and https, not %q; pass a Client", target.Scheme)
	}
	host := target.Host
	if target.Port() == "" {
		host = net.JoinHostPort(target.Hostname(), port)
	}
	path := target.RequestURI()
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, path, target.Host)
	prefix := bytes.Clone(b.Bytes())
	b.WriteString("\r\n")
	return &rawClient{
		addr:   host,
		head:   method == http.MethodHead,
		prefix: prefix,
		plain:  b.Bytes(),
		dialer: net.Dialer{Timeout: dialTimeout},
		tls:    tcfg,
		limit:  max(conns, 1),
		waitCh: make(chan struct{}, 1),
		all:    make(map[*rawConn]struct{}),
	}, nil
}

// errClientClosed is returned once close has been called (newSender closes
// the client when the run's context ends).
var errClientClosed = errors.New("load: client closed")

// get returns an idle pooled connection, dials a new one while the pool is
// below its limit, or waits for one to be returned. A keeping client waits
// until the request's deadline at most (its connections are busy with late
// answers); the other until ctx ends, as the generator always did.
func (c *rawClient) get(ctx context.Context, deadline time.Time) (*rawConn, error) {
	var expired <-chan time.Time
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			c.signal() // pass the wake-up on to the next waiter
			return nil, errClientClosed
		}
		if n := len(c.idle); n > 0 {
			rc := c.idle[n-1]
			c.idle = c.idle[:n-1]
			more := n > 1
			c.mu.Unlock()
			if more {
				c.signal() // pass the wake-up on to another waiter
			}
			return rc, nil
		}
		if c.open < c.limit {
			c.open++
			c.mu.Unlock()
			rc, err := c.dial(ctx)
			if err != nil {
				c.release()
			}
			return rc, err
		}
		c.mu.Unlock()
		if (c.keep || c.waitDeadline) && expired == nil {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-c.waitCh:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-expired:
			return nil, os.ErrDeadlineExceeded
		}
	}
}

func (c *rawClient) dial(ctx context.Context) (*rawConn, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, errClientClosed
	}
	nc, err := c.dialer.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, err
	}
	c.ndials.Add(1)
	if c.tls != nil {
		// The handshake comes with the first write, under the
		// request's deadline.
		nc = tls.Client(nc, c.tls)
	}
	rc := &rawConn{nc: nc}
	rc.br = bufio.NewReaderSize(rc, 4096)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		nc.Close()
		return nil, errClientClosed
	}
	c.all[rc] = struct{}{}
	c.mu.Unlock()
	return rc, nil
}

// drop closes a connection that will not be reused.
func (c *rawClient) drop(rc *rawConn) {
	c.mu.Lock()
	delete(c.all, rc)
	c.mu.Unlock()
	rc.nc.Close()
}

// put returns a healthy connection to the pool.
func (c *rawClient) put(rc *rawConn) {
	c.mu.Lock()
	if c.closed {
		c.open--
		delete(c.all, rc)
		c.mu.Unlock()
		rc.nc.Close()
		return
	}
	c.idle = append(c.idle, rc)
	c.mu.Unlock()
	c.signal()
}

// release accounts for a connection closed or never opened.
func (c *rawClient) release() {
	c.mu.Lock()
	c.open--
	c.mu.Unlock()
	c.signal()
}

func (c *rawClient) signal() {
	select {
	case c.waitCh <- struct{}{}:
	default:
	}
}

// close closes every connection, those in use too: their requests end at
// once with an error. The client takes no new request after it.
func (c *rawClient) close() {
	c.mu.Lock()
	c.closed = true
	all := c.all
	c.all = make(map[*rawConn]struct{})
	c.open -= len(c.idle)
	c.idle = nil
	c.mu.Unlock()
	for rc := range all {
		rc.nc.Close()
	}
	c.signal()
	// The late answers' reads end with their connections.
	c.drains.Wait()
}

// dials returns the connections dialled so far.
func (c *rawClient) dials() int64 { return c.ndials.Load() }

// startDrain accounts for a drainLate goroutine about to start; false once
// the client is closed (close then waits for none started after it).
func (c *rawClient) startDrain() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.drains.Add(1)
	return true
}

// drainLate reads the late answer to a request that passed its deadline
// before any of it came (ClientKeep), for at most KeepDrain after the
// deadline, and returns the connection to the pool, or closes it when the
// answer does not come, fails, or asks for the close.
func (c *rawClient) drainLate(rc *rawConn, deadline time.Time) {
	defer c.drains.Done()
	_ = rc.nc.SetDeadline(deadline.Add(KeepDrain))
	if _, keep, err := wire.ReadResponse(rc.br, c.head); err == nil && keep {
		c.put(rc)
		return
	}
	c.drop(rc)
	c.release()
}

// do sends one request with the extra header fields hdr, on a new
// connection when fresh, and reads the whole response by the deadline.
func (c *rawClient) do(ctx context.Context, deadline time.Time, fresh bool, hdr http.Header) (wire.Response, error) {
	var (
		rc  *rawConn
		err error
	)
	if fresh {
		rc, err = c.dial(ctx)
	} else {
		rc, err = c.get(ctx, deadline)
	}
	if err != nil {
		return wire.Response{}, err
	}
	if c.keep && !fresh && !time.Now().Before(deadline) {
		// The deadline passed while the request waited for a
		// connection: a keeping client leaves the connection as it is.
		c.put(rc)
		return wire.Response{}, os.ErrDeadlineExceeded
	}
	// The connection's deadline is the request's: a pooled connection is
	// only reused by a later request, which sets its own.
	_ = rc.nc.SetDeadline(deadline)
	start := rc.read
	res, keep, err := c.exchange(rc, hdr, fresh)
	switch {
	case fresh:
		c.drop(rc)
	case err == nil && keep:
		c.put(rc)
	case c.keep && errors.Is(err, os.ErrDeadlineExceeded) && rc.written && rc.read == start && rc.br.Buffered() == 0 && c.startDrain():
		// Nothing of the answer came by the deadline: the request has
		// failed, but the connection waits for the answer in the
		// background, and is reused after it.
		go c.drainLate(rc, deadline)
	default:
		c.drop(rc)
		c.release()
	}
	return res, err
}

// exchange writes the request and reads the response; keep reports whether
// the connection can carry another request.
func (c *rawClient) exchange(rc *rawConn, hdr http.Header, fresh bool) (wire.Response, bool, error) {
	req := c.plain
	if len(hdr) > 0 || fresh {
		b := bytes.NewBuffer(make([]byte, 0, len(c.prefix)+128))
		b.Write(c.prefix)
		for k, vs := range hdr {
			for _, v := range vs {
				fmt.Fprintf(b, "%s: %s\r\n", k, v)
			}
		}
		if fresh {
			b.WriteString("Connection: close\r\n")
		}
		b.WriteString("\r\n")
		req = b.Bytes()
	}
	rc.written = false
	if _, err := rc.nc.Write(req); err != nil {
		return wire.Response{}, false, err
	}
	rc.written = true
	return wire.ReadResponse(rc.br, c.head)
}
