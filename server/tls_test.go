//go:build linux

package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/internal/selfsigned"
	"github.com/sluice-go/sluice/lanes"
	srt "github.com/sluice-go/sluice/runtime"
)

// testTLS returns a server configuration with a fresh certificate for
// 127.0.0.1 and a client configuration that trusts it.
func testTLS(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	cert, pool, err := selfsigned.New()
	require.NoError(t, err)
	return &tls.Config{Certificates: []tls.Certificate{cert}}, &tls.Config{RootCAs: pool}
}

// tlsClient is an HTTP client for a TLS server, closed with the test.
func tlsClient(t testing.TB, cfg *tls.Config) *http.Client {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: false}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func getBody(t testing.TB, c *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// TestTLSServesHTTPS: requests on a kept-alive TLS connection reach the
// handler with the session described, through the adapter and natively.
func TestTLSServesHTTPS(t *testing.T) {
	scfg, ccfg := testTLS(t)
	var seen sync.Map
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			seen.Store("proto", r.TLS.NegotiatedProtocol)
			seen.Store("version", r.TLS.Version)
		}
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	})
	srv, addr := serveHTTP(t, h, Config{TLS: scfg})
	ccfg.NextProtos = []string{"http/1.1"}
	c := tlsClient(t, ccfg)
	for i := range 20 {
		resp, body := getBody(t, c, fmt.Sprintf("https://%s/n%d", addr, i))
		assert.Equal(t, fmt.Sprintf("hello /n%d", i), body)
		require.NotNil(t, resp.TLS)
	}
	proto, _ := seen.Load("proto")
	version, _ := seen.Load("version")
	assert.Equal(t, "http/1.1", proto)
	assert.Equal(t, uint16(tls.VersionTLS13), version)
	st := srv.TLSStats()
	assert.Equal(t, uint64(1), st.Completed, "one kept-alive connection")
	assert.Zero(t, st.Failed)
	assert.Zero(t, st.InProgress)

	native := HandlerFunc(func(w *ResponseWriter, r *Request) {
		if r.TLS == nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, r.TLS.ServerName)
	})
	_, addr = serveNative(t, native, Config{TLS: scfg})
	ccfg = ccfg.Clone()
	ccfg.ServerName = "127.0.0.1"
	_, body := getBody(t, tlsClient(t, ccfg), "https://"+addr+"/")
	assert.Equal(t, "", body, "an IP address is not sent as SNI")
}

// TestTLSSNIAndALPN: the certificate follows the name the client asks
// for, HTTP/1.1 is chosen by ALPN on a server with HTTP/2 off even when
// the client prefers h2, and a client that speaks only h2 is refused in
// the handshake. (h2_test.go has the server that speaks h2.)
func TestTLSSNIAndALPN(t *testing.T) {
	certs := map[string]tls.Certificate{}
	pool := x509.NewCertPool()
	for _, name := range []string{"a.example", "b.example"} {
		cert, p, err := selfsigned.New(name)
		require.NoError(t, err)
		certs[name] = cert
		pool.AddCert(cert.Leaf)
		_ = p
	}
	scfg := &tls.Config{
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			c, ok := certs[hello.ServerName]
			if !ok {
				return nil, fmt.Errorf("no certificate for %q", hello.ServerName)
			}
			return &c, nil
		},
		NextProtos: []string{"h2", "http/1.1"}, // as a net/http configuration has it
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.TLS.ServerName) })
	srv, addr := serveHTTP(t, h, Config{TLS: scfg, Logger: slog.New(slog.DiscardHandler), DisableHTTP2: true})

	dial := func(name string, protos ...string) (*tls.Conn, error) {
		return tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr,
			&tls.Config{ServerName: name, RootCAs: pool, NextProtos: protos})
	}
	for _, name := range []string{"a.example", "b.example"} {
		tc, err := dial(name, "h2", "http/1.1")
		require.NoError(t, err, name)
		st := tc.ConnectionState()
		assert.Equal(t, name, st.PeerCertificates[0].Subject.CommonName, "the certificate for the name asked")
		assert.Equal(t, "http/1.1", st.NegotiatedProtocol, "HTTP/2 is off")
		_, err = io.WriteString(tc, "GET / HTTP/1.1\r\nHost: "+name+"\r\nConnection: close\r\n\r\n")
		require.NoError(t, err)
		b, err := io.ReadAll(tc)
		require.NoError(t, err)
		assert.True(t, strings.HasSuffix(string(b), "\r\n\r\n"+name), "%q", b)
		tc.Close()
	}
	_, err := dial("a.example", "h2")
	assert.ErrorContains(t, err, "no application protocol", "an h2-only client")
	_, err = dial("c.example")
	assert.Error(t, err, "a name without a certificate")
	assert.Eventually(t, func() bool { return srv.TLSStats().Failed == 2 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, uint64(2), srv.TLSStats().Completed)
}

