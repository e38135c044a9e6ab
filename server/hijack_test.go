//go:build linux

package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	gorilla "github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/gatetest"
	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/internal/syncbuf"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/sched"
)

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
	srv, addr := serveHTTP(t, h, Config{})

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

// hijackProbe is a handler for the hijack differential: it does what the
// path says before Hijack (as much of the response as net/http lets a
// handler start), hijacks, and writes back over the raw connection what
// its bufio.Reader held, then closes.
func hijackProbe(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/101":
		w.Header().Set("Upgrade", "probe")
		w.Header().Set("Connection", "Upgrade")
		w.WriteHeader(http.StatusSwitchingProtocols)
	case "/header":
		w.WriteHeader(http.StatusAccepted)
	case "/write":
		_, _ = io.WriteString(w, "dropped")
	case "/flush":
		_, _ = io.WriteString(w, "sent")
		w.(http.Flusher).Flush()
	case "/read2":
		_, _ = io.ReadFull(r.Body, make([]byte, 2))
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	n := brw.Reader.Buffered()
	held, _ := brw.Reader.Peek(n)
	fmt.Fprintf(brw, "[hijacked: %d buffered: %q]", n, held)
	_ = brw.Flush()
}

// hijackExchange writes raw on a new connection to addr and reads
// everything until the server closes it.
func hijackExchange(t *testing.T, addr, raw string) string {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	_, err = io.WriteString(nc, raw)
	require.NoError(t, err)
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(nc)
	require.NoError(t, err, "the connection ends when the handler closes it")
	return string(b)
}

// normalizeHead sorts the header lines of the HTTP head at the start of s
// (if any) and drops Date, so that two servers' heads compare.
func normalizeHead(s string) string {
	if !strings.HasPrefix(s, "HTTP/") {
		return s
	}
	head, rest, ok := strings.Cut(s, "\r\n\r\n")
	if !ok {
		return s
	}
	lines := strings.Split(head, "\r\n")
	fields := lines[1:]
	fields = slicesDelete(fields, func(l string) bool { return strings.HasPrefix(l, "Date: ") })
	sort.Strings(fields)
	return lines[0] + "\r\n" + strings.Join(fields, "\r\n") + "\r\n\r\n" + rest
}

func slicesDelete(s []string, del func(string) bool) []string {
	out := s[:0]
	for _, v := range s {
		if !del(v) {
			out = append(out, v)
		}
	}
	return out
}

// TestHijackMatchesNetHTTP sends the same bytes to net/http and to sluice
// running hijackProbe, and compares what comes back: the bytes the server
// had read beyond the head (a pipelined request, an unread body, the start
// of the upgraded protocol) are in the hijacked Reader, and a header the
// handler wrote first goes out as net/http sends it.
func TestHijackMatchesNetHTTP(t *testing.T) {
	ref := httptest.NewUnstartedServer(http.HandlerFunc(hijackProbe))
	ref.Config.ErrorLog = log.New(io.Discard, "", 0)
	ref.Start()
	t.Cleanup(ref.Close)
	_, addr := serveHTTP(t, http.HandlerFunc(hijackProbe), Config{Logger: slog.New(slog.DiscardHandler)})

	next := "GET /next HTTP/1.1\r\nHost: x\r\n\r\n"
	cases := []struct {
		name, raw, held string
	}{
		{"pipelined request", "GET /raw HTTP/1.1\r\nHost: x\r\n\r\n" + next, next},
		{"unread body", "POST /raw HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloEXTRA", "helloEXTRA"},
		{"partly read body", "POST /read2 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloEXTRA", "lloEXTRA"},
		{"upgrade with early frame", "GET /101 HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: probe\r\n\r\n\x81\x05hello", "\x81\x05hello"},
		{"header written", "GET /header HTTP/1.1\r\nHost: x\r\n\r\n", ""},
		{"body buffered", "GET /write HTTP/1.1\r\nHost: x\r\n\r\n", ""},
		{"body flushed", "GET /flush HTTP/1.1\r\nHost: x\r\n\r\n", ""},
		{"http/1.0", "GET /raw HTTP/1.0\r\n\r\nafter", "after"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want := hijackExchange(t, ref.Listener.Addr().String(), tc.raw)
			got := hijackExchange(t, addr, tc.raw)
			t.Logf("net/http: %q", want)
			t.Logf("sluice:   %q", got)
			assert.Equal(t, normalizeHead(want), normalizeHead(got))
			assert.Contains(t, got, fmt.Sprintf("[hijacked: %d buffered: %q]", len(tc.held), tc.held))
		})
	}
}

