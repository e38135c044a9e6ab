//go:build linux

package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/gatetest"
	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/internal/syncbuf"
	"github.com/sluice-go/sluice/lanes"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/sched"
)

// refusePath is a policy that refuses the requests for one path with 429,
// and counts what it admitted and saw end.
type refusePath struct {
	path       string
	mu         sync.Mutex
	admitted   int
	done       int
	lastStatus int
}

func (p *refusePath) Admit(a *admit.Attempt) *admit.Refusal {
	if a.Path == p.path {
		return &admit.Refusal{Reason: "test-refused", Status: http.StatusTooManyRequests, RetryAfter: 2 * time.Second}
	}
	p.mu.Lock()
	p.admitted++
	p.mu.Unlock()
	return nil
}

func (p *refusePath) Done(a *admit.Attempt, o admit.Outcome) {
	p.mu.Lock()
	p.done++
	p.lastStatus = o.Status
	p.mu.Unlock()
}

// h2Handler answers with where it ran: the protocol, whether it ran as a
// coroutine on a worker, and the client's address (one per connection).
func h2Handler(w http.ResponseWriter, r *http.Request) {
	if d := r.URL.Query().Get("sleep"); d != "" {
		dur, _ := time.ParseDuration(d)
		_ = sched.Sleep(r.Context(), dur) // releases the worker
	}
	w.Header().Set("X-Remote", r.RemoteAddr)
	fmt.Fprintf(w, "%s coroutine=%v %s", r.Proto, sched.InCoroutine(r.Context()), r.URL.Path)
}