// TestTLSPlainHTTPOnTLSPort: a plain HTTP request on the TLS port gets
// net/http's answer, byte for byte, and a closed connection.
func TestTLSPlainHTTPOnTLSPort(t *testing.T) {
	scfg, _ := testTLS(t)
	ref := httptest.NewUnstartedServer(http.HandlerFunc(echoPath))
	ref.Config.ErrorLog = log.New(io.Discard, "", 0)
	ref.TLS = scfg
	ref.StartTLS()
	t.Cleanup(ref.Close)
	_, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{TLS: scfg})

	answer := func(addr string) string {
		nc, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		b, err := io.ReadAll(nc) // to the close
		require.NoError(t, err)
		return string(b)
	}
	want := answer(ref.Listener.Addr().String())
	assert.Equal(t, want, answer(addr))
	assert.Contains(t, want, "400 Bad Request")
}

// TestTLSLargeBodies: bodies larger than the socket buffers and the TLS
// records go both ways: plaintext waiting inside the session and records
// waiting for the socket are both served.
func TestTLSLargeBodies(t *testing.T) {
	scfg, ccfg := testTLS(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = w.Write(b)
		_, _ = w.Write(b)
	})
	_, addr := serveHTTP(t, h, Config{TLS: scfg})
	c := tlsClient(t, ccfg)
	for _, size := range []int{1, 4 << 10, 100 << 10, 3 << 20} {
		in := make([]byte, size)
		_, _ = rand.Read(in)
		resp, err := c.Post("https://"+addr+"/", "application/octet-stream", bytes.NewReader(in))
		require.NoError(t, err)
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, 2*size, len(out), "size %d", size)
		assert.True(t, bytes.Equal(in, out[:size]) && bytes.Equal(in, out[size:]), "size %d: echoed twice", size)
	}
}

// TestTLSWriteFromAGoroutine: a handler that answers from another
// goroutine while it waits (off the worker: the blocking path) works over
// TLS too.
func TestTLSWriteFromAGoroutine(t *testing.T) {
	scfg, ccfg := testTLS(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			b, _ := io.ReadAll(r.Body)
			_, _ = w.Write(bytes.Repeat(b, 1000))
			w.(http.Flusher).Flush()
		}()
		<-done
	})
	_, addr := serveHTTP(t, h, Config{TLS: scfg})
	resp, err := tlsClient(t, ccfg).Post("https://"+addr+"/", "text/plain", strings.NewReader("0123456789"))
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("0123456789", 1000), string(out))
}

// stallHandshake dials addr and sends half of a TLS client hello: a
// handshake that starts and waits for the rest. The connection is closed
// with the test.
func stallHandshake(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	hello := clientHello(t)
	_, err = nc.Write(hello[:len(hello)/2])
	require.NoError(t, err)
	return nc
}

// TestTLSHandshakeBoundedInTime: a client that starts a handshake and
// stalls is closed at the header timeout, and counted as failed.
func TestTLSHandshakeBoundedInTime(t *testing.T) {
	scfg, _ := testTLS(t)
	srv, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{TLS: scfg, ReadHeaderTimeout: 300 * time.Millisecond})
	nc := stallHandshake(t, addr)
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.ReadAll(nc)
	require.NoError(t, err, "closed by the server, not by the client's deadline")
	assert.Eventually(t, func() bool { return srv.TLSStats().Failed == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.Zero(t, srv.TLSStats().InProgress)
	assert.Eventually(t, func() bool { return srv.OpenConns() == 0 }, 5*time.Second, 10*time.Millisecond)
}

// stallAfterHello opens a connection that sends a whole ClientHello and
// then nothing: its handshake waits for the client's next flight. from,
// when set, is the loopback address it comes from (127.0.0.2, say).
func stallAfterHello(t *testing.T, addr string, from ...string) net.Conn {
	t.Helper()
	var d net.Dialer
	if len(from) > 0 {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from[0])}
	}
	nc, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	_, err = nc.Write(clientHello(t))
	require.NoError(t, err)
	return nc
}

