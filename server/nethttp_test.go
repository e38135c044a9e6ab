//go:build linux

package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/sched"
)

// Generous bounds: the timeouts of these tests are 200 ms, and what is
// checked is that they act, "before 5 s", not how exactly (timing belongs
// in benchmarks).
const (
	shortTimeout = 200 * time.Millisecond
	actsWithin   = 5 * time.Second
)

// clientHello returns the first record a crypto/tls client sends: a real
// ClientHello, as Go's client builds it today.
func clientHello(t *testing.T) []byte {
	t.Helper()
	a, b := net.Pipe()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		_ = tls.Client(a, &tls.Config{ServerName: "example.com"}).Handshake()
	})
	defer a.Close()
	defer b.Close()
	_ = b.SetReadDeadline(time.Now().Add(5 * time.Second))
	hdr := make([]byte, 5)
	_, err := io.ReadFull(b, hdr)
	require.NoError(t, err)
	require.Equal(t, byte(tlsHandshakeRecord), hdr[0], "a handshake record")
	rec := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	_, err = io.ReadFull(b, rec)
	require.NoError(t, err)
	return append(hdr, rec...)
}

// netHTTPServer starts a net/http server of h for a differential check.
func netHTTPServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ref := httptest.NewUnstartedServer(h)
	ref.Config.ErrorLog = log.New(io.Discard, "", 0)
	ref.Start()
	t.Cleanup(ref.Close)
	return ref.Listener.Addr().String()
}

// TestTLSClientHelloOnPlainPort: a TLS client that reaches the plain HTTP
// port gets what net/http gives it, a 400 and a closed connection, at
// once, where sluice used to wait for the end of a head (the client gave
// up first, or the header timeout answered 408 ten seconds later). The
// client sees the same error from both servers.
func TestTLSClientHelloOnPlainPort(t *testing.T) {
	refAddr := netHTTPServer(t, http.HandlerFunc(echoHandler))
	_, addr := serveHTTP(t, http.HandlerFunc(echoHandler), Config{Logger: slog.New(slog.DiscardHandler)})

	hello := clientHello(t)
	c := diffCase{name: "tls client hello", raw: string(hello)}
	var want exchangeResult
	var wg sync.WaitGroup
	wg.Go(func() { want = exchange(refAddr, c) })
	start := time.Now()
	got := exchange(addr, c)
	wg.Wait()
	t.Logf("net/http: %s", want)
	t.Logf("sluice:   %s", got)
	assert.Empty(t, compareExchanges(want, got), "as net/http")
	checkOutcome(t, closed(http.StatusBadRequest), got)
	assert.Less(t, time.Since(start), actsWithin)

	// A TLS handshake through crypto/tls: the client's error is the same.
	handshake := func(addr string) (error, time.Duration) {
		nc, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		start := time.Now()
		err = tls.Client(nc, &tls.Config{ServerName: "example.com"}).Handshake()
		return err, time.Since(start)
	}
	refErr, _ := handshake(refAddr)
	err, took := handshake(addr)
	require.Error(t, err)
	assert.Equal(t, refErr.Error(), err.Error())
	assert.Contains(t, err.Error(), "does not look like a TLS handshake")
	assert.Less(t, took, actsWithin)

	// The first bytes of a handshake record are enough: a request cannot
	// begin with 0x16. net/http waits for a line end that a TLS client
	// never sends (the ClientHello Go sends happens to contain one: the
	// type of its supported_groups extension is 0x000a).
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	_, err = nc.Write(hello[:5])
	require.NoError(t, err)
	_ = nc.SetReadDeadline(time.Now().Add(actsWithin))
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	require.NoError(t, err, "answered before the rest of the ClientHello")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, resp.Status, "TLS handshake on a plain HTTP port")
	refConn, err := net.Dial("tcp", refAddr)
	require.NoError(t, err)
	defer refConn.Close()
	_, err = refConn.Write(hello[:5])
	require.NoError(t, err)
	_ = refConn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err = refConn.Read(make([]byte, 1))
	assert.True(t, isTimeout(err), "net/http still waits for a line end (if it answers now, update the docs): %v", err)
}

