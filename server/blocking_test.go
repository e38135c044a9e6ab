//go:build linux

package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/lanes"
	srt "github.com/sluice-go/sluice/runtime"
)

// A handler that blocks its worker's thread without Await (a plain
// http.Get, here a channel) does not stall the other connections of that
// worker: on a one-worker runtime they are served while it blocks, and the
// blocked handler's own response arrives whole once it returns.
func TestBlockingHandlerDoesNotStallItsWorker(t *testing.T) {
	rt := schedtest.Runtime(t, 1)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	body := strings.Repeat("slow answer ", 2000) // larger than one write buffer
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/plain" {
			entered <- struct{}{}
			<-release
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, body)
			return
		}
		_, _ = io.WriteString(w, "info")
	})
	_, addr := serveNativeOn(t, rt, HTTPHandler(h), Config{})

	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/plain", nil)
	require.NoError(t, err)
	slow := doAsync(http.DefaultClient, req)
	<-entered

	// While /plain blocks, requests on other connections are answered.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
			for range 5 {
				resp, err := c.Get("http://" + addr + "/info")
				if !assert.NoError(t, err) {
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Equal(t, "info", string(b))
			}
		}()
	}
	wg.Wait()
	select {
	case got := <-slow:
		t.Fatalf("the blocked handler answered early: %.40q", got)
	default:
	}
	snap := rt.Snapshot()
	assert.GreaterOrEqual(t, snap.Handovers, int64(1))

	close(release)
	select {
	case got := <-slow:
		require.Equal(t, body, got)
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked handler never answered")
	}
	require.Eventually(t, func() bool { return rt.Snapshot().Spares == 0 }, 10*time.Second, 10*time.Millisecond,
		"the spare thread retires")
}

// A handler that waits, blocking its thread, while a goroutine of its own
// writes the response (net/http/pprof's trace does this) has its worker
// taken over meanwhile, and the worker serves other connections: the
// goroutine's writes must not touch what the worker uses for them (its
// buffer pools, its scratch, its cached Date). Run with -race.
func TestWriteFromAGoroutineWhileTheWorkerServesOthers(t *testing.T) {
	rt := schedtest.Runtime(t, 1)
	chunk := strings.Repeat("x", 1500)
	const chunks = 40
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/helper" {
			w.Header().Set("X-Info", "1")
			_, _ = io.WriteString(w, "info")
			return
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(100 * time.Millisecond) // the worker has been handed over
			w.Header().Set("Trailer", "X-End")
			w.WriteHeader(http.StatusOK)
			for range chunks {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
				http.NewResponseController(w).Flush()
				time.Sleep(time.Millisecond)
			}
			w.Header().Set("X-End", "yes")
		}()
		<-done // blocks the worker's thread: the watchdog hands the worker over
	})
	_, addr := serveNativeOn(t, rt, HTTPHandler(h), Config{})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := c.Get("http://" + addr + "/info")
				if !assert.NoError(t, err) {
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	for range 3 {
		resp, err := http.Get("http://" + addr + "/helper")
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, strings.Repeat(chunk, chunks), string(b))
		assert.Equal(t, "yes", resp.Trailer.Get("X-End"))
	}
	close(stop)
	wg.Wait()
	assert.GreaterOrEqual(t, rt.Snapshot().Handovers, int64(1))
}

// A server-sent-events handler in the common form (write an event, Flush,
// wait for the next) blocks its thread between events: the worker is
// handed over each time, but, the response being a stream, that is not
// counted or logged as a forgotten Await.
func TestStreamingHandlerWaitsUnlogged(t *testing.T) {
	rt := schedtest.Runtime(t, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			http.NewResponseController(w).Flush()
			time.Sleep(30 * time.Millisecond) // the next event's wait
		}
	})
	_, addr := serveNativeOn(t, rt, HTTPHandler(h), Config{})
	resp, err := http.Get("http://" + addr + "/events")
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, "data: 0\n\ndata: 1\n\ndata: 2\n\n", string(b))
	snap := rt.Snapshot()
	assert.GreaterOrEqual(t, snap.Handovers, int64(1), "the worker went on while the stream waited")
	assert.Zero(t, snap.Blocked, "a stream's waits are not forgotten Awaits")
}

