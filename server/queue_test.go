//go:build linux

package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/internal/gatetest"
	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/netpoll"
	"github.com/sluice-go/sluice/queue"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/sched"
)

// queued is a Config whose admission asks gates and makes the refused wait
// up to maxAge.
func queued(maxAge time.Duration, gates ...admit.Policy) Config {
	return Config{Admission: admit.Config{Gates: gates, Queue: &admit.QueueConfig{}, MaxAge: maxAge}}
}

// qget sends one GET on its own connection and returns status, reason and
// body.
func qget(t *testing.T, addr, path string, hdr ...string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+addr+path, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Do(req)
	if !assert.NoError(t, err) {
		return 0, "", ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(ReasonHeader), string(b)
}

func TestQueuedRequestStartsWhenTheGateOpens(t *testing.T) {
	conc := gatetest.Concurrency(t, 1)
	entered := make(chan string, 4)
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- r.URL.Path
		if r.URL.Path == "/first" {
			wait(r.Context(), release)
		}
		io.WriteString(w, "ok "+r.URL.Path)
	})
	srv, addr := serveHTTP(t, h, queued(time.Minute, conc))
	results := make(chan string, 2)
	go func() { _, _, b := qget(t, addr, "/first"); results <- b }()
	assert.Equal(t, "/first", <-entered)
	go func() { _, _, b := qget(t, addr, "/second"); results <- b }()
	require.Eventually(t, func() bool { return srv.Pipeline().Queue().Len() == 1 }, 10*time.Second, time.Millisecond)
	select {
	case p := <-entered:
		t.Fatalf("%s started while the gate was closed", p)
	default:
	}
	close(release) // the first ends, its slot goes to the waiting one at once
	assert.Equal(t, "/second", <-entered)
	got := []string{<-results, <-results}
	assert.ElementsMatch(t, []string{"ok /first", "ok /second"}, got)
	st := srv.Stats()
	assert.Equal(t, int64(2), st.Admitted)
	assert.Equal(t, int64(0), st.Rejected)
	assert.Equal(t, 0, conc.InFlight())
}

func TestQueueTimeoutRejects(t *testing.T) {
	conc := gatetest.Concurrency(t, 1)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		wait(r.Context(), release)
	})
	srv, addr := serveHTTP(t, h, queued(30*time.Millisecond, conc))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); qget(t, addr, "/hold") }()
	<-entered
	code, reason, body := qget(t, addr, "/waits")
	assert.Equal(t, 503, code)
	assert.Equal(t, "queue-timeout", reason)
	assert.True(t, strings.HasPrefix(body, "request not started"))
	close(release)
	wg.Wait()
	assert.Equal(t, map[string]int64{"queue-timeout": 1}, srv.Stats().RejectedBy)
	assert.Equal(t, uint64(1), srv.Pipeline().Queue().Stats().Rejected[queue.Timeout])
}

func TestQueueServesCriticalFirst(t *testing.T) {
	conc := gatetest.Concurrency(t, 1)
	release := make(chan struct{})
	order := make(chan string, 4)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		order <- r.URL.Path
		if r.URL.Path == "/hold" {
			wait(r.Context(), release)
		}
	})
	cfg := queued(time.Minute, conc)
	cfg.Admission.Queue.Classify = admit.ClassFromHeader("X-Class")
	srv, addr := serveHTTP(t, h, cfg)
	var wg sync.WaitGroup
	send := func(path, class string) {
		wg.Add(1)
		go func() { defer wg.Done(); qget(t, addr, path, "X-Class", class) }()
	}
	send("/hold", "default")
	assert.Equal(t, "/hold", <-order)
	send("/sheddable", "sheddable")
	require.Eventually(t, func() bool { return srv.Pipeline().Queue().Len() == 1 }, 10*time.Second, time.Millisecond)
	send("/critical", "critical")
	require.Eventually(t, func() bool { return srv.Pipeline().Queue().Len() == 2 }, 10*time.Second, time.Millisecond)
	close(release)
	assert.Equal(t, "/critical", <-order)
	assert.Equal(t, "/sheddable", <-order)
	wg.Wait()
}

func TestCloseRejectsQueuedRequests(t *testing.T) {
	conc := gatetest.Concurrency(t, 1)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		wait(r.Context(), release)
	})
	rt := schedtest.Runtime(t, 2)
	srv, err := Listen(rt, "127.0.0.1:0", HTTPHandler(h), queued(time.Minute, conc))
	require.NoError(t, err)
	addr := srv.Addr().String()
	held := make(chan struct{})
	go func() {
		defer close(held)
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		if resp, err := (&http.Client{Transport: tr}).Get("http://" + addr + "/hold"); err == nil {
			resp.Body.Close() // Close may cut it, or let it answer
		}
	}()
	<-entered
	res := make(chan string, 1)
	go func() { code, reason, _ := qget(t, addr, "/queued"); res <- http.StatusText(code) + " " + reason }()
	require.Eventually(t, func() bool { return srv.Pipeline().Queue().Len() == 1 }, 10*time.Second, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, srv.Close(ctx))
	assert.Equal(t, "Service Unavailable queue-closed", <-res)
	close(release)
	<-held
}