// TestHijackErrors checks what a handler meets after Hijack, as net/http
// behaves: a second Hijack, writes, flushes and deadlines fail with
// http.ErrHijacked (net/http's Flush panics instead), WriteHeader does
// nothing, the request body is gone to the Reader, and the misuse is
// logged with its caller. Hijack after the handler returned panics.
func TestHijackErrors(t *testing.T) {
	var logs syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	returnedWriter := make(chan http.ResponseWriter, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/returns" {
			returnedWriter <- w
			return
		}
		conn, brw, err := w.(http.Hijacker).Hijack()
		if !assert.NoError(t, err) {
			return
		}
		defer conn.Close()
		under, ok := conn.(interface{ NetConn() net.Conn })
		require.True(t, ok, "NetConn reaches the socket under it: %T", conn)
		_, ok = under.NetConn().(*net.TCPConn)
		assert.True(t, ok, "a *net.TCPConn, run by Go's poller: %T", under.NetConn())
		assert.NoError(t, conn.(interface{ CloseRead() error }).CloseRead(), "TCP's half-closes are there")
		_, _, err = w.(http.Hijacker).Hijack()
		assert.ErrorIs(t, err, http.ErrHijacked, "Hijack twice")
		n, err := w.Write([]byte("x"))
		assert.Zero(t, n)
		assert.ErrorIs(t, err, http.ErrHijacked, "Write")
		_, err = w.Write(nil)
		assert.ErrorIs(t, err, http.ErrHijacked, "a zero-byte Write")
		_, err = io.WriteString(w, "x")
		assert.ErrorIs(t, err, http.ErrHijacked, "WriteString")
		w.WriteHeader(http.StatusInternalServerError) // logged, nothing sent
		rc := http.NewResponseController(w)
		assert.ErrorIs(t, rc.Flush(), http.ErrHijacked, "Flush")
		assert.ErrorIs(t, rc.SetReadDeadline(time.Now()), http.ErrHijacked)
		assert.ErrorIs(t, rc.SetWriteDeadline(time.Now()), http.ErrHijacked)
		_, err = r.Body.Read(make([]byte, 8))
		assert.ErrorIs(t, err, http.ErrHijacked, "the body's bytes are in the Reader")
		held, _ := brw.Reader.Peek(brw.Reader.Buffered())
		fmt.Fprintf(brw, "raw %s", held)
		assert.NoError(t, brw.Flush())
	})
	_, addr := serveHTTP(t, h, Config{Logger: logger})
	got := hijackExchange(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody")
	assert.Equal(t, "raw body", got, "nothing but what the handler wrote itself")
	logged := logs.String()
	assert.Contains(t, logged, "Write on a hijacked connection")
	assert.Contains(t, logged, "WriteHeader on a hijacked connection")
	assert.Contains(t, logged, "hijack_test.go", "the log names the caller")

	resps, _, _ := rawExchange(t, addr, "GET /returns HTTP/1.1\r\nHost: x\r\n\r\n", "GET")
	require.Len(t, resps, 1)
	returned := <-returnedWriter // its response has come: the handler returned
	assert.PanicsWithValue(t, "server: Hijack called after the handler returned", func() {
		_, _, _ = returned.(http.Hijacker).Hijack()
	})
	assert.ErrorIs(t, http.NewResponseController(returned).SetReadDeadline(time.Time{}), errWriterDone)
}