// h2cClient speaks HTTP/2 without TLS (prior knowledge) and nothing else.
func h2cClient(t testing.TB) *http.Client {
	t.Helper()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// doAsync sends req with c on a goroutine of its own, and delivers the
// answer's body, or the error's text.
func doAsync(c *http.Client, req *http.Request) <-chan string {
	got := make(chan string, 1)
	go func() {
		resp, err := c.Do(req)
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	return got
}

// h2TLSClient speaks HTTP/2 over TLS (ALPN).
func h2TLSClient(t testing.TB, cfg *tls.Config) *http.Client {
	t.Helper()
	// A clone: the Transport adds "h2" to the NextProtos of the
	// configuration it is given.
	tr := &http.Transport{TLSClientConfig: cfg.Clone(), ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// checkStreams sends many concurrent requests on one HTTP/2 connection,
// one of them refused by the policy while the others (some of them slow,
// so that the refusal comes while they run) complete.
func checkStreams(t *testing.T, c *http.Client, base string, pol *refusePath) {
	t.Helper()
	// One request first, so that the others share its connection.
	resp, body := getBody(t, c, base+"/warm")
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, 2, resp.ProtoMajor, "HTTP/2")
	assert.Equal(t, "HTTP/2.0 coroutine=true /warm", body, "the handler runs as a coroutine")
	remote := resp.Header.Get("X-Remote")

	const n = 40
	var wg sync.WaitGroup
	type result struct {
		status int
		proto  int
		body   string
		hdr    http.Header
		err    error
	}
	results := make([]result, n)
	for i := range n {
		wg.Go(func() {
			path := fmt.Sprintf("/s%d?sleep=50ms", i)
			if i == n/2 {
				path = "/refuse"
			}
			resp, err := c.Get(base + path)
			if err != nil {
				results[i].err = err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			results[i] = result{status: resp.StatusCode, proto: resp.ProtoMajor, body: string(b), hdr: resp.Header, err: err}
		})
	}
	wg.Wait()
	for i, r := range results {
		require.NoError(t, r.err, "request %d", i)
		assert.Equal(t, 2, r.proto, "request %d", i)
		if i == n/2 {
			assert.Equal(t, http.StatusTooManyRequests, r.status)
			assert.Equal(t, "1", r.hdr.Get(NotStartedHeader))
			assert.Equal(t, "test-refused", r.hdr.Get(ReasonHeader))
			assert.Equal(t, "2", r.hdr.Get("Retry-After"))
			assert.Equal(t, "request not started: test-refused\n", r.body)
			continue
		}
		assert.Equal(t, 200, r.status, "request %d", i)
		assert.Equal(t, fmt.Sprintf("HTTP/2.0 coroutine=true /s%d", i), r.body)
		assert.Equal(t, remote, r.hdr.Get("X-Remote"), "request %d: on the same connection", i)
	}
	// The connection was kept: one more request on it.
	resp, _ = getBody(t, c, base+"/after")
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, remote, resp.Header.Get("X-Remote"), "the rejection kept the connection")
	require.Eventually(t, func() bool {
		pol.mu.Lock()
		defer pol.mu.Unlock()
		return pol.done == pol.admitted
	}, 5*time.Second, 5*time.Millisecond, "every admitted stream ended (Done)")
	pol.mu.Lock()
	defer pol.mu.Unlock()
	assert.Equal(t, n+1, pol.admitted)
	assert.Equal(t, 200, pol.lastStatus)
}

func TestH2CPriorKnowledgeStreams(t *testing.T) {
	pol := &refusePath{path: "/refuse"}
	srv, addr := serveHTTP(t, http.HandlerFunc(h2Handler), Config{Admission: admit.Config{Policies: []admit.Policy{pol}}})
	checkStreams(t, h2cClient(t), "http://"+addr, pol)
	assert.Equal(t, 1, srv.OpenConns(), "the HTTP/2 connection counts")
	// HTTP/1.1 goes on beside it.
	resp, body := getBody(t, http.DefaultClient, "http://"+addr+"/h1")
	assert.Equal(t, 1, resp.ProtoMajor)
	assert.Equal(t, "HTTP/1.1 coroutine=true /h1", body)
}

func TestH2TLSStreams(t *testing.T) {
	scfg, ccfg := testTLS(t)
	pol := &refusePath{path: "/refuse"}
	_, addr := serveHTTP(t, http.HandlerFunc(h2Handler), Config{TLS: scfg, Admission: admit.Config{Policies: []admit.Policy{pol}}})
	checkStreams(t, h2TLSClient(t, ccfg), "https://"+addr, pol)

	// A client that offers both gets h2; one that offers only HTTP/1.1
	// gets it.
	tc, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ccfg.RootCAs, NextProtos: []string{"h2", "http/1.1"}})
	require.NoError(t, err)
	assert.Equal(t, "h2", tc.ConnectionState().NegotiatedProtocol)
	tc.Close()
	resp, body := getBody(t, tlsClient(t, ccfg), "https://"+addr+"/h1")
	assert.Equal(t, 1, resp.ProtoMajor)
	assert.Equal(t, "HTTP/1.1 coroutine=true /h1", body)
}

// TestH2BodyEcho: a request body larger than the windows and the response
// buffer goes both ways through the handler's awaited reads and writes.
func TestH2BodyEcho(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.Copy(w, r.Body)
	})
	scfg, ccfg := testTLS(t)
	for _, tc := range []struct {
		name string
		cfg  Config
		c    *http.Client
		url  string
	}{
		{"h2c", Config{}, h2cClient(t), "http://"},
		{"h2", Config{TLS: scfg}, h2TLSClient(t, ccfg), "https://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := serveHTTP(t, echo, tc.cfg)
			data := make([]byte, 3<<20+17)
			_, _ = rand.Read(data)
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					resp, err := tc.c.Post(tc.url+addr+"/echo", "application/octet-stream", bytes.NewReader(data))
					if !assert.NoError(t, err) {
						return
					}
					defer resp.Body.Close()
					b, err := io.ReadAll(resp.Body)
					assert.NoError(t, err)
					assert.Equal(t, 2, resp.ProtoMajor)
					assert.True(t, bytes.Equal(data, b), "echoed %d bytes of %d", len(b), len(data))
				})
			}
			wg.Wait()
		})
	}
}

// TestH2MaxBodyBytes: a declared body beyond MaxBodyBytes is answered 413
// on its stream, as on HTTP/1.1; a longer body than declared-less fails
// the read with *http.MaxBytesError.
func TestH2MaxBodyBytes(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%T", err)
	})
	_, addr := serveHTTP(t, h, Config{MaxBodyBytes: 1000})
	c := h2cClient(t)
	resp, err := c.Post("http://"+addr+"/", "text/plain", bytes.NewReader(make([]byte, 2000)))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	// Unknown length: the read fails.
	resp, err = c.Post("http://"+addr+"/", "text/plain", io.MultiReader(bytes.NewReader(make([]byte, 2000))))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "*http.MaxBytesError", string(b))
}

