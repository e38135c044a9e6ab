//go:build linux

package server

import (
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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/gatetest"
	"github.com/sluice-go/sluice/internal/syncbuf"
	"github.com/sluice-go/sluice/sched"
)

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