// TestHijackedConnectionLeavesTheServersBooks: once hijacked, a request
// whose handler goes on serving the connection no longer holds an
// admission (a concurrency gate of 1 admits the next request), is not an
// open connection, and does not hold up Shutdown; the connection works on
// after the server has shut down. The handler waits for its reads through
// sched.Await, which releases the worker, as the Hijack documentation
// recommends.
func TestHijackedConnectionLeavesTheServersBooks(t *testing.T) {
	g := gatetest.Concurrency(t, 1)
	var statuses sync.Map // outcome status seen by a gate, by path
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/tunnel" {
			_, _ = io.WriteString(w, "plain")
			return
		}
		conn, brw, err := w.(http.Hijacker).Hijack()
		if !assert.NoError(t, err) {
			return
		}
		defer conn.Close()
		_, _ = io.WriteString(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		_ = brw.Flush()
		for {
			line, err := sched.Await(r.Context(), func(context.Context) (string, error) { return brw.ReadString('\n') })
			if err != nil {
				return
			}
			_, _ = io.WriteString(brw, "echo "+line)
			if err := brw.Flush(); err != nil {
				return
			}
		}
	})
	rec := &outcomeRecorder{statuses: &statuses}
	srv, addr := serveHTTP(t, h, Config{Admission: admit.Config{Gates: []admit.Policy{g, rec}}})

	tunnel, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer tunnel.Close()
	resp, br := roundTripOn(t, tunnel, "GET /tunnel HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n", "GET")
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	echo := func(s string) string {
		t.Helper()
		_ = tunnel.SetDeadline(time.Now().Add(5 * time.Second))
		_, err := io.WriteString(tunnel, s+"\n")
		require.NoError(t, err)
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		return strings.TrimSuffix(line, "\n")
	}
	assert.Equal(t, "echo one", echo("one"))

	assert.Equal(t, 0, srv.OpenConns())
	assert.Equal(t, int64(0), srv.Stats().InFlight)
	st, _ := statuses.Load("/tunnel")
	assert.Equal(t, int64(http.StatusSwitchingProtocols), st, "the admission ended at Hijack, as a 101")
	// The concurrency gate (1) admits another request while the tunnel's
	// handler still runs.
	resps, bodies, _ := rawExchange(t, addr, "GET /plain HTTP/1.1\r\nHost: x\r\n\r\n", "GET")
	require.Len(t, resps, 1)
	assert.Equal(t, http.StatusOK, resps[0].StatusCode)
	assert.Equal(t, "plain", bodies[0])

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, srv.Shutdown(ctx), "Shutdown does not wait for hijacked connections")
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, "echo after shutdown", echo("after shutdown"), "the hijacked connection is the handler's")
}

// TestHijackFromAGoroutine: a goroutine the handler started may hijack,
// whether the handler waits for it by blocking its thread (the worker then
// goes on on a spare, which does the hijack's work on the connection) or
// through sched.Await.
func TestHijackFromAGoroutine(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve := func() error {
			w.Header().Set("Upgrade", "echo")
			w.Header().Set("Connection", "Upgrade")
			w.WriteHeader(http.StatusSwitchingProtocols)
			conn, brw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return err
			}
			defer conn.Close()
			line, err := brw.ReadString('\n')
			if err != nil {
				return err
			}
			_, _ = brw.WriteString("echo " + line)
			return brw.Flush()
		}
		done := make(chan error, 1)
		go func() { done <- serve() }()
		if r.URL.Path == "/await" {
			_, err := sched.Await(r.Context(), func(context.Context) (int, error) { return 0, <-done })
			assert.NoError(t, err)
			return
		}
		assert.NoError(t, <-done)
	})
	_, addr := serveHTTP(t, h, Config{})
	for _, path := range []string{"/blocking", "/await"} {
		got := hijackExchange(t, addr, "GET "+path+" HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\nhello\n")
		assert.True(t, strings.HasPrefix(got, "HTTP/1.1 101 Switching Protocols\r\n"), "%s: %q", path, got)
		assert.True(t, strings.HasSuffix(got, "\r\n\r\necho hello\n"), "%s: %q", path, got)
	}
}

// outcomeRecorder is an admission policy that admits everything and
// records the status of each request's outcome by path.
type outcomeRecorder struct{ statuses *sync.Map }

func (o *outcomeRecorder) Admit(*admit.Attempt) *admit.Refusal { return nil }
func (o *outcomeRecorder) Done(a *admit.Attempt, out admit.Outcome) {
	o.statuses.Store(a.Path, int64(out.Status))
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
	_, addr := serveNativeOn(t, rt, HTTPHandler(h), Config{Logger: slog.New(slog.DiscardHandler)})
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
		_, addr := serveNativeOn(t, rt, HTTPHandler(echo), Config{Logger: slog.New(slog.DiscardHandler)})
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
	_, addr := serveNativeOn(t, rt, HTTPHandler(h), Config{Logger: slog.New(slog.DiscardHandler)})
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