// TestH2QueuedStream: a stream refused by a gate waits in the queue and
// starts when the gate opens.
func TestH2QueuedStream(t *testing.T) {
	conc := gatetest.Concurrency(t, 1)
	release := make(chan struct{})
	entered := make(chan string, 2)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- r.URL.Path
		if r.URL.Path == "/first" {
			<-release
		}
		_, _ = io.WriteString(w, r.URL.Path)
	})
	srv, addr := serveHTTP(t, h, queued(5*time.Second, conc))
	c := h2cClient(t)
	var wg sync.WaitGroup
	for _, p := range []string{"/first", "/second"} {
		if p == "/second" {
			require.Equal(t, "/first", <-entered)
			require.Eventually(t, func() bool { return srv.OpenConns() == 1 }, 5*time.Second, time.Millisecond)
		}
		wg.Go(func() {
			resp, body := getBody(t, c, "http://"+addr+p)
			assert.Equal(t, 200, resp.StatusCode, p)
			assert.Equal(t, p, body)
		})
	}
	require.Eventually(t, func() bool { return srv.Stats().Queued > 0 }, 5*time.Second, time.Millisecond)
	close(release)
	assert.Equal(t, "/second", <-entered)
	wg.Wait()
}

func TestH2Curl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is not installed (apt-get install -y curl)")
		}
		t.Skip("curl is not installed; install it (apt-get install -y curl) to run this test")
	}
	pol := &refusePath{path: "/refuse"}
	cfg := Config{Admission: admit.Config{Policies: []admit.Policy{pol}}}
	_, plain := serveHTTP(t, http.HandlerFunc(h2Handler), cfg)
	scfg, _ := testTLS(t)
	cfg.TLS = scfg
	_, secure := serveHTTP(t, http.HandlerFunc(h2Handler), cfg)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"h2c prior knowledge", []string{"--http2-prior-knowledge", "http://" + plain}},
		{"h2 over TLS", []string{"--http2", "-k", "https://" + secure}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := tc.args[len(tc.args)-1]
			flags := tc.args[:len(tc.args)-1]
			// One URL per run: curl 7.88 fails ("Error in the HTTP2
			// framing layer") on a second URL over h2c with prior
			// knowledge against net/http's server too. Go's client checks
			// that a rejection keeps the connection.
			run := func(path string, more ...string) string {
				out, _ := curl(t, append(append(append([]string{}, flags...), more...), base+path)...)
				return out
			}
			w := []string{"-w", "\n%{http_version} %{http_code}\n"}
			assert.Equal(t, "request not started: test-refused\n\n2 429\n", run("/refuse", w...))
			assert.Equal(t, "HTTP/2.0 coroutine=true /ok\n2 200\n", run("/ok", w...))
			out := run("/refuse", "-i")
			assert.True(t, strings.HasPrefix(out, "HTTP/2 429"), "%q", out)
			assert.Contains(t, strings.ToLower(out), "sluice-not-started: 1")
			assert.Contains(t, strings.ToLower(out), "retry-after: 2")
		})
	}
}

// TestH2Shutdown: Shutdown lets a running stream finish, sends GOAWAY,
// and returns once the connection closed.
func TestH2Shutdown(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-release
		}
		_, _ = io.WriteString(w, "done")
	})
	srv, addr := serveHTTP(t, h, Config{})
	c := h2cClient(t)
	got := make(chan string, 1)
	go func() {
		resp, err := c.Get("http://" + addr + "/slow")
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- fmt.Sprintf("%d %s", resp.StatusCode, b)
	}()
	<-entered
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- srv.Shutdown(ctx)
	}()
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned with a stream running: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	assert.Equal(t, 1, srv.OpenConns())
	close(release)
	assert.Equal(t, "200 done", <-got)
	require.NoError(t, <-done)
	assert.Equal(t, 0, srv.OpenConns())
}

// TestH2Close: Close ends the connection at once; the running handler's
// context is cancelled and Close waits for it.
func TestH2Close(t *testing.T) {
	entered := make(chan struct{})
	var ended sync.WaitGroup
	ended.Add(1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer ended.Done()
		close(entered)
		<-r.Context().Done()
	})
	srv, addr := serveHTTP(t, h, Config{Logger: slog.New(slog.DiscardHandler)})
	c := h2cClient(t)
	errc := make(chan error, 1)
	go func() {
		resp, err := c.Get("http://" + addr + "/")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, srv.Close(ctx))
	ended.Wait()
	assert.Error(t, <-errc)
	assert.Equal(t, 0, srv.OpenConns())
}

