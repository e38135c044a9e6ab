//go:build linux

package load

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench/internal/wire"
	"github.com/sluice-go/sluice/reject"
)

// rawSoon is a deadline far enough ahead never to be reached by a request
// that is answered.
func rawSoon() time.Time { return time.Now().Add(10 * time.Second) }

// newTestRawClient returns a raw client for rawURL with a pool of conns,
// closed when the test ends.
func newTestRawClient(t *testing.T, rawURL string, conns int) *rawClient {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	c, err := newRawClient(u, http.MethodGet, conns, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(c.close)
	return c
}

// rawPool reads the pool's accounting: the connections counted against the
// limit, those the client would close on close, and the idle ones.
func rawPool(c *rawClient) (open, all, idle int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, len(c.all), len(c.idle)
}

// rawCountedServer is an httptest server that counts the connections it
// accepts.
type rawCountedServer struct {
	*httptest.Server
	conns atomic.Int64
}

// newRawCountedServer starts h on a loopback server closed when the test ends.
// Register the unblocking of h's blocked requests after this call, so that
// it runs before Close (which waits for the handlers).
func newRawCountedServer(t *testing.T, h http.HandlerFunc) *rawCountedServer {
	t.Helper()
	s := &rawCountedServer{Server: httptest.NewUnstartedServer(h)}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// rawServer is a loopback listener that reads requests with net/http and
// answers each with what respond writes: for responses net/http's server
// does not produce. When respond returns false, the server closes the
// connection; otherwise it waits for the next request on it.
type rawServer struct {
	url      string
	accepted atomic.Int64
}

func newRawServer(t *testing.T, respond func(w io.Writer, r *http.Request) (keep bool)) *rawServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &rawServer{url: "http://" + l.Addr().String()}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  = make(map[net.Conn]struct{})
		closed bool
	)
	wg.Go(func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			mu.Lock()
			if closed {
				mu.Unlock()
				nc.Close()
				continue
			}
			conns[nc] = struct{}{}
			mu.Unlock()
			wg.Go(func() {
				defer nc.Close()
				br := bufio.NewReader(nc)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if !respond(nc, req) {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		closed = true
		for nc := range conns {
			nc.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return s
}

// rawBlocker holds a handler's requests until released.
type rawBlocker struct {
	arrived chan string // the RemoteAddr of each request, as it arrives
	release chan struct{}
	once    sync.Once
}

// startRawBlocked starts a counted server whose handler blocks on a rawBlocker,
// released when the test ends, before the server's Close (which waits for
// the handlers).
func startRawBlocked(t *testing.T) (*rawCountedServer, *rawBlocker) {
	t.Helper()
	b := &rawBlocker{arrived: make(chan string, 64), release: make(chan struct{})}
	s := newRawCountedServer(t, b.hold)
	t.Cleanup(b.Release)
	return s, b
}

// Release lets the held requests and those to come through; it is
// idempotent.
func (b *rawBlocker) Release() { b.once.Do(func() { close(b.release) }) }

// hold is the handler: it reports the request, then waits for the release
// or for the client to go away.
func (b *rawBlocker) hold(w http.ResponseWriter, r *http.Request) {
	b.arrived <- r.RemoteAddr
	select {
	case <-b.release:
		_, _ = io.WriteString(w, "ok")
	case <-r.Context().Done():
	}
}

// waitArrival waits for a blocked request to reach the handler.
func (b *rawBlocker) waitArrival(t *testing.T) string {
	t.Helper()
	return rawReceive(t, b.arrived, "a request to the handler")
}

type rawDone struct {
	res wire.Response
	err error
	at  time.Time
}

// goRawDo runs c.do in a goroutine; the test must rawReceive from the channel.
func goRawDo(ctx context.Context, c *rawClient, deadline time.Time) <-chan rawDone {
	ch := make(chan rawDone, 1)
	go func() {
		res, err := c.do(ctx, deadline, false, nil)
		ch <- rawDone{res, err, time.Now()}
	}()
	return ch
}

// rawReceive waits for a result, failing the test after a generous bound.
func rawReceive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		require.FailNow(t, what+" did not return")
		var zero T
		return zero
	}
}

func TestRawKeepAliveReusesConnection(t *testing.T) {
	body := strings.Repeat("x", 10000) // longer than the client's buffer
	s := newRawCountedServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "10000")
		_, _ = io.WriteString(w, body)
	})
	c := newTestRawClient(t, s.URL+"/forecast?city=Lisbon", 4)
	for i := range 3 {
		res, err := c.do(context.Background(), rawSoon(), false, nil)
		require.NoError(t, err, i)
		assert.Equal(t, http.StatusOK, res.Status)
		assert.False(t, res.NotStarted)
		open, all, idle := rawPool(c)
		assert.Equal(t, [3]int{1, 1, 1}, [3]int{open, all, idle}, "one connection, idle again")
	}
	assert.Equal(t, outOK, c.send(context.Background(), rawSoon(), false, nil))
	assert.Equal(t, int64(1), s.conns.Load(), "every request on the same connection")
}

