//go:build linux

package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/internal/syncbuf"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/sched"
)

func echoPath(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	fmt.Fprintf(w, "%s %s", r.Method, r.URL.Path)
}

func TestPipelinedRequestsAnsweredInOrder(t *testing.T) {
	_, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{})
	var raw strings.Builder
	for i := range 10 {
		fmt.Fprintf(&raw, "GET /r%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
	}
	raw.WriteString("POST /last HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc")
	resps, bodies, closed := rawExchange(t, addr, raw.String(), "GET")
	require.Len(t, resps, 11)
	for i := range 10 {
		assert.Equal(t, fmt.Sprintf("GET /r%d", i), bodies[i])
	}
	assert.Equal(t, "POST /last", bodies[10])
	assert.True(t, closed)
}

func TestKeepAliveAndHTTP10(t *testing.T) {
	_, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{})
	// HTTP/1.0 without keep-alive: answered as 1.0, then closed.
	resps, bodies, closed := rawExchange(t, addr, "GET /a HTTP/1.0\r\n\r\n", "GET")
	require.Len(t, resps, 1)
	assert.Equal(t, "HTTP/1.0", resps[0].Proto)
	assert.Equal(t, "GET /a", bodies[0])
	assert.True(t, closed)
	// HTTP/1.0 with keep-alive: kept.
	resps, _, closed = rawExchange(t, addr, "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", "GET")
	require.Len(t, resps, 2)
	assert.Equal(t, "keep-alive", resps[0].Header.Get("Connection"))
	assert.False(t, closed)
	// HTTP/1.1 keeps the connection by default.
	resps, _, closed = rawExchange(t, addr, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n", "GET")
	require.Len(t, resps, 1)
	assert.False(t, closed)
}

func TestChunkedRequestAndStreamedResponse(t *testing.T) {
	flushed := make(chan struct{})
	finish := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if !assert.NoError(t, err) {
			return
		}
		assert.Equal(t, int64(-1), r.ContentLength)
		assert.Equal(t, []string{"chunked"}, r.TransferEncoding)
		fmt.Fprintf(w, "got %d bytes;", len(b))
		w.(http.Flusher).Flush()
		close(flushed)
		<-finish // the client has seen the first part before the handler ends
		w.Write(bytes.Repeat([]byte("z"), 100_000))
	})
	_, addr := serveHTTP(t, h, Config{})
	pr, pw := io.Pipe()
	go func() {
		for range 5 {
			pw.Write(bytes.Repeat([]byte("a"), 10_000))
		}
		pw.Close()
	}()
	req, err := http.NewRequest("POST", "http://"+addr+"/up", pr)
	require.NoError(t, err)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, []string{"chunked"}, resp.TransferEncoding)
	<-flushed
	first := make([]byte, len("got 50000 bytes;"))
	_, err = io.ReadFull(resp.Body, first)
	require.NoError(t, err)
	assert.Equal(t, "got 50000 bytes;", string(first))
	close(finish)
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, 100_000, len(rest))
}

func TestExpectContinue(t *testing.T) {
	var reads atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/reject" {
			http.Error(w, "no", http.StatusForbidden) // never reads the body
			return
		}
		b, _ := io.ReadAll(r.Body)
		reads.Add(1)
		fmt.Fprintf(w, "%d", len(b))
	})
	_, addr := serveHTTP(t, h, Config{})
	tr := &http.Transport{ExpectContinueTimeout: 5 * time.Second}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for _, path := range []string{"/accept", "/reject"} {
		req, _ := http.NewRequest("PUT", "http://"+addr+path, strings.NewReader("payload"))
		req.Header.Set("Expect", "100-continue")
		resp, err := c.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if path == "/accept" {
			assert.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, "7", string(b))
		} else {
			assert.Equal(t, 403, resp.StatusCode)
		}
	}
	assert.Equal(t, int32(1), reads.Load())
	// On the wire: 100 Continue comes before the final response, only
	// once the handler reads.
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	io.WriteString(nc, "PUT /accept HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
	br := bufio.NewReader(nc)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "HTTP/1.1 100 Continue\r\n", line)
	line, _ = br.ReadString('\n')
	assert.Equal(t, "\r\n", line)
	io.WriteString(nc, "abc")
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	assert.Equal(t, "3", string(b))
}