// wait waits for release or the end of ctx without holding the worker.
func wait(ctx context.Context, release <-chan struct{}) {
	_, _ = sched.Await(ctx, func(ctx context.Context) (struct{}, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return struct{}{}, nil
	})
}

// TestQueuedRequestStartsWhenAWorkerGoesIdle covers the busy gate's path:
// the queue's head starts from the idle hook of a worker that finishes its
// work, without polling.
func TestQueuedRequestStartsWhenAWorkerGoesIdle(t *testing.T) {
	rt := schedtest.Runtime(t, 2)
	s := rt.Scheduler
	busy := gatetest.Busy(t, gate.BusyConfig{}) // 2 workers: admit while the other is idle
	h := HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "served")
	}))
	// One shared EPOLLEXCLUSIVE socket: the kernel wakes a worker that
	// waits in epoll, so the connection goes to the worker not blocked.
	cfg := queued(time.Minute, busy)
	cfg.Listen = netpoll.Config{Shared: true}
	srv, err := Listen(rt, "127.0.0.1:0", h, cfg)
	require.NoError(t, err)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, srv.Close(ctx))
	}()
	// Worker 1 busy with a long task: the gate is closed for worker 0.
	running, release := make(chan struct{}), make(chan struct{})
	require.NoError(t, s.Worker(1).Submit(lanes.Upstream, func() { close(running); <-release }))
	<-running
	res := make(chan string, 1)
	go func() { code, _, body := qget(t, srv.Addr().String(), "/"); res <- fmt.Sprint(code, " ", body) }()
	require.Eventually(t, func() bool { return srv.Pipeline().Queue().Len() == 1 }, 10*time.Second, time.Millisecond,
		"the request waits while the other worker is busy")
	select {
	case r := <-res:
		t.Fatalf("answered while the gate was closed: %s", r)
	default:
	}
	close(release) // worker 1 goes idle: its idle hook starts the head
	assert.Equal(t, "200 served", <-res)
	st := srv.Stats()
	assert.Equal(t, uint64(1), st.Queue.Started)
	assert.Equal(t, int64(0), st.Rejected)
}

// TestRequestOlderThanMaxAgeIsRejectedUnstarted holds the only worker while
// a request waits in its socket, then checks that the request, older than
// the queue timeout by the time it is parsed, is rejected without starting
// although the gate admits everything, and that its connection serves the
// next request.
func TestRequestOlderThanMaxAgeIsRejectedUnstarted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		maxAge time.Duration
		want   int
	}{
		{"default", 0, http.StatusServiceUnavailable},
		{"explicit", 40 * time.Millisecond, http.StatusServiceUnavailable},
		{"off", -1, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Without the blocked-worker rescue, a handler that sleeps
			// holds its worker, and the request behind it ages.
			rt := schedtest.RuntimeWith(t, srt.Config{Workers: 1, BlockedAfter: -1})
			entered := make(chan struct{}, 1)
			var started sync.Map
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				started.Store(r.URL.Path, true)
				if r.URL.Path == "/hold" {
					entered <- struct{}{}
					time.Sleep(300 * time.Millisecond) // holds the worker
				}
				io.WriteString(w, "ok")
			})
			srv, err := Listen(rt, "127.0.0.1:0", HTTPHandler(h), Config{Admission: admit.Config{
				Gates:  []admit.Policy{gatetest.Concurrency(t, 1000)},
				MaxAge: tc.maxAge,
			}})
			require.NoError(t, err)
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				assert.NoError(t, srv.Close(ctx))
			}()
			addr := srv.Addr().String()
			nc, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer nc.Close()
			br := bufio.NewReader(nc)
			get := func(path string) *http.Response {
				_, err := fmt.Fprintf(nc, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
				require.NoError(t, err)
				resp, err := http.ReadResponse(br, nil)
				require.NoError(t, err)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp
			}
			require.Equal(t, http.StatusOK, get("/warm").StatusCode, "the connection is accepted and idle")

			done := make(chan struct{})
			go func() { defer close(done); qget(t, addr, "/hold") }()
			<-entered
			resp := get("/old") // waits in the socket behind /hold
			<-done
			assert.Equal(t, tc.want, resp.StatusCode)
			_, ran := started.Load("/old")
			if tc.want == http.StatusServiceUnavailable {
				assert.Equal(t, "1", resp.Header.Get(NotStartedHeader))
				assert.Equal(t, "queue-timeout", resp.Header.Get(ReasonHeader))
				assert.False(t, ran, "the old request never started")
				assert.Equal(t, int64(1), srv.Stats().RejectedBy["queue-timeout"])
			} else {
				assert.True(t, ran)
			}
			assert.Equal(t, http.StatusOK, get("/next").StatusCode, "the connection stays usable")
		})
	}
}