// TestRequestLineCheckedAsItArrives: a request line that cannot be valid is
// refused as soon as it ends (or, for its first byte, as soon as it
// arrives), without waiting for the rest of a head that may never come.
func TestRequestLineCheckedAsItArrives(t *testing.T) {
	_, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{Logger: slog.New(slog.DiscardHandler)})
	for _, raw := range []string{
		"SSH-2.0-OpenSSH_9.6\r\n", // and then waits for the server's banner
		"GET /a HTTP/1.1 extra\r\nHost: x\r\n",
		"G(T / HTTP/1.1\r\n",
		" GET / HTTP/1.1",
		"\x80\x2e\x01\x03\x01", // an SSLv2-style ClientHello
	} {
		nc, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		_, err = io.WriteString(nc, raw)
		require.NoError(t, err)
		_ = nc.SetReadDeadline(time.Now().Add(actsWithin))
		resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
		if assert.NoError(t, err, "%q", raw) {
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%q", raw)
		}
		nc.Close()
	}
	// A good line goes on waiting for the rest of its head.
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	_, err = io.WriteString(nc, "GET /ok HTTP/1.1\r\n")
	require.NoError(t, err)
	_ = nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err = nc.Read(make([]byte, 1))
	assert.True(t, isTimeout(err), "no answer to half a head: %v", err)
}

// trickle writes a request head, then its body one byte every 20 ms,
// until all is sent or the server closes; it returns what the server
// answered.
func trickle(t *testing.T, addr, path string, n int) string {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	return trickleOn(t, nc, path, n)
}

// trickleOn is trickle on a connection of the caller's, which it closes.
func trickleOn(t *testing.T, nc net.Conn, path string, n int) string {
	t.Helper()
	defer nc.Close()
	_, err := fmt.Fprintf(nc, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", path, n)
	require.NoError(t, err)
	for range n {
		if _, err := nc.Write([]byte("x")); err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = nc.SetReadDeadline(time.Now().Add(actsWithin))
	b, _ := io.ReadAll(nc)
	return string(b)
}

// bodyReport is what a body-reading handler saw.
type bodyReport struct {
	n       int
	err     error
	took    time.Duration
	ctxDone bool
}

// bodyReader reads the whole body, on the handler's coroutine or (path
// "/helper") on a goroutine of its own, after setting the read deadline
// the query asks for there, and reports.
func bodyReader(reports chan<- bodyReport) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var b []byte
		var err error
		read := func() {
			if d := r.URL.Query().Get("deadline"); d != "" {
				dur, _ := time.ParseDuration(d)
				_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(dur))
			}
			b, err = io.ReadAll(r.Body)
		}
		if r.URL.Path == "/helper" {
			done := make(chan struct{})
			go func() { defer close(done); read() }()
			<-done
		} else {
			read()
		}
		reports <- bodyReport{n: len(b), err: err, took: time.Since(start), ctxDone: r.Context().Err() != nil}
		if err != nil {
			http.Error(w, "slow body", http.StatusRequestTimeout)
			return
		}
		fmt.Fprintf(w, "read %d", len(b))
	}
}

// TestReadTimeoutFailsATricklingBody: a body that trickles past
// ReadTimeout fails its read with a timeout error (net/http's shape), on
// the handler's coroutine and on a helper goroutine, the request's context
// ends, and the connection closes after the answer. SetReadDeadline moves
// the deadline either way.
func TestReadTimeoutFailsATricklingBody(t *testing.T) {
	reports := make(chan bodyReport, 1)
	_, addr := serveHTTP(t, bodyReader(reports), Config{ReadTimeout: shortTimeout})
	for _, path := range []string{"/coroutine", "/helper"} {
		answer := trickle(t, addr, path, 100) // 2 s of body
		r := <-reports
		require.Error(t, r.err, path)
		var ne net.Error
		assert.True(t, errors.As(r.err, &ne) && ne.Timeout(), "%s: a net.Error that times out: %v", path, r.err)
		assert.ErrorIs(t, r.err, os.ErrDeadlineExceeded, path)
		assert.Less(t, r.took, actsWithin, path)
		assert.Less(t, r.n, 100, path)
		assert.True(t, r.ctxDone, "%s: the request's context ends, as in net/http", path)
		assert.Contains(t, answer, "408", path)
		assert.Contains(t, answer, "Connection: close", path)
	}

	// Extended by the handler: the same body is read whole.
	for _, path := range []string{"/coroutine", "/helper"} {
		answer := trickle(t, addr, path+"?deadline=10s", 30)
		r := <-reports
		assert.NoError(t, r.err, path)
		assert.Equal(t, 30, r.n, path)
		assert.Contains(t, answer, "read 30", path)
	}

	// Shortened by the handler, where the server has no ReadTimeout.
	_, addr2 := serveHTTP(t, bodyReader(reports), Config{})
	for _, path := range []string{"/coroutine", "/helper"} {
		trickle(t, addr2, path+"?deadline=200ms", 100)
		r := <-reports
		assert.ErrorIs(t, r.err, os.ErrDeadlineExceeded, path)
		assert.Less(t, r.took, actsWithin, path)
	}
}