func TestHeadResponseHasNoBody(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("twelve bytes"))
	})
	_, addr := serveHTTP(t, h, Config{})
	resps, bodies, closed := rawExchange(t, addr, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n", "HEAD")
	require.NotEmpty(t, resps)
	assert.Equal(t, int64(12), resps[0].ContentLength)
	assert.Equal(t, "", bodies[0])
	assert.False(t, closed)
	// The GET after the HEAD is framed correctly: read it raw.
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	io.WriteString(nc, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(nc)
	r1, err := http.ReadResponse(br, &http.Request{Method: "HEAD"})
	require.NoError(t, err)
	r1.Body.Close()
	r2, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(r2.Body)
	assert.Equal(t, "twelve bytes", string(b))
}

func TestLimits(t *testing.T) {
	var ran atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran.Add(1)
		_, err := io.ReadAll(r.Body)
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, "too big", http.StatusRequestEntityTooLarge)
		}
	})
	_, addr := serveHTTP(t, h, Config{MaxHeaderBytes: 1024, MaxBodyBytes: 100})
	big := "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 8000) + "\r\n\r\n"
	resps, _, closed := rawExchange(t, addr, big, "GET")
	require.Len(t, resps, 1)
	assert.Equal(t, 431, resps[0].StatusCode)
	assert.NotEmpty(t, resps[0].Header.Get("Date"), "a 4xx carries a Date")

	resps, _, _ = rawExchange(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nExpect: 102-processing\r\nContent-Length: 1\r\n\r\nx", "POST")
	require.Len(t, resps, 1)
	assert.Equal(t, http.StatusExpectationFailed, resps[0].StatusCode)
	assert.NotEmpty(t, resps[0].Header.Get("Date"), "a 417 carries a Date")
	assert.True(t, closed)

	resps, _, closed = rawExchange(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n", "POST")
	require.Len(t, resps, 1)
	assert.Equal(t, 413, resps[0].StatusCode)
	assert.NotEmpty(t, resps[0].Header.Get("Date"), "a 4xx carries a Date")
	assert.True(t, closed)
	assert.Equal(t, int32(0), ran.Load(), "refused before the handler")

	chunk := "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n64\r\n" + strings.Repeat("c", 100) + "\r\n1\r\nc\r\n0\r\n\r\n"
	resps, _, closed = rawExchange(t, addr, chunk, "POST")
	require.Len(t, resps, 1)
	assert.Equal(t, 413, resps[0].StatusCode)
	assert.True(t, closed)

	// A chunk size whose sum with what came before overflows an int64
	// must not slip past the limit: 1 byte, then 2^63-1 announced and 200
	// sent.
	overflow := "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nc\r\n7fffffffffffffff\r\n" + strings.Repeat("c", 200)
	resps, _, closed = rawExchange(t, addr, overflow, "POST")
	require.Len(t, resps, 1)
	assert.Equal(t, 413, resps[0].StatusCode, "the body limit holds whatever the chunk sizes")
	assert.True(t, closed)
}

func TestSmugglingDefences(t *testing.T) {
	var ran atomic.Int32
	_, addr := serveHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran.Add(1) }), Config{})
	for _, raw := range []string{
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
		"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -3\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nX-Bad: a\x00b\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nBad Name: a\r\n\r\n",
	} {
		resps, _, closed := rawExchange(t, addr, raw, "GET")
		if assert.Len(t, resps, 1, "%q", raw) {
			assert.Equal(t, 400, resps[0].StatusCode, "%q", raw)
		}
		assert.True(t, closed, "%q", raw)
	}
	resps, _, closed := rawExchange(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", "GET")
	require.Len(t, resps, 1)
	assert.Equal(t, 501, resps[0].StatusCode)
	assert.True(t, closed)
	assert.Equal(t, int32(0), ran.Load())
}

// panicking panics on /panic (with "boom"), on /abort (with
// http.ErrAbortHandler) and on /late (after a flushed part of the body),
// and answers "fine" elsewhere.
func panicking(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/panic":
		panic("boom")
	case "/abort":
		panic(http.ErrAbortHandler)
	case "/late":
		_, _ = w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		panic("late boom")
	}
	_, _ = w.Write([]byte("fine"))
}