// TestTLSMaxHandshakes: when the worker's places are taken by handshakes
// that wait for their clients, a new client's hello takes the place of the
// oldest, which is closed, and the new client is served.
func TestTLSMaxHandshakes(t *testing.T) {
	scfg, ccfg := testTLS(t)
	srv, addr := serveNativeOn(t, schedtest.Runtime(t, 1), HTTPHandler(http.HandlerFunc(echoPath)),
		Config{TLS: scfg, MaxHandshakes: 2, Logger: slog.New(slog.DiscardHandler)})
	first := stallAfterHello(t, addr, "127.0.0.2")
	require.Eventually(t, func() bool { return srv.TLSStats().InProgress == 1 }, 10*time.Second, 5*time.Millisecond)
	second := stallAfterHello(t, addr, "127.0.0.3")
	require.Eventually(t, func() bool { return srv.TLSStats().InProgress == 2 }, 10*time.Second, 5*time.Millisecond)

	_, body := getBody(t, tlsClient(t, ccfg), "https://"+addr+"/after")
	assert.Equal(t, "GET /after", body)
	st := srv.TLSStats()
	assert.Equal(t, uint64(1), st.Evicted, "the oldest stalled handshake made room")
	assert.Equal(t, uint64(0), st.Failed, "an evicted handshake is not also failed")
	assert.Equal(t, int64(1), st.InProgress, "the second still waits")
	_ = first.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, first)
	require.NoError(t, err, "the oldest stalled client's connection was closed by the server")
	_ = second.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	_, err = io.Copy(io.Discard, second)
	var ne net.Error
	require.ErrorAs(t, err, &ne, "the newer stalled client's connection is still open")
	assert.True(t, ne.Timeout())
}

// TestTLSHandshakesPerAddress: one client address holds at most a quarter
// of a worker's places; its hellos beyond them wait, unread, for one of its
// places, while the places left serve the other addresses.
func TestTLSHandshakesPerAddress(t *testing.T) {
	scfg, ccfg := testTLS(t)
	srv, addr := serveNativeOn(t, schedtest.Runtime(t, 1), HTTPHandler(http.HandlerFunc(echoPath)),
		Config{TLS: scfg, MaxHandshakes: 8, Logger: slog.New(slog.DiscardHandler)})
	first := stallAfterHello(t, addr, "127.0.0.2")
	stallAfterHello(t, addr, "127.0.0.2")
	require.Eventually(t, func() bool { return srv.TLSStats().InProgress == 2 }, 10*time.Second, 5*time.Millisecond)

	// A real client from the same address waits for a place of its own.
	tr := &http.Transport{TLSClientConfig: ccfg, DisableKeepAlives: true,
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/third", nil)
	require.NoError(t, err)
	third := doAsync(&http.Client{Transport: tr, Timeout: 20 * time.Second}, req)
	require.Eventually(t, func() bool { return srv.TLSStats().Waited == 1 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, int64(2), srv.TLSStats().InProgress, "it holds no place while it waits")

	_, body := getBody(t, tlsClient(t, ccfg), "https://"+addr+"/other")
	assert.Equal(t, "GET /other", body, "another address is served meanwhile")
	select {
	case got := <-third:
		t.Fatalf("the third client of 127.0.0.2 was answered while its address held its share: %q", got)
	default:
	}

	first.Close() // a place of 127.0.0.2 frees: the waiting hello takes it
	select {
	case got := <-third:
		assert.Equal(t, "GET /third", got)
	case <-time.After(15 * time.Second):
		t.Fatal("the waiting client was not served once its address had a place")
	}
	st := srv.TLSStats()
	assert.Zero(t, st.Evicted)
	assert.Equal(t, uint64(1), st.Waited)
}

// TestPeerKey: an IPv4 address counts alone, an IPv6 one by its /64.
func TestPeerKey(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:80":           "127.0.0.1",
		"[::ffff:10.0.0.1]:80":   "10.0.0.1",
		"[2001:db8:1:2:3::4]:80": "2001:db8:1:2::",
		"[2001:db8:1:2::9]:443":  "2001:db8:1:2::",
	} {
		assert.Equal(t, want, peerKey(netip.MustParseAddrPort(in)).String(), in)
	}
}

// TestTLSIncompleteHellosHoldNoPlace: clients that send the first bytes of
// a hello and stall (the record header announces more) hold no place, so
// many more of them than MaxHandshakes keep no other client out; they are
// closed at the header timeout, and counted as failed.
func TestTLSIncompleteHellosHoldNoPlace(t *testing.T) {
	scfg, ccfg := testTLS(t)
	srv, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{TLS: scfg, MaxHandshakes: 4,
		ReadHeaderTimeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	const stalled = 60
	for range stalled {
		nc, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { nc.Close() })
		// A handshake record of 512 bytes, of which 6 come.
		_, err = nc.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return srv.OpenConns() == stalled }, 10*time.Second, 5*time.Millisecond)

	tr := &http.Transport{TLSClientConfig: ccfg, DisableKeepAlives: true}
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for i := range 20 {
		resp, err := c.Get(fmt.Sprintf("https://%s/legit%d", addr, i))
		require.NoError(t, err, "request %d beside %d stalled hellos", i, stalled)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("GET /legit%d", i), string(b))
	}
	assert.Zero(t, srv.TLSStats().Evicted)
	require.Eventually(t, func() bool { return srv.OpenConns() == 0 }, 10*time.Second, 10*time.Millisecond,
		"the stalled connections close at the header timeout")
	assert.Equal(t, uint64(stalled), srv.TLSStats().Failed)
}