// TestH2Off: a native Handler server and DisableHTTP2 answer the preface
// 505 and choose HTTP/1.1 by ALPN.
func TestH2Off(t *testing.T) {
	native := HandlerFunc(func(w *ResponseWriter, r *Request) { _, _ = w.WriteString("native") })
	scfg, ccfg := testTLS(t)
	_, a1 := serveNative(t, native, Config{})
	_, a2 := serveHTTP(t, http.HandlerFunc(h2Handler), Config{DisableHTTP2: true})
	for _, addr := range []string{a1, a2} {
		resps, _, closed := rawExchange(t, addr, h2Preface, "GET")
		require.Len(t, resps, 1)
		assert.Equal(t, http.StatusHTTPVersionNotSupported, resps[0].StatusCode)
		assert.True(t, closed)
	}
	_, a3 := serveNative(t, native, Config{TLS: scfg})
	_, a4 := serveHTTP(t, http.HandlerFunc(h2Handler), Config{TLS: scfg, DisableHTTP2: true})
	for _, addr := range []string{a3, a4} {
		tc, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ccfg.RootCAs, NextProtos: []string{"h2", "http/1.1"}})
		require.NoError(t, err)
		assert.Equal(t, "http/1.1", tc.ConnectionState().NegotiatedProtocol)
		tc.Close()
	}
}

// TestH2PrefaceInPieces: the preface sent a byte at a time is still
// recognized.
func TestH2PrefaceInPieces(t *testing.T) {
	_, addr := serveHTTP(t, http.HandlerFunc(h2Handler), Config{})
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	for i := range len(h2Preface) {
		_, err := nc.Write([]byte{h2Preface[i]})
		require.NoError(t, err)
		time.Sleep(time.Millisecond)
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	hdr := make([]byte, 9)
	_, err = io.ReadFull(nc, hdr)
	require.NoError(t, err)
	assert.Equal(t, byte(0x4), hdr[3], "a SETTINGS frame, not an HTTP/1.1 answer")
}

// TestH2BodyReadReleasesTheWorker: a handler waiting for its request
// body's next DATA frame holds no worker (the read goes through
// sched.Await): on a runtime of one worker, without the blocked-worker
// rescue, an HTTP/1.1 request is served meanwhile.
func TestH2BodyReadReleasesTheWorker(t *testing.T) {
	entered := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 1 {
			_, _ = io.WriteString(w, "h1")
			return
		}
		first := make([]byte, 1)
		_, _ = io.ReadFull(r.Body, first)
		close(entered)
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d", len(b)+1)
	})
	rt := schedtest.RuntimeWith(t, srt.Config{Workers: 1, BlockedAfter: -1})
	_, addr := serveNativeOn(t, rt, HTTPHandler(h), Config{})
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/", pr)
	require.NoError(t, err)
	got := doAsync(h2cClient(t), req)
	_, err = pw.Write([]byte("x"))
	require.NoError(t, err)
	<-entered
	c := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	defer c.Transport.(*http.Transport).CloseIdleConnections()
	_, body := getBody(t, c, "http://"+addr+"/h1")
	assert.Equal(t, "h1", body, "served while the HTTP/2 handler waits for its body")
	_, err = pw.Write(make([]byte, 9999))
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	assert.Equal(t, "10000", <-got)
}

// TestH2LateStreamNotStarted: a stream whose coroutine would start after
// waiting in its worker's queue past the age limit is answered unstarted,
// as an HTTP/1.1 request that waited as long in its socket.
func TestH2LateStreamNotStarted(t *testing.T) {
	spinning := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/spin" {
			close(spinning)
			for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
			}
		}
		_, _ = io.WriteString(w, r.URL.Path)
	})
	rt := schedtest.RuntimeWith(t, srt.Config{Workers: 1, BlockedAfter: -1}) // the spin holds the worker
	_, addr := serveNativeOn(t, rt, HTTPHandler(h), Config{Admission: admit.Config{MaxAge: 50 * time.Millisecond}})
	c := h2cClient(t)
	_, body := getBody(t, c, "http://"+addr+"/warm")
	require.Equal(t, "/warm", body)
	spun := make(chan struct{})
	go func() {
		defer close(spun)
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get("http://" + addr + "/spin")
		if assert.NoError(t, err) {
			resp.Body.Close()
		}
	}()
	<-spinning
	t0 := time.Now()
	resp, body := getBody(t, c, "http://"+addr+"/late")
	t.Logf("late answered after %v", time.Since(t0))
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	assert.Equal(t, "1", resp.Header.Get(NotStartedHeader))
	<-spun
	_, body = getBody(t, c, "http://"+addr+"/after")
	assert.Equal(t, "/after", body, "the connection is kept")
}