// A server-sent-events handler gives its worker away as soon as it has
// flushed an event, without waiting for the watchdog to find it blocked
// (here the watchdog is off): 8 streams on 2 workers wait between their
// events, the plain requests beside them are served, every stream gets its
// events, and nothing is counted as blocked. (Before, each wait after a
// Flush held the worker until the watchdog handed it over, 4 to 6 ms
// later: a stall per event per stream; with the watchdog off, for good.)
func TestStreamReleasesItsWorkerAfterFlush(t *testing.T) {
	rt := schedtest.RuntimeWith(t, srt.Config{Workers: 2, BlockedAfter: -1})
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, DisableKeepAlives: true}, Timeout: 10 * time.Second}
	checkStreamsReleaseTheWorker(t, rt, client, 1, 8, 10)
	assert.Zero(t, rt.Snapshot().Blocked)
}

// checkStreamsReleaseTheWorker serves on rt an event stream at /events (3
// events, each flushed, the handler waiting on its own thread between
// them) and "plain" elsewhere; it opens streams of them through client
// (whose responses must be of HTTP major version proto), then asks for
// plain ones beside them, then lets the streams end and checks their
// events. The handlers' waits end if the test fails, so that the server
// can close.
func checkStreamsReleaseTheWorker(t *testing.T, rt *srt.Runtime, client *http.Client, proto, streams, plains int) *Server {
	t.Helper()
	const events = 3
	next, stop := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/events" {
			_, _ = io.WriteString(w, "plain")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range events {
			fmt.Fprintf(w, "data: %d\n\n", i)
			http.NewResponseController(w).Flush()
			if i < events-1 {
				select { // the next event's wait, on the handler's thread
				case <-next:
				case <-stop: // the test failed: let the server close
					return
				}
			}
		}
	})
	srv, addr := serveNativeOn(t, rt, HTTPHandler(h), Config{})
	t.Cleanup(func() { close(stop) }) // before the server's close
	bodies := make([]*bufio.Reader, streams)
	for i := range streams {
		resp, err := client.Get("http://" + addr + "/events")
		require.NoError(t, err, "stream %d", i)
		t.Cleanup(func() { resp.Body.Close() })
		require.Equal(t, proto, resp.ProtoMajor)
		bodies[i] = bufio.NewReader(resp.Body)
		line, err := bodies[i].ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, "data: 0\n", line, "stream %d's first event", i)
	}
	for i := range plains {
		resp, err := client.Get("http://" + addr + "/")
		require.NoError(t, err, "plain request %d beside %d waiting streams", i, streams)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, "plain", string(b))
	}
	for range (events - 1) * streams {
		next <- struct{}{}
	}
	for i, br := range bodies {
		rest, err := io.ReadAll(br)
		require.NoError(t, err, "stream %d", i)
		assert.Equal(t, "\ndata: 1\n\ndata: 2\n\n", string(rest), "stream %d", i)
	}
	return srv
}

// Over HTTP/2 as over HTTP/1.1: a stream's handler that flushes and then
// waits for its next event on its own thread gives its worker away once
// the flush is done, so the other streams of its worker run. One worker,
// the watchdog's rescue off: without the release the first stream's wait
// would hold the worker, and every request after it would wait with it.
func TestH2StreamReleasesItsWorkerAfterFlush(t *testing.T) {
	rt := schedtest.RuntimeWith(t, srt.Config{Workers: 1, BlockedAfter: -1})
	client := h2cClient(t)
	client.Timeout = 10 * time.Second
	srv := checkStreamsReleaseTheWorker(t, rt, client, 2, 4, 5)
	// The route was learned as a stream: its next runs give the worker away.
	got := make(chan int, 1)
	require.NoError(t, rt.Scheduler.Worker(0).Submit(lanes.Continuation, func() {
		got <- srv.ws[0].routes.start(http.MethodGet, "/events")
	}))
	assert.NotEqual(t, startShared, <-got)
}