// TestTLSHijackedDeadlines: the deadlines of a hijacked TLS connection
// (the *tls.Conn a handler gets, as gorilla/websocket sets them) reach the
// socket: a read past its deadline fails with a timeout, and a cleared
// deadline lets the connection go on.
func TestTLSHijackedDeadlines(t *testing.T) {
	scfg, ccfg := testTLS(t)
	type result struct {
		readErr, writeErr error
		waited            time.Duration
	}
	done := make(chan result, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		nc, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			done <- result{readErr: err}
			return
		}
		// On a goroutine of its own, as a WebSocket's read loop, so that
		// the blocking read does not hold the worker.
		go func() {
			defer nc.Close()
			var res result
			_, _ = io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
			start := time.Now()
			if err := nc.SetReadDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
				done <- result{readErr: err}
				return
			}
			_, res.readErr = rw.ReadByte() // the client sends nothing
			res.waited = time.Since(start)
			_ = nc.SetDeadline(time.Time{})
			_, res.writeErr = io.WriteString(nc, "after")
			done <- res
		}()
	})
	_, addr := serveHTTP(t, h, Config{TLS: scfg})
	conn, err := tls.Dial("tcp", addr, ccfg)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	resp, br := roundTripOn(t, conn, "GET /ws HTTP/1.1\r\nHost: x\r\n\r\n", "GET")
	require.Equal(t, http.StatusOK, resp.StatusCode)

	var res result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the read past its deadline did not end")
	}
	var ne net.Error
	require.ErrorAs(t, res.readErr, &ne)
	assert.True(t, ne.Timeout(), "%v", res.readErr)
	assert.GreaterOrEqual(t, res.waited, 90*time.Millisecond)
	require.NoError(t, res.writeErr)
	after := make([]byte, 5)
	_, err = io.ReadFull(br, after)
	require.NoError(t, err)
	assert.Equal(t, "after", string(after))
}

// TestTLSShutdownClosesHandshakes: Shutdown does not wait for a
// connection still in its handshake, or still sending its hello.
func TestTLSShutdownClosesHandshakes(t *testing.T) {
	scfg, _ := testTLS(t)
	srv, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{TLS: scfg})
	stallHandshake(t, addr)
	stallAfterHello(t, addr)
	require.Eventually(t, func() bool { return srv.TLSStats().InProgress == 1 && srv.OpenConns() == 2 }, 10*time.Second, 5*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(ctx))
	assert.Zero(t, srv.TLSStats().InProgress)
	assert.Zero(t, srv.OpenConns())
}