// TestH2Informational: a 103 Early Hints goes out before the response, and
// the handler's status is the final one.
func TestH2Informational(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "ok")
	})
	_, addr := serveHTTP(t, h, Config{})
	var got []int
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, _ textproto.MIMEHeader) error { got = append(got, code); return nil },
	})
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/", nil)
	require.NoError(t, err)
	resp, err := h2cClient(t).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	assert.Equal(t, "ok", string(b))
	assert.Equal(t, []int{http.StatusEarlyHints}, got)
}

// TestH2Lanes: a stream goes to the lane its route names, and its handler
// runs there, on a worker.
func TestH2Lanes(t *testing.T) {
	rt := laneRuntime(t, 2, lanes.Spec{Name: "background", Priority: 2, Shares: 10})
	rec := &laneRecorder{}
	cfg := Config{
		Lanes:     Lanes{Routes: map[string]string{"GET /export/": "background"}},
		Admission: admit.Config{Policies: []admit.Policy{rec}},
	}
	_, addr := serveNativeOn(t, rt, HTTPHandler(http.HandlerFunc(h2Handler)), cfg)
	c := h2cClient(t)
	before := ranIn(rt)["background"]
	_, body := getBody(t, c, "http://"+addr+"/export/a?sleep=1ms")
	assert.Equal(t, "HTTP/2.0 coroutine=true /export/a", body)
	_, body = getBody(t, c, "http://"+addr+"/other")
	assert.Equal(t, "HTTP/2.0 coroutine=true /other", body)
	assert.Equal(t, "background", rec.lane("/export/a"))
	assert.Equal(t, "", rec.lane("/other"))
	assert.GreaterOrEqual(t, ranIn(rt)["background"]-before, int64(2), "started and resumed in its lane")
}

// TestH2QueuedStreamReset: a queued stream whose client gives up leaves the
// queue, counted as canceled (not as a rejection: a Rapid Reset is not the
// server shedding), and its connection serves on.
func TestH2QueuedStreamReset(t *testing.T) {
	conc := gatetest.Concurrency(t, 1)
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
		_, _ = io.WriteString(w, r.URL.Path)
	})
	srv, addr := serveHTTP(t, h, queued(10*time.Second, conc))
	c := h2cClient(t)
	held := make(chan struct{})
	go func() {
		defer close(held)
		_, body := getBody(t, c, "http://"+addr+"/hold")
		assert.Equal(t, "/hold", body)
	}()
	require.Eventually(t, func() bool { return srv.Stats().InFlight == 1 }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/queued", nil)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() {
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	require.Eventually(t, func() bool { return srv.Stats().Queued > 0 }, 5*time.Second, time.Millisecond)
	cancel()
	assert.Error(t, <-errc)
	require.Eventually(t, func() bool { return srv.Stats().Canceled == 1 }, 5*time.Second, time.Millisecond)
	assert.Zero(t, srv.Stats().Rejected, "the client left: the server refused nothing")
	close(release)
	<-held
	_, body := getBody(t, c, "http://"+addr+"/after")
	assert.Equal(t, "/after", body)
}

// TestH2FlushStreams: over HTTP/2 a flushed part of the body reaches the
// client while the handler is still running (a server-sent event stream),
// and http.ResponseController's deadlines are taken.
func TestH2FlushStreams(t *testing.T) {
	got := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			http.Error(w, "write deadline: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if err := rc.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
			http.Error(w, "read deadline: "+err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "first\n")
		if err := rc.Flush(); err != nil {
			return
		}
		// The client has the first part before the second is written.
		_, err := sched.Await(r.Context(), func(ctx context.Context) (struct{}, error) {
			select {
			case <-got:
				return struct{}{}, nil
			case <-ctx.Done():
				return struct{}{}, ctx.Err()
			}
		})
		if err != nil {
			return
		}
		_, _ = io.WriteString(w, "second\n")
		w.(http.Flusher).Flush()
	})
	_, addr := serveHTTP(t, h, Config{})
	resp, err := h2cClient(t).Get("http://" + addr + "/events")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 2, resp.ProtoMajor)
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "first\n", line)
	close(got)
	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	assert.Equal(t, "second\n", string(rest))
}