func TestRawChunkedWithTrailer(t *testing.T) {
	s := newRawCountedServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Trailer", "X-Checksum")
		for range 3 {
			_, _ = io.WriteString(w, strings.Repeat("chunk", 1000))
			w.(http.Flusher).Flush()
		}
		w.Header().Set("X-Checksum", "abc")
	})
	// The server does chunk the response, with its trailer.
	resp, err := s.Client().Get(s.URL)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, []string{"chunked"}, resp.TransferEncoding)
	require.Equal(t, "abc", resp.Trailer.Get("X-Checksum"))
	s.Client().CloseIdleConnections()
	before := s.conns.Load()

	c := newTestRawClient(t, s.URL, 2)
	for range 3 {
		assert.Equal(t, outOK, c.send(context.Background(), rawSoon(), false, nil))
	}
	open, all, idle := rawPool(c)
	assert.Equal(t, [3]int{1, 1, 1}, [3]int{open, all, idle})
	assert.Equal(t, int64(1), s.conns.Load()-before, "the chunked body was read to its end and the connection reused")
}

func TestRawBodyUntilClose(t *testing.T) {
	body := strings.Repeat("y", 20000)
	s := newRawServer(t, func(w io.Writer, _ *http.Request) bool {
		_, _ = io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n"+body)
		return false // the close ends the body
	})
	c := newTestRawClient(t, s.url, 2)
	for i := range 2 {
		res, err := c.do(context.Background(), rawSoon(), false, nil)
		require.NoError(t, err, i)
		assert.Equal(t, http.StatusOK, res.Status)
		open, all, idle := rawPool(c)
		assert.Equal(t, [3]int{0, 0, 0}, [3]int{open, all, idle}, "not reused")
	}
	assert.Equal(t, outOK, c.send(context.Background(), rawSoon(), false, nil))
	assert.Equal(t, int64(3), s.accepted.Load(), "a connection per request")
}