func TestHandlerPanicIs500AndWorkerLivesOn(t *testing.T) {
	var logged syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	_, addr := serveHTTP(t, http.HandlerFunc(panicking), Config{Logger: log})
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for range 5 { // more panics than workers: they live on
		resp, err := client.Get("http://" + addr + "/panic")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 500, resp.StatusCode)
	}
	_, err := client.Get("http://" + addr + "/abort")
	assert.Error(t, err) // closed without a response
	resp, err := client.Get("http://" + addr + "/late")
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	assert.Error(t, err, "a response cut short must not look complete")
	resp, err = client.Get("http://" + addr + "/ok")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "fine", string(b))
	assert.Equal(t, 6, strings.Count(logged.String(), "handler panic"))
	assert.NotContains(t, logged.String(), "ErrAbortHandler")
	assert.Contains(t, logged.String(), "server.panicking", "the stack of the panic is logged")
	assert.Contains(t, logged.String(), "stack=")
}

// The Content-Type is sniffed from the first 512 bytes whatever the size of
// the first write, as net/http does.
func TestContentTypeSniffedFromALargeFirstWrite(t *testing.T) {
	bodies := map[string][]byte{
		"/text": bytes.Repeat([]byte("plain text "), 1000),
		"/html": append([]byte("<!DOCTYPE html><html><body>"), bytes.Repeat([]byte("x"), 20000)...),
		"/bin":  append([]byte{0, 1, 2, 3}, bytes.Repeat([]byte{0xff}, 9000)...),
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(bodies[r.URL.Path]) })
	_, addr := serveHTTP(t, h, Config{})
	ref := httptest.NewServer(h)
	defer ref.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for path, body := range bodies {
		got, want := fetch(t, client, "http://"+addr+path), fetch(t, client, ref.URL+path)
		assert.Equal(t, want.Header.Get("Content-Type"), got.Header.Get("Content-Type"), path)
		assert.NotEmpty(t, got.Header.Get("Content-Type"), path)
		b, err := io.ReadAll(got.Body)
		require.NoError(t, err)
		assert.Equal(t, body, b, path)
	}
}

// A body with a Content-Encoding is not sniffed (its bytes are the
// encoding's, gzip say, not the content's), as net/http does
// (golang/go#31753); without one it is.
func TestContentTypeNotSniffedFromAnEncodedBody(t *testing.T) {
	gz := []byte{0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0xff} // a gzip header
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/encoded" {
			w.Header().Set("Content-Encoding", "gzip")
		}
		_, _ = w.Write(gz)
	})
	_, addr := serveHTTP(t, h, Config{})
	ref := httptest.NewServer(h)
	defer ref.Close()
	// Transport's own gzip handling off: the client sees the fields as sent.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	for _, c := range []struct{ path, want string }{{"/encoded", ""}, {"/plain", "application/x-gzip"}} {
		got, want := fetch(t, client, "http://"+addr+c.path), fetch(t, client, ref.URL+c.path)
		assert.Equal(t, c.want, want.Header.Get("Content-Type"), "net/http, %s", c.path)
		assert.Equal(t, c.want, got.Header.Get("Content-Type"), c.path)
	}
}