func TestTLSConfigErrors(t *testing.T) {
	rt := schedtest.Runtime(t, 1)
	scfg, _ := testTLS(t)
	for cfg, want := range map[*Config]string{
		{TLS: &tls.Config{}}:           "Config.TLS has no certificate",
		{TLS: scfg, MaxHandshakes: -1}: "Config.MaxHandshakes is -1",
	} {
		srv, err := Listen(rt, "127.0.0.1:0", HTTPHandler(http.NotFoundHandler()), *cfg)
		assert.ErrorContains(t, err, want)
		assert.Nil(t, srv)
	}
}

// TestTLSLateHelloIsNotHandshaken: a hello that waited past the age limit
// while the only worker was busy is closed without the handshake's work.
func TestTLSLateHelloIsNotHandshaken(t *testing.T) {
	scfg, ccfg := testTLS(t)
	spinning := make(chan struct{})
	// The blocked-worker rescue is off: on shared CPUs the watchdog may
	// take the spinning handler for a blocked one and hand the worker to a
	// spare thread, which then reads the hello in time.
	h := HandlerFunc(func(w *ResponseWriter, r *Request) {
		if r.URL.Path == "/spin" {
			close(spinning)
			for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
			}
		}
	})
	srv, addr := serveNativeOn(t, schedtest.RuntimeWith(t, srt.Config{Workers: 1, BlockedAfter: -1}), h, Config{TLS: scfg, Admission: admit.Config{MaxAge: 20 * time.Millisecond}})
	c := tlsClient(t, ccfg)
	spun := make(chan error, 1)
	go func() {
		resp, err := c.Get("https://" + addr + "/spin")
		if err == nil {
			resp.Body.Close()
		}
		spun <- err
	}()
	<-spinning
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	_, err = nc.Write(clientHello(t))
	require.NoError(t, err)
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(nc)
	require.NoError(t, err, "closed by the server")
	assert.Empty(t, b, "no handshake")
	require.NoError(t, <-spun)
	st := srv.TLSStats()
	assert.Equal(t, uint64(1), st.Late)
	assert.Equal(t, uint64(1), st.Completed, "the spinning request's")
}

// TestTLSWriteTimeoutOnAClientThatDoesNotRead: over TLS as over plain
// HTTP, a client that stops reading has its connection closed at the
// write deadline, on the handler's coroutine (records queued for the
// socket) and on a helper goroutine (a blocking write).
func TestTLSWriteTimeoutOnAClientThatDoesNotRead(t *testing.T) {
	scfg, ccfg := testTLS(t)
	reports := make(chan writeReport, 1)
	_, addr := serveHTTP(t, bigWriter(reports), Config{TLS: scfg, WriteTimeout: shortTimeout})
	for _, path := range []string{"/coroutine", "/helper"} {
		nc, err := tls.Dial("tcp", addr, ccfg)
		require.NoError(t, err)
		got, cut := notReadingOn(t, nc, path, 3*shortTimeout)
		r := <-reports
		assert.ErrorIs(t, r.err, os.ErrDeadlineExceeded, path)
		assert.Less(t, r.written, bigResponse, path)
		assert.Less(t, r.took, actsWithin, path)
		assert.Error(t, cut, "%s: the connection was closed mid-body", path)
		assert.Less(t, got, int64(bigResponse), path)
	}
	// Extended: the client that reads late still gets all of it.
	for _, path := range []string{"/coroutine", "/helper"} {
		nc, err := tls.Dial("tcp", addr, ccfg)
		require.NoError(t, err)
		got, cut := notReadingOn(t, nc, path+"?deadline=30s", 3*shortTimeout)
		r := <-reports
		assert.NoError(t, r.err, path)
		assert.NoError(t, cut, path)
		assert.Equal(t, int64(bigResponse), got, path)
	}
}