// TestReadTimeoutBoundsTheHead: a head must arrive within ReadTimeout too,
// when that is shorter than ReadHeaderTimeout (here the 10 s default), and
// IdleTimeout defaults to ReadTimeout, as in net/http.
func TestReadTimeoutBoundsTheHead(t *testing.T) {
	srv, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{ReadTimeout: shortTimeout})
	assert.Equal(t, shortTimeout, srv.HTTPServer().IdleTimeout)
	assert.Equal(t, shortTimeout, srv.HTTPServer().ReadHeaderTimeout)

	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	start := time.Now()
	_, err = io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\n")
	require.NoError(t, err)
	_ = nc.SetReadDeadline(time.Now().Add(actsWithin))
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	assert.Less(t, time.Since(start), actsWithin)

	idle, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer idle.Close()
	_, err = io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	_ = idle.SetReadDeadline(time.Now().Add(actsWithin))
	ibr := bufio.NewReader(idle)
	resp, err = http.ReadResponse(ibr, nil)
	require.NoError(t, err)
	_, _ = io.ReadAll(resp.Body)
	_, err = ibr.ReadByte()
	assert.ErrorIs(t, err, io.EOF, "closed by the idle timeout, which is ReadTimeout")

	defaults, _ := serveHTTP(t, http.HandlerFunc(echoPath), Config{})
	assert.Equal(t, DefaultIdleTimeout, defaults.HTTPServer().IdleTimeout)
	assert.Equal(t, DefaultReadHeaderTimeout, defaults.HTTPServer().ReadHeaderTimeout)
	assert.Zero(t, defaults.HTTPServer().ReadTimeout)
}

// writeReport is what a response-writing handler saw.
type writeReport struct {
	written int
	err     error
	took    time.Duration
}

const bigResponse = 64 << 20 // far beyond what the sockets buffer

// bigWriter writes bigResponse bytes, on the handler's coroutine or on a
// helper goroutine (path "/helper"), after setting the write deadline the
// query asks for there, and reports.
func bigWriter(reports chan<- writeReport) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(bigResponse))
		chunk := make([]byte, 1<<20)
		write := func() writeReport {
			if d := r.URL.Query().Get("deadline"); d != "" {
				dur, _ := time.ParseDuration(d)
				_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(dur))
			}
			start := time.Now()
			var rep writeReport
			for rep.written < bigResponse {
				n, err := w.Write(chunk)
				rep.written += n
				if err != nil {
					rep.err = err
					break
				}
			}
			rep.took = time.Since(start)
			return rep
		}
		if r.URL.Path == "/helper" {
			done := make(chan writeReport)
			go func() { done <- write() }()
			reports <- <-done
			return
		}
		reports <- write()
	}
}

// notReading sends a request and reads nothing for a while, then reads
// the response; it returns how much of its body came, and the error that
// ended the body (nil when it came whole, an unexpected EOF or a reset
// when the server closed the connection first).
func notReading(t *testing.T, addr, path string, pause time.Duration) (int64, error) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	return notReadingOn(t, nc, path, pause)
}