// fetch GETs url and returns the response, its body still to read.
func fetch(t *testing.T, client *http.Client, url string) *http.Response {
	t.Helper()
	resp, err := client.Get(url)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestContextCancelledWhenClientLeaves(t *testing.T) {
	entered := make(chan struct{})
	cancelled := make(chan error, 1)
	h := HandlerFunc(func(w *ResponseWriter, r *Request) {
		close(entered)
		// Wait for the client to go, releasing the worker meanwhile.
		err := sched.Pause(r.Context(), func(resume func()) {
			context.AfterFunc(r.Context(), func() {
				_ = r.Worker().Submit(0, resume)
			})
		})
		assert.NoError(t, err)
		cancelled <- r.Context().Err()
	})
	_, addr := serveNative(t, h, Config{})
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	<-entered
	nc.Close()
	select {
	case err := <-cancelled:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("the request context was not cancelled when the client left")
	}
}

func TestAwaitReleasesWorkerInHandler(t *testing.T) {
	// One worker; every handler awaits a gate. All requests must be inside
	// their handlers at once, which a blocked worker would not allow.
	rt := schedtest.Runtime(t, 1)
	s := rt.Scheduler
	const n = 20
	var inside atomic.Int32
	all := make(chan struct{})
	release := make(chan struct{})
	h := HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := sched.Await(r.Context(), func(context.Context) (struct{}, error) {
			if inside.Add(1) == n {
				close(all)
			}
			<-release
			return struct{}{}, nil
		})
		assert.NoError(t, err)
		w.Write([]byte("ok"))
	}))
	srv, err := Listen(rt, "127.0.0.1:0", h, Config{})
	require.NoError(t, err)
	defer srv.Close(context.Background())
	tr := &http.Transport{MaxConnsPerHost: n}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Get("http://" + srv.Addr().String())
			if assert.NoError(t, err) {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.Equal(t, "ok", string(b))
			}
		}()
	}
	select {
	case <-all:
	case <-time.After(10 * time.Second):
		t.Fatalf("only %d of %d requests got into their handlers", inside.Load(), n)
	}
	// The last Await's operation may start before its worker has finished
	// the task that suspended it; then the worker parks.
	assert.Eventually(t, func() bool { return s.Busy() == 0 }, 10*time.Second, time.Millisecond,
		"the worker is idle while every handler waits")
	close(release)
	wg.Wait()
}

func TestHeaderAndIdleTimeouts(t *testing.T) {
	_, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{ReadHeaderTimeout: 100 * time.Millisecond, IdleTimeout: 150 * time.Millisecond})
	// A head that never ends is cut off, with a 408 to say why.
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\n")
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	br0 := bufio.NewReader(nc)
	timedOut, err := http.ReadResponse(br0, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusRequestTimeout, timedOut.StatusCode)
	assert.True(t, timedOut.Close, "Connection: close")
	io.ReadAll(timedOut.Body)
	_, err = br0.ReadByte()
	assert.ErrorIs(t, err, io.EOF)
	// A connection that sends nothing is closed without an answer.
	silent, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer silent.Close()
	_ = silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := silent.Read(make([]byte, 1))
	assert.Zero(t, n)
	assert.ErrorIs(t, err, io.EOF)
	// A kept-alive connection with nothing more is closed after IdleTimeout.
	nc2, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc2.Close()
	io.WriteString(nc2, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(nc2)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	io.ReadAll(resp.Body)
	start := time.Now()
	_ = nc2.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = br.ReadByte()
	assert.ErrorIs(t, err, io.EOF)
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond, "not before the idle timeout")
}

// TestIdleTimeoutCountsFromTheLastRequest checks that the idle timeout of
// a kept-alive connection counts from its last request: the timer set
// after the first one fires early, and must set itself again (arm leaves a
// timer pending for an earlier time as it is).
func TestIdleTimeoutCountsFromTheLastRequest(t *testing.T) {
	const idle = 2 * time.Second
	_, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{IdleTimeout: idle})
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(nc)
	get := func() {
		_, err := io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		_, _ = io.ReadAll(resp.Body)
	}
	get()
	time.Sleep(idle * 6 / 10)
	get()
	last := time.Now()
	_, err = br.ReadByte()
	assert.ErrorIs(t, err, io.EOF)
	// Closed at idle after the second request; from the first, it would
	// have been 0.4 of it after the second.
	assert.GreaterOrEqual(t, time.Since(last), idle*3/4, "the idle timeout counts from the last request")
}