// TestH2HandlerPanic: a stream whose handler panics is reset (its response
// never looks complete), the panic is logged with its stack, and the
// connection's other streams and the workers go on.
func TestH2HandlerPanic(t *testing.T) {
	var logged syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	_, addr := serveHTTP(t, http.HandlerFunc(panicking), Config{Logger: log})
	c := h2cClient(t)
	for _, path := range []string{"/panic", "/panic", "/panic", "/abort"} {
		resp, err := c.Get("http://" + addr + path)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		assert.Error(t, err, "%s: the stream is reset", path)
	}
	resp, err := c.Get("http://" + addr + "/ok")
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, 2, resp.ProtoMajor)
	assert.Equal(t, "fine", string(b))
	assert.Equal(t, 3, strings.Count(logged.String(), "handler panic"))
	assert.Contains(t, logged.String(), "panic=boom")
	assert.NotContains(t, logged.String(), "ErrAbortHandler")
	assert.Contains(t, logged.String(), "stack=")
}

// "OPTIONS *" over HTTP/2 is answered as over HTTP/1.1, and as net/http
// answers it: 200, empty, without the handler (a ServeMux would say 400).
func TestH2OptionsStar(t *testing.T) {
	var ran atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { ran.Store(true) })
	_, addr := serveHTTP(t, mux, Config{})
	for _, c := range []*http.Client{h2cClient(t), http.DefaultClient} {
		req, err := http.NewRequest(http.MethodOptions, "http://"+addr, nil)
		require.NoError(t, err)
		req.URL.Opaque = "*"
		resp, err := c.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, resp.Proto)
		assert.Equal(t, "0", resp.Header.Get("Content-Length"), resp.Proto)
	}
	assert.False(t, ran.Load(), "the handler never ran")
}

// grpcCall sends one gRPC call's request (a POST of application/grpc, with
// an empty message) on a new h2c connection and reads the answer's frames
// until the stream ends: the header fields of the first HEADERS frame,
// whether that frame ended the stream (gRPC's Trailers-Only response), and
// the DATA bytes.
func grpcCall(t *testing.T, addr string, extra ...[2]string) (fields map[string]string, trailersOnly bool, data int) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = io.WriteString(nc, http2.ClientPreface)
	require.NoError(t, err)
	fr := http2.NewFramer(nc, nc)
	require.NoError(t, fr.WriteSettings())
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range append([][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/pkg.Service/Method"},
		{"content-type", "application/grpc"}, {"te", "trailers"}}, extra...) {
		require.NoError(t, enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}))
	}
	require.NoError(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndHeaders: true}))
	require.NoError(t, fr.WriteData(1, true, []byte{0, 0, 0, 0, 0})) // an empty message
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		require.NoError(t, err)
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				require.NoError(t, fr.WriteSettingsAck())
			}
		case *http2.MetaHeadersFrame:
			if fields == nil {
				fields = map[string]string{}
				for _, hf := range f.Fields {
					fields[hf.Name] = hf.Value
				}
				trailersOnly = f.StreamEnded()
			}
			if f.StreamEnded() {
				return fields, trailersOnly, data
			}
		case *http2.DataFrame:
			data += len(f.Data())
			if f.StreamEnded() {
				return fields, trailersOnly, data
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("stream reset: %v", f.ErrCode)
		}
	}
}