// Event streams hold no thread between their events: once a route has
// streamed, its handlers run off the executor, on goroutines of their own
// (startAway), so that more streams than the runtime has spare threads
// wait at once, over HTTP/1.1 and HTTP/2, while plain requests beside them
// are served. One worker and two spare threads: before, the third stream's
// wait held the worker itself, and every request after it waited with it.
func TestMoreStreamsThanSpareThreads(t *testing.T) {
	t.Run("HTTP/1.1", func(t *testing.T) {
		rt := schedtest.RuntimeWith(t, srt.Config{Workers: 1, MaxSpares: 2})
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
		checkStreamsReleaseTheWorker(t, rt, client, 1, 16, 5)
		assert.LessOrEqual(t, rt.Snapshot().SparesPeak, 2)
	})
	t.Run("HTTP/2", func(t *testing.T) {
		rt := schedtest.RuntimeWith(t, srt.Config{Workers: 1, MaxSpares: 2})
		client := h2cClient(t)
		client.Timeout = 10 * time.Second
		checkStreamsReleaseTheWorker(t, rt, client, 2, 16, 5)
	})
}

// A stream's handler that writes to a client that does not read waits for
// room parked, holding no thread: 24 such streams on one worker leave the
// process's threads as they were (each wait blocked a thread in poll(2)
// before), and the plain requests beside them are served.
func TestStreamsToClientsThatDoNotReadHoldNoThread(t *testing.T) {
	const streams = 24
	rt := schedtest.RuntimeWith(t, srt.Config{Workers: 1})
	stop := make(chan struct{})
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	var writes atomic.Int64 // writes returned, by every stream
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/events" {
			_, _ = io.WriteString(w, "plain")
			return
		}
		_, _ = io.WriteString(w, "data: first\n\n")
		http.NewResponseController(w).Flush()
		if r.URL.Query().Get("learn") != "" {
			return
		}
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := w.Write(chunk); err != nil {
				return
			}
			writes.Add(1)
		}
	})
	_, addr := serveNativeOn(t, rt, HTTPHandler(h), Config{})
	t.Cleanup(func() { close(stop) })
	get := func(path string) string {
		resp, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	assert.Equal(t, "data: first\n\n", get("/events?learn=1"), "the route is learned as a stream")
	threads := pprof.Lookup("threadcreate").Count()
	for range streams {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		_, err = io.WriteString(c, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n") // and never read
		require.NoError(t, err)
	}
	// Wait until every writer waits: no write has returned for 300 ms.
	deadline := time.Now().Add(20 * time.Second)
	for last := int64(-1); ; {
		time.Sleep(300 * time.Millisecond)
		n := writes.Load()
		if n == last && n > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the streams did not fill their sockets")
		last = n
	}
	for range 3 {
		assert.Equal(t, "plain", get("/"), "a plain request beside %d streams waiting for room", streams)
	}
	assert.Less(t, pprof.Lookup("threadcreate").Count()-threads, streams/2, "threads made while %d writers wait", streams)
}

// A stream's handler that runs away leaves its connection as any handler
// does: the requests pipelined behind it on a kept-alive connection are
// answered in order, streamed ones and plain ones.
func TestStreamsRunAwayKeepTheirConnection(t *testing.T) {
	rt := schedtest.Runtime(t, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/events" {
			_, _ = io.WriteString(w, "plain")
			return
		}
		if r.URL.Query().Get("panic") != "" {
			panic("a stream's handler panics")
		}
		for i := range 2 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			http.NewResponseController(w).Flush()
		}
	})
	srv, addr := serveNativeOn(t, rt, HTTPHandler(h), Config{Logger: slog.New(slog.DiscardHandler)})
	resp, err := http.Get("http://" + addr + "/events") // learns the route
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	got := make(chan int, 1)
	require.NoError(t, rt.Scheduler.Worker(0).Submit(lanes.Continuation, func() {
		got <- srv.ws[0].routes.start(http.MethodGet, "/events")
	}))
	require.Equal(t, startAway, <-got)

	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET /events HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\nGET /events HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(c)
	for i, want := range []string{"data: 0\n\ndata: 1\n\n", "plain", "data: 0\n\ndata: 1\n\n"} {
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err, "answer %d", i)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err, "answer %d", i)
		assert.Equal(t, want, string(b), "answer %d", i)
	}

	// A panic away comes back to the connection as any handler's: a 500.
	resp, err = http.Get("http://" + addr + "/events?panic=1")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	resp, err = http.Get("http://" + addr + "/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "served after the panic")
}