func TestShutdownLosesNoRequestInFlight(t *testing.T) {
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	h := HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		sched.Await(r.Context(), func(context.Context) (int, error) { <-release; return 0, nil })
		w.Write([]byte("done"))
	}))
	rt := schedtest.Runtime(t, 2)
	srv, err := Listen(rt, "127.0.0.1:0", h, Config{})
	require.NoError(t, err)
	addr := srv.Addr().String()
	// An idle connection (kept alive after a request), which Shutdown
	// closes.
	idle, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer idle.Close()
	_, err = io.WriteString(idle, "GET /warm HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	<-entered
	release <- struct{}{}
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	require.NoError(t, err)
	resp.Body.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	const n = 5
	results := make(chan string, n)
	for range n {
		go func() {
			resp, err := client.Get("http://" + addr)
			if err != nil {
				results <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			results <- fmt.Sprintf("%s/%v", b, resp.Close)
		}()
	}
	for range n {
		<-entered
	}
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- srv.Shutdown(ctx)
	}()
	// The idle connection is closed and no new ones are accepted.
	_ = idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = idle.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF)
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err != nil
	}, 10*time.Second, 10*time.Millisecond)
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned with requests in flight: %v", err)
	default:
	}
	close(release)
	for range n {
		assert.Equal(t, "done/true", <-results)
	}
	require.NoError(t, <-shut)
	assert.Equal(t, 0, srv.OpenConns())
}

func TestNativeHandler(t *testing.T) {
	h := HandlerFunc(func(w *ResponseWriter, r *Request) {
		assert.True(t, sched.InCoroutine(r.Context()))
		w.Header().Set("Content-Type", "text/plain")
		w.WriteString(r.Method + " " + r.URL.Path + " " + r.Host + " " + r.Header.Get("X-A"))
	})
	_, addr := serveNative(t, h, Config{})
	resps, bodies, _ := rawExchange(t, addr, "GET /p?q=1 HTTP/1.1\r\nHost: example.com\r\nX-A: b\r\n\r\n", "GET")
	require.Len(t, resps, 1)
	assert.Equal(t, "GET /p example.com b", bodies[0])
	assert.Equal(t, int64(len(bodies[0])), resps[0].ContentLength)
}

// TestBodyAndResponseFromAnotherGoroutine has the handler hand its body and
// writer to a goroutine of its own (and wait for it, holding its worker):
// reads and writes that must wait then block that goroutine in poll(2).
func TestBodyAndResponseFromAnotherGoroutine(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			b, err := io.ReadAll(r.Body)
			if !assert.NoError(t, err) {
				return
			}
			for range 4 { // far more than the socket buffers: writes wait
				_, err := w.Write(b)
				if !assert.NoError(t, err) {
					return
				}
			}
		}()
		<-done
	})
	_, addr := serveHTTP(t, h, Config{})
	body := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB, sent slowly below
	pr, pw := io.Pipe()
	go func() {
		for i := 0; i < len(body); i += 64 << 10 {
			pw.Write(body[i : i+64<<10])
			time.Sleep(time.Millisecond)
		}
		pw.Close()
	}()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post("http://"+addr, "application/octet-stream", pr)
	require.NoError(t, err)
	defer resp.Body.Close()
	time.Sleep(50 * time.Millisecond) // let the server's writes fill the socket first
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, 4*len(body), len(got))
	assert.True(t, bytes.Equal(body, got[:len(body)]))
}

// TestFirstRequestAfterAQuietStart: the read right after accept finds
// nothing; the request written later still comes through the readiness
// the accept registered (and one written at once is read by that read).
func TestFirstRequestAfterAQuietStart(t *testing.T) {
	_, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{})
	for _, wait := range []time.Duration{0, 50 * time.Millisecond} {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		time.Sleep(wait)
		_, err = io.WriteString(c, "GET /late HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err, "after %v", wait)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "GET /late", string(b))
		c.Close()
	}
}

// A client that pipelines requests and never reads its answers makes the
// server read ahead one buffer at most while an answer waits for room, not
// its whole head limit (about 1 MiB per such connection before).
func TestPipelinerThatNeverReadsIsNotReadAhead(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 256<<10)
	rt := schedtest.Runtime(t, 1)
	srv, addr := serveNativeOn(t, rt, HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(big)
	})), Config{})
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
	}}
	nc, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	req := []byte("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
	flood := bytes.Repeat(req, 20000) // 600 KB of requests
	go func() { _, _ = nc.Write(flood) }()
	// Let the server read what it will while its first answer is stuck.
	time.Sleep(300 * time.Millisecond)
	var bufSize, conns int
	done := make(chan struct{})
	require.NoError(t, rt.Worker(0).Submit(lanes.Continuation, func() {
		defer close(done)
		for c := srv.ws[0].conns.head; c != nil; c = c.links[linkAll].next {
			conns++
			bufSize = max(bufSize, cap(c.buf))
		}
	}))
	<-done
	assert.Equal(t, 1, conns)
	assert.LessOrEqual(t, bufSize, readBufSize, "read ahead at most one buffer")
}