// TestRawResponses runs the client against hand-made responses: how it
// classifies them, whether it keeps the connection, and the errors that
// drop it.
func TestRawResponses(t *testing.T) {
	cases := []struct {
		name  string
		resp  string
		close bool // the server closes the connection after resp
		want  outcome
		kept  bool   // the client returns the connection to its pool
		err   string // a parse error: the connection is dropped
	}{
		{name: "length", resp: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", want: outOK, kept: true},
		{name: "no-reason", resp: "HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok", want: outOK, kept: true},
		{name: "lf-only", resp: "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", want: outOK, kept: true},
		{name: "lower-case", resp: "HTTP/1.1 200 OK\r\ncontent-length:2\r\n\r\nok", want: outOK, kept: true},
		{name: "chunked", resp: "HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Sum: 1\r\nX-Other: 2\r\n\r\n", want: outOK, kept: true},
		{name: "chunked-no-trailer", resp: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", want: outOK, kept: true},
		{name: "until-close", resp: "HTTP/1.1 200 OK\r\n\r\nbody", close: true, want: outOK},
		{name: "no-content", resp: "HTTP/1.1 204 No Content\r\n\r\n", want: outOK, kept: true},
		{name: "not-modified", resp: "HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n", want: outFailed, kept: true},
		{name: "rejected", resp: "HTTP/1.1 503 Service Unavailable\r\nSluice-Not-Started: 1\r\nContent-Length: 4\r\n\r\nbusy", want: outRejected, kept: true},
		{name: "rejected-lower-case", resp: "HTTP/1.1 503 Service Unavailable\r\nsluice-not-started:1\r\nContent-Length: 4\r\n\r\nbusy", want: outRejected, kept: true},
		{name: "503-unmarked", resp: "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy", want: outFailed, kept: true},
		{name: "503-marker-0", resp: "HTTP/1.1 503 Service Unavailable\r\nSluice-Not-Started: 0\r\nContent-Length: 4\r\n\r\nbusy", want: outFailed, kept: true},
		{name: "200-marked", resp: "HTTP/1.1 200 OK\r\nSluice-Not-Started: 1\r\nContent-Length: 2\r\n\r\nok", want: outOK, kept: true},
		{name: "404", resp: "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope", want: outFailed, kept: true},
		{name: "connection-close", resp: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", want: outOK},
		{name: "connection-close-upper", resp: "HTTP/1.1 200 OK\r\nCONNECTION: Close\r\nContent-Length: 2\r\n\r\nok", want: outOK},
		{name: "http-1.0", resp: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", want: outOK},

		{name: "garbage", resp: "hello there\r\n\r\n", err: "bad status line"},
		{name: "http-2", resp: "HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nok", err: "bad status line"},
		{name: "short-status-line", resp: "HTTP/1.1 20\r\n\r\n", err: "bad status line"},
		{name: "bad-status-code", resp: "HTTP/1.1 2x0 OK\r\nContent-Length: 2\r\n\r\nok", err: "bad status line"},
		{name: "no-space", resp: "HTTP/1.1-200 OK\r\nContent-Length: 2\r\n\r\nok", err: "bad status line"},
		{name: "bad-header-line", resp: "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", err: "bad header line"},
		{name: "bad-content-length", resp: "HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\nok", err: "bad Content-Length"},
		{name: "negative-content-length", resp: "HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\nok", err: "bad Content-Length"},
		{name: "bad-chunk-size", resp: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nok\r\n0\r\n\r\n", err: "bad chunk size"},
		{name: "negative-chunk-size", resp: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-2\r\nok\r\n0\r\n\r\n", err: "bad chunk size"},
		{name: "chunk-without-crlf", resp: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokXX\r\n0\r\n\r\n", err: "chunk not followed by CRLF"},
		{name: "truncated-body", resp: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", close: true, err: "EOF"},
		{name: "truncated-chunk", resp: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", close: true, err: "EOF"},
		{name: "truncated-header", resp: "HTTP/1.1 200 OK\r\nContent-Len", close: true, err: "EOF"},
		{name: "closed-without-answer", resp: "", close: true, err: "EOF"},
	}
	byPath := make(map[string]int)
	for i, tc := range cases {
		byPath["/"+tc.name] = i
	}
	s := newRawServer(t, func(w io.Writer, r *http.Request) bool {
		tc := cases[byPath[r.URL.Path]]
		_, _ = io.WriteString(w, tc.resp)
		return !tc.close
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestRawClient(t, s.url+"/"+tc.name, 1)
			accepted := s.accepted.Load()
			res, err := c.do(context.Background(), rawSoon(), false, nil)
			if tc.err != "" {
				require.Error(t, err)
				assert.ErrorContains(t, err, tc.err)
			} else {
				require.NoError(t, err)
			}
			open, all, idle := rawPool(c)
			if tc.kept {
				assert.Equal(t, [3]int{1, 1, 1}, [3]int{open, all, idle}, "pooled")
			} else {
				assert.Equal(t, [3]int{0, 0, 0}, [3]int{open, all, idle}, "dropped")
			}
			want := tc.want
			if tc.err != "" {
				want = outFailed
			} else {
				assert.Equal(t, tc.name == "rejected" || tc.name == "rejected-lower-case" || tc.name == "200-marked", res.NotStarted)
			}
			// A second request: on the same connection when it was kept,
			// on a new one otherwise.
			assert.Equal(t, want, c.send(context.Background(), rawSoon(), false, nil))
			conns := int64(2)
			if tc.kept {
				conns = 1
			}
			assert.Equal(t, conns, s.accepted.Load()-accepted, "connections")
		})
	}
}

func TestRawSendsHeaderFields(t *testing.T) {
	type seen struct {
		uri, host, tenant, addr string
		multi                   []string
		close                   bool
	}
	var (
		mu   sync.Mutex
		reqs []seen
	)
	s := newRawCountedServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, seen{r.RequestURI, r.Host, r.Header.Get("X-Tenant"), r.RemoteAddr, r.Header.Values("X-Multi"), r.Close})
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	})
	c := newTestRawClient(t, s.URL+"/forecast?city=Lisbon", 2)
	host := strings.TrimPrefix(s.URL, "http://")
	hdr := http.Header{"X-Tenant": {"gold"}, "X-Multi": {"1", "2"}}

	assert.Equal(t, outOK, c.send(context.Background(), rawSoon(), false, nil))
	assert.Equal(t, outOK, c.send(context.Background(), rawSoon(), false, hdr))
	for range 3 {
		assert.Equal(t, outOK, c.send(context.Background(), rawSoon(), true, hdr))
	}
	assert.Equal(t, outOK, c.send(context.Background(), rawSoon(), true, nil))

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, reqs, 6)
	for i, r := range reqs {
		assert.Equal(t, "/forecast?city=Lisbon", r.uri, i)
		assert.Equal(t, host, r.host, i)
	}
	assert.Empty(t, reqs[0].tenant)
	assert.False(t, reqs[0].close)
	assert.Equal(t, "gold", reqs[1].tenant)
	assert.Equal(t, []string{"1", "2"}, reqs[1].multi)
	assert.False(t, reqs[1].close, "a pooled request keeps its connection")
	assert.Equal(t, reqs[0].addr, reqs[1].addr, "on the pooled connection")

	addrs := map[string]bool{reqs[0].addr: true}
	for i, r := range reqs[2:] {
		assert.True(t, r.close, "fresh request %d sends Connection: close", i)
		assert.False(t, addrs[r.addr], "fresh request %d has a connection of its own", i)
		addrs[r.addr] = true
	}
	assert.Equal(t, "gold", reqs[2].tenant)
	assert.Equal(t, []string{"1", "2"}, reqs[4].multi)
	assert.Equal(t, int64(5), s.conns.Load(), "one pooled connection and four fresh ones")
	open, all, idle := rawPool(c)
	assert.Equal(t, [3]int{1, 1, 1}, [3]int{open, all, idle}, "fresh connections are not pooled nor counted")
}

func TestRawPoolLimit(t *testing.T) {
	s, b := startRawBlocked(t)
	c := newTestRawClient(t, s.URL, 1)

	first := goRawDo(context.Background(), c, rawSoon())
	addr1 := b.waitArrival(t)
	second := goRawDo(context.Background(), c, rawSoon())

	// The pool is full: a request whose context ends while it waits
	// gives up with the context's error, without dialling.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.do(ctx, rawSoon(), false, nil)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	select {
	case d := <-second:
		t.Fatalf("the second request did not wait for the connection: %+v", d)
	default:
	}
	assert.Equal(t, int64(1), s.conns.Load(), "no second connection dialled")
	open, all, idle := rawPool(c)
	assert.Equal(t, [3]int{1, 1, 0}, [3]int{open, all, idle})

	b.Release()
	d1 := rawReceive(t, first, "the first request")
	require.NoError(t, d1.err)
	assert.Equal(t, http.StatusOK, d1.res.Status)
	addr2 := b.waitArrival(t)
	d2 := rawReceive(t, second, "the second request")
	require.NoError(t, d2.err)
	assert.Equal(t, http.StatusOK, d2.res.Status)
	assert.Equal(t, addr1, addr2, "the second request reused the connection")
	assert.Equal(t, int64(1), s.conns.Load())
	open, all, idle = rawPool(c)
	assert.Equal(t, [3]int{1, 1, 1}, [3]int{open, all, idle})
}

func TestRawDeadline(t *testing.T) {
	s, b := startRawBlocked(t)
	c := newTestRawClient(t, s.URL, 2)

	start := time.Now()
	_, err := c.do(context.Background(), start.Add(100*time.Millisecond), false, nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)
	b.waitArrival(t)
	open, all, idle := rawPool(c)
	assert.Equal(t, [3]int{0, 0, 0}, [3]int{open, all, idle}, "the timed-out connection is dropped")

	assert.Equal(t, outFailed, c.send(context.Background(), time.Now().Add(100*time.Millisecond), false, nil))
	b.waitArrival(t)
	// A fresh request's deadline is its connection's too.
	assert.Equal(t, outFailed, c.send(context.Background(), time.Now().Add(100*time.Millisecond), true, nil))
	b.waitArrival(t)
	// A deadline already past fails at once.
	_, err = c.do(context.Background(), time.Now().Add(-time.Second), false, nil)
	assert.Error(t, err)
	open, all, idle = rawPool(c)
	assert.Equal(t, [3]int{0, 0, 0}, [3]int{open, all, idle})
}

func TestRawCloseEndsInFlight(t *testing.T) {
	s, b := startRawBlocked(t)
	c := newTestRawClient(t, s.URL, 2)

	// An idle connection and one in use.
	openRawIdle(t, c, 2)
	inFlight := goRawDo(context.Background(), c, time.Now().Add(30*time.Second))
	b.waitArrival(t)
	open, all, idle := rawPool(c)
	require.Equal(t, [3]int{2, 2, 1}, [3]int{open, all, idle})

	start := time.Now()
	go c.close()
	d := rawReceive(t, inFlight, "the request in flight")
	require.Error(t, d.err)
	assert.Less(t, d.at.Sub(start), 5*time.Second, "ended well before its deadline")
	assert.Equal(t, int64(2), s.conns.Load())

	_, err := c.get(context.Background(), rawSoon())
	assert.ErrorIs(t, err, errClientClosed)
	_, err = c.do(context.Background(), rawSoon(), false, nil)
	assert.ErrorIs(t, err, errClientClosed)
	_, err = c.do(context.Background(), rawSoon(), true, nil)
	assert.ErrorIs(t, err, errClientClosed)
	assert.Equal(t, outFailed, c.send(context.Background(), rawSoon(), false, nil))
	open, all, idle = rawPool(c)
	assert.Equal(t, [3]int{0, 0, 0}, [3]int{open, all, idle})
	c.close() // twice is fine
}

// openRawIdle dials n pooled connections and leaves them idle.
func openRawIdle(t *testing.T, c *rawClient, n int) {
	t.Helper()
	var rcs []*rawConn
	for range n {
		rc, err := c.get(context.Background(), rawSoon())
		require.NoError(t, err)
		rcs = append(rcs, rc)
	}
	for _, rc := range rcs {
		c.put(rc)
	}
}

// TestRawCloseWakesWaiters: requests waiting for a pooled connection when
// the client closes end too, even with a context that never ends.
func TestRawCloseWakesWaiters(t *testing.T) {
	s, b := startRawBlocked(t)
	c := newTestRawClient(t, s.URL, 1)

	inFlight := goRawDo(context.Background(), c, time.Now().Add(30*time.Second))
	b.waitArrival(t)
	// Cancelled at the end of the test only, so that a waiter the close
	// missed cannot leak.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const waiters = 3
	waiting := make([]<-chan rawDone, waiters)
	for i := range waiting {
		waiting[i] = goRawDo(ctx, c, time.Now().Add(30*time.Second))
	}
	time.Sleep(100 * time.Millisecond) // let them park in get

	c.close()
	assert.Error(t, rawReceive(t, inFlight, "the request in flight").err)
	for i, ch := range waiting {
		select {
		case d := <-ch:
			assert.ErrorIs(t, d.err, errClientClosed, "waiter %d", i)
		case <-time.After(3 * time.Second):
			cancel()
			<-ch
			t.Errorf("waiter %d still waiting after close", i)
		}
	}
}

func TestRawSenderClosedWithContext(t *testing.T) {
	s, b := startRawBlocked(t)
	u, err := url.Parse(s.URL + "/x")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snd, err := newSender(ctx, u, http.MethodGet, nil, 2, 5*time.Second)
	require.NoError(t, err)
	defer snd.close()
	rs, ok := snd.(*rawSender)
	require.True(t, ok, "plain http without a client gets the raw client, not %T", snd)

	out := make(chan outcome, 1)
	go func() { out <- snd.send(context.Background(), time.Now().Add(30*time.Second), false, nil) }()
	b.waitArrival(t)
	start := time.Now()
	cancel()
	assert.Equal(t, outFailed, rawReceive(t, out, "the request in flight"))
	assert.Less(t, time.Since(start), 5*time.Second)

	_, err = rs.get(context.Background(), rawSoon())
	assert.ErrorIs(t, err, errClientClosed)
	assert.Equal(t, outFailed, snd.send(context.Background(), rawSoon(), false, nil))
	open, all, idle := rawPool(rs.rawClient)
	assert.Equal(t, [3]int{0, 0, 0}, [3]int{open, all, idle})
}

func TestRawSenderCloseStopsContextWatch(t *testing.T) {
	s := newRawCountedServer(t, ok)
	u, err := url.Parse(s.URL)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snd, err := newSender(ctx, u, http.MethodGet, nil, 2, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, outOK, snd.send(ctx, rawSoon(), false, nil))
	snd.close()
	assert.False(t, snd.(*rawSender).stop(), "close unregisters the context watch")
	assert.Equal(t, outFailed, snd.send(ctx, rawSoon(), false, nil))
}

func TestNewSenderPicksClient(t *testing.T) {
	ctx := context.Background()
	parse := func(s string) *url.URL {
		u, err := url.Parse(s)
		require.NoError(t, err)
		return u
	}

	snd, err := newSender(ctx, parse("http://127.0.0.1:1/a?b=c"), http.MethodPost, nil, 3, time.Second)
	require.NoError(t, err)
	rs, ok := snd.(*rawSender)
	require.True(t, ok, "%T", snd)
	assert.Equal(t, "127.0.0.1:1", rs.addr)
	assert.Equal(t, 3, rs.limit)
	assert.Equal(t, "POST /a?b=c HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n", string(rs.plain))
	snd.close()

	// Without a port, the raw client dials port 80; the pool has at least
	// one connection.
	snd, err = newSender(ctx, parse("http://localhost/"), http.MethodGet, nil, 0, time.Second)
	require.NoError(t, err)
	rs = snd.(*rawSender)
	assert.Equal(t, "localhost:80", rs.addr)
	assert.Equal(t, 1, rs.limit)
	assert.Equal(t, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", string(rs.plain))
	snd.close()

	// A caller's client is used as it is.
	client := &http.Client{}
	snd, err = newSender(ctx, parse("http://127.0.0.1:1/"), http.MethodGet, client, 3, time.Second)
	require.NoError(t, err)
	hs, ok := snd.(*httpSender)
	require.True(t, ok, "%T", snd)
	assert.Same(t, client, hs.client)
	snd.close()

	// https goes through the raw client too, over TLS.
	snd, err = newSender(ctx, parse("https://127.0.0.1/"), http.MethodGet, nil, 3, time.Second)
	require.NoError(t, err)
	rs = snd.(*rawSender)
	assert.Equal(t, "127.0.0.1:443", rs.addr)
	require.NotNil(t, rs.tls)
	assert.Equal(t, []string{"http/1.1"}, rs.tls.NextProtos)
	snd.close()

	// The raw client refuses what it cannot speak.
	_, err = newRawClient(parse("ftp://127.0.0.1:1/"), http.MethodGet, 1, time.Second)
	assert.Error(t, err)
}

// TestSendersClassifyAlike sends the same answers through the raw client
// and through net/http's.
func TestSendersClassifyAlike(t *testing.T) {
	var tenant atomic.Pointer[string]
	s := newRawCountedServer(t, func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("X-Tenant"); v != "" {
			tenant.Store(&v)
		}
		switch r.URL.Path {
		case "/ok":
			_, _ = io.WriteString(w, "ok")
		case "/created":
			w.WriteHeader(http.StatusCreated)
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/rejected":
			w.Header().Set(reject.NotStartedHeader, "1")
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case "/unavailable":
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case "/error":
			http.Error(w, "oops", http.StatusInternalServerError)
		case "/missing":
			http.NotFound(w, r)
		case "/closing":
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, "bye")
		}
	})
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	cases := map[string]outcome{
		"/ok":          outOK,
		"/created":     outOK,
		"/empty":       outOK,
		"/closing":     outOK,
		"/rejected":    outRejected,
		"/unavailable": outFailed,
		"/error":       outFailed,
		"/missing":     outFailed,
	}
	for path, want := range cases {
		u, err := url.Parse(s.URL + path)
		require.NoError(t, err)
		for _, c := range []*http.Client{nil, client} {
			snd, err := newSender(context.Background(), u, http.MethodGet, c, 2, 5*time.Second)
			require.NoError(t, err)
			for _, fresh := range []bool{false, true} {
				got := snd.send(context.Background(), rawSoon(), fresh, nil)
				assert.Equal(t, want, got, "%s with %T, fresh %v", path, snd, fresh)
			}
			snd.close()
		}
	}

	// net/http's sender passes the header fields on and keeps the
	// deadline.
	u, err := url.Parse(s.URL + "/ok")
	require.NoError(t, err)
	snd, err := newSender(context.Background(), u, http.MethodGet, client, 2, 5*time.Second)
	require.NoError(t, err)
	defer snd.close()
	assert.Equal(t, outOK, snd.send(context.Background(), rawSoon(), false, http.Header{"X-Tenant": {"gold"}}))
	require.NotNil(t, tenant.Load())
	assert.Equal(t, "gold", *tenant.Load())
	assert.Equal(t, outFailed, snd.send(context.Background(), time.Now().Add(-time.Second), false, nil), "past its deadline")
}

func TestHTTPSenderDeadline(t *testing.T) {
	s, b := startRawBlocked(t)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	u, err := url.Parse(s.URL)
	require.NoError(t, err)
	snd, err := newSender(context.Background(), u, http.MethodGet, &http.Client{Transport: tr}, 2, 5*time.Second)
	require.NoError(t, err)
	defer snd.close()
	start := time.Now()
	assert.Equal(t, outFailed, snd.send(context.Background(), start.Add(100*time.Millisecond), false, nil))
	assert.Less(t, time.Since(start), 5*time.Second)
	b.waitArrival(t)
}

// TestRawHeadRequest: a response to HEAD has no body whatever its
// Content-Length says.
func TestRawHeadRequest(t *testing.T) {
	s := newRawCountedServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "5")
		_, _ = io.WriteString(w, "hello")
	})
	u, err := url.Parse(s.URL)
	require.NoError(t, err)
	c, err := newRawClient(u, http.MethodHead, 1, 5*time.Second)
	require.NoError(t, err)
	defer c.close()
	res, err := c.do(context.Background(), time.Now().Add(500*time.Millisecond), false, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, res.Status)
}

// TestRawInformationalResponse: a 1xx response is followed by the final
// one, which is the answer.
func TestRawInformationalResponse(t *testing.T) {
	s := newRawServer(t, func(w io.Writer, _ *http.Request) bool {
		_, _ = io.WriteString(w, "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"+
			"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
	c := newTestRawClient(t, s.url, 1)
	for range 2 {
		res, err := c.do(context.Background(), rawSoon(), false, nil)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, res.Status)
	}
	assert.Equal(t, outOK, c.send(context.Background(), rawSoon(), false, nil))
}