// notReadingOn is notReading on a connection of the caller's, which it
// closes.
func notReadingOn(t *testing.T, nc net.Conn, path string, pause time.Duration) (int64, error) {
	t.Helper()
	defer nc.Close()
	_, err := fmt.Fprintf(nc, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
	require.NoError(t, err)
	time.Sleep(pause)
	_ = nc.SetReadDeadline(time.Now().Add(actsWithin + 10*time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	require.NoError(t, err, "the head was sent before the client stopped reading")
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	require.False(t, isTimeout(err), "the body ended, whole or cut: %v", err)
	return n, err
}

// TestWriteTimeoutClosesOnAClientThatDoesNotRead: a client that does not
// read its response past WriteTimeout has its connection closed; the
// handler's write fails with a timeout error, on its coroutine and on a
// helper goroutine. SetWriteDeadline extends or shortens the deadline.
func TestWriteTimeoutClosesOnAClientThatDoesNotRead(t *testing.T) {
	reports := make(chan writeReport, 1)
	_, addr := serveHTTP(t, bigWriter(reports), Config{WriteTimeout: shortTimeout})
	for _, path := range []string{"/coroutine", "/helper"} {
		got, cut := notReading(t, addr, path, 3*shortTimeout)
		r := <-reports
		assert.ErrorIs(t, r.err, os.ErrDeadlineExceeded, path)
		var ne net.Error
		assert.True(t, errors.As(r.err, &ne) && ne.Timeout(), "%s: %v", path, r.err)
		assert.Less(t, r.written, bigResponse, path)
		assert.Less(t, r.took, actsWithin, path)
		assert.Error(t, cut, "%s: the connection was closed mid-body", path)
		assert.Less(t, got, int64(bigResponse), path)
	}

	// Extended: the client that reads late still gets all of it.
	for _, path := range []string{"/coroutine", "/helper"} {
		got, cut := notReading(t, addr, path+"?deadline=30s", 3*shortTimeout)
		r := <-reports
		assert.NoError(t, r.err, path)
		assert.NoError(t, cut, path)
		assert.Equal(t, int64(bigResponse), got, path)
	}

	// Shortened, where the server has no WriteTimeout.
	_, addr2 := serveHTTP(t, bigWriter(reports), Config{})
	for _, path := range []string{"/coroutine", "/helper"} {
		got, cut := notReading(t, addr2, path+"?deadline=200ms", 3*shortTimeout)
		r := <-reports
		assert.ErrorIs(t, r.err, os.ErrDeadlineExceeded, path)
		assert.Error(t, cut, path)
		assert.Less(t, got, int64(bigResponse), path)
	}
}

// TestWriteTimeoutCountsTheHandler: as in net/http, WriteTimeout runs from
// the end of the head, so a handler that takes longer sends no response:
// its write fails and the connection closes.
func TestWriteTimeoutCountsTheHandler(t *testing.T) {
	errs := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = sched.Sleep(r.Context(), 2*shortTimeout)
		_, err := io.WriteString(w, "late")
		errs <- errors.Join(err, http.NewResponseController(w).Flush())
	})
	_, addr := serveHTTP(t, h, Config{WriteTimeout: shortTimeout})
	resps, _, closed := rawExchange(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "GET")
	assert.Empty(t, resps)
	assert.True(t, closed)
	assert.ErrorIs(t, <-errs, os.ErrDeadlineExceeded)
}

// TestContextKeys: the adapter's request context carries
// http.LocalAddrContextKey (the connection's local address, a
// *net.TCPAddr) and http.ServerContextKey (an *http.Server describing the
// sluice server), as net/http's does; a native handler's too, once it
// asked for the local address.
func TestContextKeys(t *testing.T) {
	type seen struct {
		local  net.Addr
		server *http.Server
	}
	got := make(chan seen, 2)
	h := &keysHandler{got: func(r *http.Request) {
		hs, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		got <- seen{local, hs}
	}}
	cfg := Config{ReadTimeout: 3 * time.Second, WriteTimeout: 4 * time.Second, ReadHeaderTimeout: 2 * time.Second,
		IdleTimeout: -1, MaxHeaderBytes: 8192}
	srv, addr := serveHTTP(t, h, cfg)
	resps, _, closed := rawExchange(t, addr, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\n", "GET")
	assert.Len(t, resps, 2)
	assert.False(t, closed)
	for range 2 {
		s := <-got
		require.IsType(t, &net.TCPAddr{}, s.local)
		assert.Equal(t, addr, s.local.String(), "the address the client reached")
		require.NotNil(t, s.server)
		assert.Same(t, srv.HTTPServer(), s.server, "one per server")
		assert.Equal(t, addr, s.server.Addr)
		assert.Equal(t, 3*time.Second, s.server.ReadTimeout)
		assert.Equal(t, 4*time.Second, s.server.WriteTimeout)
		assert.Equal(t, 2*time.Second, s.server.ReadHeaderTimeout)
		assert.Less(t, s.server.IdleTimeout, time.Duration(0), "none")
		assert.Equal(t, 8192, s.server.MaxHeaderBytes)
		assert.Equal(t, http.Handler(h), s.server.Handler)
		assert.NotNil(t, s.server.ErrorLog)
	}

	native := HandlerFunc(func(w *ResponseWriter, r *Request) {
		hs, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
		before := r.Context().Value(http.LocalAddrContextKey)
		local := r.LocalAddr()
		after := r.Context().Value(http.LocalAddrContextKey)
		fmt.Fprintf(w, "%v %v %v %v", hs != nil && hs.Handler == nil, before == nil, local, after)
	})
	_, naddr := serveNative(t, native, Config{})
	resps, bodies, _ := rawExchange(t, naddr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "GET")
	require.Len(t, resps, 1)
	assert.Equal(t, fmt.Sprintf("true true %s %s", naddr, naddr), bodies[0])
}

// keysHandler is an http.Handler comparable by pointer.
type keysHandler struct{ got func(*http.Request) }

func (k *keysHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.got(r)
	_, _ = io.WriteString(w, "ok")
}

// TestEnableFullDuplex: ResponseController.EnableFullDuplex succeeds, and a
// handler reads its request's body after its response has begun.
func TestEnableFullDuplex(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if !assert.NoError(t, rc.EnableFullDuplex()) {
			return
		}
		br := bufio.NewReader(r.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			_, _ = io.WriteString(w, strings.ToUpper(line))
			_ = rc.Flush()
		}
	})
	_, addr := serveHTTP(t, h, Config{})
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(actsWithin))
	_, err = io.WriteString(nc, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(nc)
	for i, word := range []string{"one\n", "two\n"} {
		_, err = fmt.Fprintf(nc, "%x\r\n%s\r\n", len(word), word)
		require.NoError(t, err)
		if i == 0 {
			resp, err := http.ReadResponse(br, nil)
			require.NoError(t, err)
			br = bufio.NewReader(resp.Body)
		}
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, strings.ToUpper(word), line, "answered before the body ends")
	}
	_, err = io.WriteString(nc, "0\r\n\r\n")
	require.NoError(t, err)
}