// TestHeaderValuesCannotSplitTheResponse checks that CR and LF in a value a
// handler sets become spaces, as in net/http, so that no field or response
// can be smuggled in through one.
func TestHeaderValuesCannotSplitTheResponse(t *testing.T) {
	_, addr := serveNative(t, HandlerFunc(func(w *ResponseWriter, _ *Request) {
		w.SetHeader("X-A", "one\r\nX-Injected: 1")
		w.Header().Set("X-B", "two\nX-Injected: 2\r")
		_, _ = w.Write([]byte("ok"))
	}), Config{})
	resps, _, _ := rawExchange(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "GET")
	require.Len(t, resps, 1)
	h := resps[0].Header
	assert.Equal(t, "one  X-Injected: 1", h.Get("X-A"))
	assert.Equal(t, "two X-Injected: 2", h.Get("X-B")) // the trailing space trimmed by the parser
	assert.Empty(t, h.Values("X-Injected"))
}

// TestWritesAfterTheHandlerReturnedAreRefused checks that a goroutine a
// handler left behind cannot write into the connection once the handler
// returned: its Write, WriteString and Flush fail, its WriteHeader does
// nothing, and the next request's response on the connection is intact.
func TestWritesAfterTheHandlerReturnedAreRefused(t *testing.T) {
	late := make(chan *ResponseWriter, 1)
	_, addr := serveNative(t, HandlerFunc(func(w *ResponseWriter, r *Request) {
		if r.URL.Path == "/leave" {
			late <- w
		}
		_, _ = w.Write([]byte("answer of " + r.URL.Path))
	}), Config{})
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(nc)
	get := func(path string) string {
		_, err := io.WriteString(nc, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	assert.Equal(t, "answer of /leave", get("/leave"))
	w := <-late // the handler has returned: its response was read
	n, err := w.Write([]byte("LATE"))
	assert.Zero(t, n)
	assert.ErrorIs(t, err, errWriterDone)
	_, err = w.WriteString("LATE")
	assert.ErrorIs(t, err, errWriterDone)
	assert.ErrorIs(t, w.FlushError(), errWriterDone)
	w.WriteHeader(http.StatusTeapot)
	w.Header().Set("X-Late", "1")
	assert.Equal(t, "answer of /next", get("/next"))
	_ = nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, err = br.ReadByte()
	assert.Error(t, err, "nothing more on the connection")
}

// A client that pipelines requests the server refuses and never reads the
// answers cannot keep its connection for ever, even without WriteTimeout: a
// rejection is the server's own answer, and its write is bounded by the
// header timeout. The connection then closes.
func TestRejectionsToAClientThatNeverReadsAreBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		body bool // refused requests with a body take the coroutine's path
	}{{"plain", false}, {"with a body", true}} {
		t.Run(tc.name, func(t *testing.T) {
			pol := &refusePath{path: "/refuse"}
			srv, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{
				ReadHeaderTimeout: 300 * time.Millisecond,
				Admission:         admit.Config{Policies: []admit.Policy{pol}},
			})
			d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
				return rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
			}}
			nc, err := d.Dial("tcp", addr)
			require.NoError(t, err)
			defer nc.Close()
			req := []byte("GET /refuse HTTP/1.1\r\nHost: x\r\n\r\n")
			if tc.body {
				req = []byte("POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab")
			}
			go func() { _, _ = nc.Write(bytes.Repeat(req, 100000)) }() // 3 MB of requests, 20 MB of answers
			require.Eventually(t, func() bool { return srv.OpenConns() == 1 }, 5*time.Second, time.Millisecond)
			assert.Eventually(t, func() bool { return srv.OpenConns() == 0 }, 10*time.Second, 10*time.Millisecond,
				"the connection closes once an answer has waited the header timeout")
		})
	}
}