// TestTLSReadTimeoutFailsATricklingBody: over TLS, a body that trickles
// past ReadTimeout fails the handler's read, on its coroutine and on a
// helper goroutine, and the client gets its 408.
func TestTLSReadTimeoutFailsATricklingBody(t *testing.T) {
	scfg, ccfg := testTLS(t)
	reports := make(chan bodyReport, 1)
	_, addr := serveHTTP(t, bodyReader(reports), Config{TLS: scfg, ReadTimeout: shortTimeout})
	for _, path := range []string{"/coroutine", "/helper"} {
		nc, err := tls.Dial("tcp", addr, ccfg)
		require.NoError(t, err)
		answer := trickleOn(t, nc, path, 100)
		r := <-reports
		assert.ErrorIs(t, r.err, os.ErrDeadlineExceeded, path)
		assert.Less(t, r.took, actsWithin, path)
		assert.Less(t, r.n, 100, path)
		assert.Contains(t, answer, "408", path)
	}
}

// TestTLSHelperWritesWhileTheWorkerReads: a helper goroutine writes a
// large response (blocking writes through the session) while the worker
// reads the request pipelined behind it from the same session.
func TestTLSHelperWritesWhileTheWorkerReads(t *testing.T) {
	scfg, ccfg := testTLS(t)
	const size = 4 << 20
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/big" {
			_, _ = io.WriteString(w, "small")
			return
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			chunk := bytes.Repeat([]byte("y"), 64<<10)
			for range size / len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}()
		<-done
	})
	_, addr := serveHTTP(t, h, Config{TLS: scfg})
	nc, err := tls.Dial("tcp", addr, ccfg)
	require.NoError(t, err)
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	resp, br := roundTripOn(t, nc, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n", "GET")
	// The next request comes while the body streams: the worker reads it
	// behind the response the helper writes.
	_, err = io.WriteString(nc, "GET /small HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	n, err := io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	assert.Equal(t, int64(size), n)
	resp, err = http.ReadResponse(br, nil)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "small", string(b))
}

// TestHelloComplete: a handshake record is kept until it is whole; what is
// not a handshake record, or announces more than a record may hold, goes to
// crypto/tls at once.
func TestHelloComplete(t *testing.T) {
	for _, c := range []struct {
		b    []byte
		want bool
	}{
		{nil, false},
		{[]byte{0x16}, false},
		{[]byte{0x16, 3, 1, 0}, false},
		{[]byte{0x16, 3, 1, 0, 2, 1}, false},
		{[]byte{0x16, 3, 1, 0, 2, 1, 0}, true},
		{[]byte{0x16, 3, 1, 0, 2, 1, 0, 9}, true},
		{[]byte{0x16, 3, 1, 0x40, 0x01}, true}, // over 2^14: crypto/tls refuses it
		{append([]byte{0x16, 3, 1, 0x40, 0x00}, make([]byte, 1<<14-1)...), false},
		{[]byte("G"), true},
		{[]byte("GET / HTTP/1.1\r\n"), true},
	} {
		assert.Equal(t, c.want, helloComplete(c.b), "%q", c.b)
	}
}

// The worker's map of client addresses holds only those with a place or a
// hello waiting: an address whose handshake ended, or was evicted, leaves
// it.
func TestTLSHandshakePeersForgotten(t *testing.T) {
	scfg, ccfg := testTLS(t)
	rt := schedtest.Runtime(t, 1)
	srv, addr := serveNativeOn(t, rt, HTTPHandler(http.HandlerFunc(echoPath)),
		Config{TLS: scfg, MaxHandshakes: 1, Logger: slog.New(slog.DiscardHandler)})
	stallAfterHello(t, addr, "127.0.0.2")
	require.Eventually(t, func() bool { return srv.TLSStats().InProgress == 1 }, 10*time.Second, 5*time.Millisecond)
	_, body := getBody(t, tlsClient(t, ccfg), "https://"+addr+"/x") // evicts 127.0.0.2's
	assert.Equal(t, "GET /x", body)
	peers := make(chan int, 1)
	require.NoError(t, rt.Scheduler.Worker(0).Submit(lanes.Continuation, func() { peers <- len(srv.ws[0].hsPeers) }))
	assert.Zero(t, <-peers)
	assert.Equal(t, uint64(1), srv.TLSStats().Evicted)
}