// TestH2GRPCRejection: a gRPC call that admission refuses is answered in
// gRPC's terms, as a Trailers-Only response: status 200, application/grpc,
// grpc-status by the refusal (UNAVAILABLE for an overload,
// RESOURCE_EXHAUSTED for a quota, DEADLINE_EXCEEDED for a caller out of
// time), the reason in grpc-message, Retry-After as grpc's retry pushback,
// and the not-started marker for the client to read as metadata.
func TestH2GRPCRejection(t *testing.T) {
	for _, c := range []struct {
		refusal  admit.Refusal
		status   string
		pushback string
	}{
		{admit.Refusal{Reason: "busy"}, "14", "1000"},
		{admit.Refusal{Reason: "rate-limit", Status: http.StatusTooManyRequests, RetryAfter: 3 * time.Second}, "8", "3000"},
		{admit.Refusal{Reason: "deadline", RetryAfter: -1}, "4", ""},
	} {
		t.Run(c.refusal.Reason, func(t *testing.T) {
			r := c.refusal
			_, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{Admission: admit.Config{Policies: []admit.Policy{&quotaPolicy{&r}}}})
			fields, trailersOnly, data := grpcCall(t, addr)
			assert.True(t, trailersOnly, "one HEADERS frame ends the stream")
			assert.Zero(t, data)
			assert.Equal(t, "200", fields[":status"])
			assert.Equal(t, "application/grpc", fields["content-type"])
			assert.Equal(t, c.status, fields["grpc-status"])
			assert.Equal(t, "request not started: "+r.Reason, fields["grpc-message"])
			assert.Equal(t, c.pushback, fields["grpc-retry-pushback-ms"])
			assert.Equal(t, "1", fields["sluice-not-started"])
			assert.Equal(t, r.Reason, fields["sluice-reject-reason"])
		})
	}
	// A call whose grpc-timeout has run out is refused DEADLINE_EXCEEDED by
	// the default configuration.
	_, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{})
	fields, trailersOnly, _ := grpcCall(t, addr, [2]string{"grpc-timeout", "0m"})
	assert.True(t, trailersOnly)
	assert.Equal(t, "4", fields["grpc-status"])
	assert.Equal(t, "request not started: deadline", fields["grpc-message"])
}

// A gRPC call (content-type application/grpc) runs on its stream's own
// goroutine, not on a worker: grpc-go's ServeHTTP waits for the whole
// life of a call, so on a worker each open stream held the worker's thread
// until it was handed over. With one worker, 100 open streams leave the
// server answering at once, with no hand-over, and the calls are not
// coroutines of a worker.
func TestH2GRPCCallsRunOffTheWorkers(t *testing.T) {
	rt := schedtest.Runtime(t, 1)
	var onWorker atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/grpc" {
			_, _ = io.WriteString(w, "plain")
			return
		}
		if sched.InCoroutine(r.Context()) {
			onWorker.Add(1)
		}
		w.Header().Set("Content-Type", "application/grpc")
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		<-r.Context().Done() // a stream open until the client ends it
	})
	_, addr := serveNativeOn(t, rt, HTTPHandler(h), Config{})
	c := h2cClient(t)
	const streams = 100
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	opened := make(chan error, streams)
	for range streams {
		wg.Go(func() {
			// One empty message, then the server streams until the call
			// ends: a server-streaming call, as grpc-go's Watch.
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/pkg.Service/Watch", bytes.NewReader(make([]byte, 5)))
			if err != nil {
				opened <- err
				return
			}
			req.Header.Set("Content-Type", "application/grpc")
			resp, err := c.Do(req)
			opened <- err
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	for range streams {
		require.NoError(t, <-opened)
	}
	get := func(c *http.Client) {
		resp, err := c.Get("http://" + addr + "/")
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, "plain", string(b))
	}
	get(c)              // over HTTP/2, beside the open streams
	get(&http.Client{}) // over HTTP/1.1
	snap := rt.Snapshot()
	cancel()
	wg.Wait()
	assert.Zero(t, onWorker.Load(), "gRPC calls ran as coroutines of a worker")
	assert.Zero(t, snap.Handovers, "an open gRPC stream held a worker's thread")
	assert.Zero(t, snap.Blocked)
}

// A gRPC call's body is every message of its life: MaxBodyBytes does not
// limit it as a whole (gRPC limits each message), while it still limits
// any other request's.
func TestH2GRPCBodyNotLimitedAsAWhole(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		fmt.Fprint(w, n)
	})
	_, addr := serveHTTP(t, h, Config{MaxBodyBytes: 1024})
	c := h2cClient(t)
	for _, ct := range []string{"application/grpc", "application/octet-stream"} {
		// A body of unknown length, as a stream's is.
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/pkg.Service/Upload", io.MultiReader(bytes.NewReader(make([]byte, 4096))))
		require.NoError(t, err)
		req.Header.Set("Content-Type", ct)
		resp, err := c.Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		if ct == "application/grpc" {
			assert.Equal(t, http.StatusOK, resp.StatusCode, ct)
			assert.Equal(t, "4096", string(b), ct)
		} else {
			assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, ct)
		}
	}
}