// TestBodyTooLargeSaysWhatAndHow: the 413 for a Content-Length beyond
// MaxBodyBytes says what was exceeded and which setting raises it.
func TestBodyTooLargeSaysWhatAndHow(t *testing.T) {
	_, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{MaxBodyBytes: 100})
	resps, bodies, closed := rawExchange(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n", "POST")
	require.Len(t, resps, 1)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resps[0].StatusCode)
	assert.Equal(t, "413 Request Entity Too Large", resps[0].Status, "the status line stays short")
	assert.True(t, closed)
	for _, want := range []string{"Content-Length: 101", "100 bytes", "Config.MaxBodyBytes", "negative for no limit"} {
		assert.Contains(t, bodies[0], want)
	}

	_, addr = serveHTTP(t, http.HandlerFunc(echoPath), Config{})
	_, bodies, _ = rawExchange(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 70000000\r\n\r\n", "POST")
	assert.Contains(t, bodies[0], "67108864 bytes (64 MiB)", "the default, in words")

	for n, want := range map[int64]string{
		100:       "100 bytes",
		4096:      "4096 bytes (4 KiB)",
		1500000:   "1500000 bytes (1.4 MiB)",
		3 << 30:   "3221225472 bytes (3 GiB)",
		64 << 20:  "67108864 bytes (64 MiB)",
		(1 << 20): "1048576 bytes (1 MiB)",
	} {
		assert.Equal(t, want, formatBytes(n))
	}
}

// On a dual-stack listener an IPv4 client's address reads as IPv4, as in
// net/http, not as an IPv4-mapped IPv6 address.
func TestRemoteAddrOfIPv4ClientOnDualStackListener(t *testing.T) {
	rt := schedtest.Runtime(t, 1)
	got := make(chan string, 1)
	srv, err := Listen(rt, ":0", HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.RemoteAddr
	})), Config{})
	if err != nil {
		t.Skipf("no dual-stack listener here: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	_, port, err := net.SplitHostPort(srv.Addr().String())
	require.NoError(t, err)
	c := &http.Client{}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://127.0.0.1:" + port + "/")
	require.NoError(t, err)
	resp.Body.Close()
	addr := <-got
	assert.True(t, strings.HasPrefix(addr, "127.0.0.1:"), "RemoteAddr %q", addr)
}
