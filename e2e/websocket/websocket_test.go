//go:build linux

// Package websocket_test runs the WebSocket libraries' own idioms, unchanged,
// on sluice's server: coder/websocket and gorilla/websocket upgrade with
// Hijack and echo inside their handlers, over plain TCP and TLS.
package websocket_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	gorilla "github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/internal/selfsigned"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serveHTTP serves h on a fresh two-worker runtime and returns the server
// and its address; the server is closed when the test ends.
func serveHTTP(t testing.TB, h http.Handler, cfg server.Config) (*server.Server, string) {
	t.Helper()
	return serveNativeOn(t, schedtest.Runtime(t, 2), server.HTTPHandler(h), cfg)
}

// serveNativeOn serves h on rt and returns the server and its address; the
// server is closed when the test ends.
func serveNativeOn(t testing.TB, rt *srt.Runtime, h server.Handler, cfg server.Config) (*server.Server, string) {
	t.Helper()
	srv, err := server.Listen(rt, "127.0.0.1:0", h, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, srv.Close(ctx))
	})
	return srv, srv.Addr().String()
}

// testTLS returns a server configuration with a fresh certificate for
// 127.0.0.1 and a client configuration that trusts it.
func testTLS(t testing.TB) (serverCfg, clientCfg *tls.Config) {
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

// TestHijackWebSocketEcho runs a WebSocket server of coder/websocket, an
// http.Handler that upgrades with WriteHeader(101) and Hijack, and echoes
// 10,000 messages of sizes from a few bytes to 64 KB (fragmented frames,
// extended lengths) inside the handler, then ends with the close
// handshake. While the connection is hijacked it counts neither as open
// nor as a request in flight.
func TestHijackWebSocketEcho(t *testing.T) {
	const messages = 10000
	hijacked := make(chan struct{})
	ended := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			ended <- err
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(1 << 20)
		close(hijacked)
		for {
			typ, msg, err := c.Read(r.Context())
			if err != nil {
				ended <- err
				return
			}
			if err := c.Write(r.Context(), typ, msg); err != nil {
				ended <- err
				return
			}
		}
	})
	srv, addr := serveHTTP(t, h, server.Config{})

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws://"+addr+"/echo", &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
	require.NoError(t, err)
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	assert.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	<-hijacked
	assert.Equal(t, 0, srv.OpenConns(), "a hijacked connection is not the server's")
	assert.Equal(t, int64(0), srv.Stats().InFlight, "nor a request in flight")

	for i := range messages {
		var msg []byte
		typ := websocket.MessageText
		switch {
		case i%1000 == 999:
			typ = websocket.MessageBinary
			msg = bytes.Repeat([]byte{byte(i)}, 64<<10)
		case i%100 == 99:
			msg = bytes.Repeat([]byte("0123456789"), 30) // a 16-bit length
		default:
			msg = fmt.Appendf(nil, "message %d", i)
		}
		require.NoError(t, c.Write(ctx, typ, msg), "message %d", i)
		gotTyp, got, err := c.Read(ctx)
		require.NoError(t, err, "message %d", i)
		require.Equal(t, typ, gotTyp, "message %d", i)
		require.True(t, bytes.Equal(msg, got), "message %d", i)
	}
	require.NoError(t, c.Close(websocket.StatusNormalClosure, "done"))
	select {
	case err := <-ended:
		assert.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(err), "the handler saw the close: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not see the close handshake")
	}
}

// wsEcho is coder/websocket's echo idiom: accept the upgrade, then read
// and write back every message inside the handler until the client
// leaves.
func wsEcho(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	for {
		typ, msg, err := c.Read(r.Context())
		if err != nil {
			return
		}
		if err := c.Write(r.Context(), typ, msg); err != nil {
			return
		}
	}
}

// TestManyIdleWebSocketsInTheHandler: the WebSocket idiom of coder/websocket's
// examples (the echo loop inside the handler) waits for its reads off the
// worker, holding no thread: 100 of them at once on two workers with only
// two spare threads all upgrade and echo, and plain requests beside them
// are served. (When each held its thread, the fifth upgrade timed out: the
// third on a worker stalled it and every connection on it.)
func TestManyIdleWebSocketsInTheHandler(t *testing.T) {
	const sockets = 100
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ws" {
			_, _ = io.WriteString(w, "plain")
			return
		}
		wsEcho(w, r)
	})
	rt := schedtest.RuntimeWith(t, srt.Config{Workers: 2, MaxSpares: 2})
	_, addr := serveNativeOn(t, rt, server.HTTPHandler(h), server.Config{Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var conns []*websocket.Conn
	defer func() {
		for _, c := range conns {
			c.CloseNow()
		}
	}()
	for i := range sockets {
		dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
		c, _, err := websocket.Dial(dctx, "ws://"+addr+"/ws", &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{}}})
		dcancel()
		require.NoError(t, err, "upgrade %d of %d", i+1, sockets)
		conns = append(conns, c)
	}
	plain := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	for i := range 20 {
		resp, err := plain.Get("http://" + addr + "/")
		require.NoError(t, err, "plain request %d beside %d idle WebSockets", i, sockets)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, "plain", string(b))
	}
	for i, c := range conns { // every one of them still echoes
		require.NoError(t, c.Write(ctx, websocket.MessageText, []byte("ping")), "socket %d", i)
		_, got, err := c.Read(ctx)
		require.NoError(t, err, "socket %d", i)
		assert.Equal(t, "ping", string(got))
	}
}