// Streams of a handler that sleeps (a call without sched.Await) all run at
// once, as on net/http: the first one found blocked teaches its worker the
// route (routeBook), and the next ones give their worker away as they
// begin, rather than each holding it until the watchdog finds it blocked.
// (Before, they were handed over one after another, 4 to 6 ms each, and
// those that waited past the age limit were refused: 164 of 200 with a
// limit of 100 ms.)
func TestH2SleepingStreamsAllRun(t *testing.T) {
	// The age limit is raised from 100 to 400 ms for the race detector's
	// slower hand-overs.
	const streams = 200
	rt := schedtest.Runtime(t, 2)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		_, _ = io.WriteString(w, "slept")
	})
	cfg := Config{Logger: slog.New(slog.DiscardHandler), Admission: admit.Config{MaxAge: 400 * time.Millisecond}}
	_, addr := serveNativeOn(t, rt, HTTPHandler(h), cfg)
	c := h2cClient(t)
	// One stream first, on each worker's connection, as a warm-up would.
	resp, err := c.Get("http://" + addr + "/sleep")
	require.NoError(t, err)
	resp.Body.Close()
	statuses := make(chan int, streams)
	var wg sync.WaitGroup
	for range streams {
		wg.Go(func() {
			resp, err := c.Get("http://" + addr + "/sleep")
			if err != nil {
				statuses <- 0
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses <- resp.StatusCode
		})
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	assert.Equal(t, map[int]int{http.StatusOK: streams}, count)
}

// A body of known length up to h2ReadFirst is read whole before the
// handler runs: the handler starts once its last byte came, and reads it
// from memory, with the error the read ended with.
func TestH2SmallBodyIsReadBeforeTheHandler(t *testing.T) {
	started := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		b, err := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d %v %s", len(b), err, r.Trailer.Get("X-End"))
	})
	_, addr := serveHTTP(t, h, Config{})
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/", pr)
	require.NoError(t, err)
	req.ContentLength = 10
	req.Trailer = http.Header{"X-End": nil}
	got := doAsync(h2cClient(t), req)
	_, err = pw.Write([]byte("x"))
	require.NoError(t, err)
	select {
	case <-started:
		t.Fatal("the handler started before its body came")
	case <-time.After(50 * time.Millisecond):
	}
	_, err = pw.Write(make([]byte, 9))
	require.NoError(t, err)
	req.Trailer.Set("X-End", "yes")
	require.NoError(t, pw.Close())
	assert.Equal(t, "10 <nil> yes", schedtest.Recv(t, got, "the answer"))
}

// dripBody is a request body that gives its bytes a few at a time.
type dripBody struct {
	left, per int
}

func (b *dripBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), b.per, b.left)
	b.left -= n
	return n, nil
}

func (b *dripBody) Close() error { return nil }

// A body read first holds what came, not what its Content-Length
// declares: streams that declare 64 KiB and send a little must not hold
// 64 KiB each. Its bytes are all there, in order of arrival.
func TestH2BodyReadFirstGrowsAsItComes(t *testing.T) {
	r, err := http.NewRequest(http.MethodPost, "/", nil)
	require.NoError(t, err)
	r.ContentLength = h2ReadFirst
	r.Body = &dripBody{left: 100, per: 7}
	require.True(t, readBodyFirst(r))
	b := r.Body.(*h2ReadBody)
	assert.Len(t, b.data, 100)
	assert.LessOrEqual(t, cap(b.data), 4<<10, "not the 64 KiB declared")
	assert.Equal(t, io.EOF, b.err)

	r.ContentLength = 10 << 10
	r.Body = &dripBody{left: 10 << 10, per: 1000}
	require.True(t, readBodyFirst(r))
	got, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	assert.Len(t, got, 10<<10)
}

// A body read first is the client's upload time, not the request's age:
// a stream whose body comes later than the age limit, on an idle server,
// is served, not refused for its age.
func TestH2SlowBodyIsNotAge(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d %v", len(b), err)
	})
	_, addr := serveHTTP(t, h, Config{Admission: admit.Config{MaxAge: 50 * time.Millisecond}})
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/slow", pr)
	require.NoError(t, err)
	req.ContentLength = 2
	got := doAsync(h2cClient(t), req)
	_, err = pw.Write([]byte("x"))
	require.NoError(t, err)
	time.Sleep(150 * time.Millisecond) // three times the age limit
	_, err = pw.Write([]byte("y"))
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	assert.Equal(t, "2 <nil>", schedtest.Recv(t, got, "the answer"))
}