// TestGorillaWebSocketEcho: gorilla/websocket's echo idiom, unchanged
// (Upgrade, then ReadMessage and WriteMessage in the handler until the
// client leaves), on sluice with two workers and two spare threads and on
// net/http: 50 idle connections all upgrade on both (on sluice, more than
// its spare threads), and each then echoes a short message and one of 256
// KiB (more than a socket takes at once).
func TestGorillaWebSocketEcho(t *testing.T) {
	const sockets = 50
	upgrader := gorilla.Upgrader{}
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			typ, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(typ, msg); err != nil {
				return
			}
		}
	})
	big := bytes.Repeat([]byte("0123456789abcdef"), 16<<10)
	run := func(t *testing.T, addr string) {
		var conns []*gorilla.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		dialer := gorilla.Dialer{HandshakeTimeout: 5 * time.Second}
		for i := range sockets {
			c, resp, err := dialer.Dial("ws://"+addr+"/echo", nil)
			require.NoError(t, err, "upgrade %d of %d", i+1, sockets)
			resp.Body.Close()
			conns = append(conns, c)
		}
		for i, c := range conns {
			require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
			for _, msg := range [][]byte{fmt.Appendf(nil, "hello %d", i), big} {
				require.NoError(t, c.WriteMessage(gorilla.BinaryMessage, msg), "socket %d", i)
				typ, got, err := c.ReadMessage()
				require.NoError(t, err, "socket %d", i)
				assert.Equal(t, gorilla.BinaryMessage, typ)
				require.True(t, bytes.Equal(msg, got), "socket %d: %d bytes back for %d", i, len(got), len(msg))
			}
		}
	}
	t.Run("sluice", func(t *testing.T) {
		rt := schedtest.RuntimeWith(t, srt.Config{Workers: 2, MaxSpares: 2})
		_, addr := serveNativeOn(t, rt, server.HTTPHandler(echo), server.Config{Logger: slog.New(slog.DiscardHandler)})
		run(t, addr)
	})
	t.Run("net/http", func(t *testing.T) {
		hs := httptest.NewServer(echo)
		defer hs.Close()
		run(t, strings.TrimPrefix(hs.URL, "http://"))
	})
}

// TestWebSocketsBesideEventStreams: a coroutine resumes only on the thread
// that made it. WebSockets served inside their handlers wait for their
// messages as coroutines; event streams opened after them wait between
// their events holding their threads. The streams start on threads of
// their own (routeBook), so no WebSocket is left on a thread a stream
// holds: all 20 still echo while 6 streams wait. (When every handler
// started on its worker's current thread, the first stream on a worker
// held the thread of that worker's WebSockets, and none of them echoed.)
func TestWebSocketsBesideEventStreams(t *testing.T) {
	const sockets, streams = 20, 6
	stop := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ws":
			wsEcho(w, r)
		case "/events":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: hello\n\n")
			http.NewResponseController(w).Flush()
			select { // the next event's wait, on the handler's thread
			case <-stop:
			case <-r.Context().Done():
			}
		}
	})
	rt := schedtest.Runtime(t, 2)
	_, addr := serveNativeOn(t, rt, server.HTTPHandler(h), server.Config{Logger: slog.New(slog.DiscardHandler)})
	defer close(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var conns []*websocket.Conn
	defer func() {
		for _, c := range conns {
			c.CloseNow()
		}
	}()
	for i := range sockets {
		c, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws", &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{}}})
		require.NoError(t, err, "upgrade %d", i)
		conns = append(conns, c)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range streams {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/events", nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err, "stream %d", i)
		defer resp.Body.Close()
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		require.NoError(t, err, "stream %d", i)
		assert.Equal(t, "data: hello\n", line)
	}
	for i, c := range conns {
		ectx, ecancel := context.WithTimeout(ctx, 5*time.Second)
		require.NoError(t, c.Write(ectx, websocket.MessageText, []byte("ping")), "socket %d", i)
		_, got, err := c.Read(ectx)
		ecancel()
		require.NoError(t, err, "socket %d: its echo, beside %d waiting streams", i, streams)
		assert.Equal(t, "ping", string(got))
	}
}

// TestTLSWebSocket: a WebSocket over TLS (wss) hijacks the TLS session
// with the connection.
func TestTLSWebSocket(t *testing.T) {
	scfg, ccfg := testTLS(t)
	ended := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			ended <- err
			return
		}
		defer c.CloseNow()
		for {
			typ, msg, err := c.Read(r.Context())
			if err != nil {
				ended <- err
				return
			}
			if err := c.Write(r.Context(), typ, msg); err != nil {
				ended <- err
				return
			}
		}
	})
	_, addr := serveHTTP(t, h, server.Config{TLS: scfg})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "wss://"+addr+"/echo", &websocket.DialOptions{HTTPClient: tlsClient(t, ccfg)})
	require.NoError(t, err)
	defer c.CloseNow()
	for i := range 1000 {
		msg := fmt.Sprintf("message %d", i)
		require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(msg)))
		_, got, err := c.Read(ctx)
		require.NoError(t, err)
		require.Equal(t, msg, string(got))
	}
	require.NoError(t, c.Close(websocket.StatusNormalClosure, "done"))
	select {
	case err := <-ended:
		assert.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(err), "%v", err)
	case <-ctx.Done():
		t.Fatal("the handler did not see the close")
	}
}
