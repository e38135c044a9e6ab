package httpgate

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluice-go/sluice/admit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// guard bounds every wait on a channel: only a failing test reaches it.
const guard = 10 * time.Second

// blocker is a handler that records the order in which requests start and
// holds those with a "block" query parameter until released.
type blocker struct {
	mu      sync.Mutex
	started map[string]chan struct{}
	release map[string]chan struct{}
	order   chan string
}

func newBlocker() *blocker {
	return &blocker{
		started: map[string]chan struct{}{},
		release: map[string]chan struct{}{},
		order:   make(chan string, 100),
	}
}

func (b *blocker) chans(id string) (started, release chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started[id] == nil {
		b.started[id] = make(chan struct{})
		b.release[id] = make(chan struct{})
	}
	return b.started[id], b.release[id]
}

func (b *blocker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	b.order <- id
	started, release := b.chans(id)
	b.mu.Lock()
	select {
	case <-started: // the same id again
	default:
		close(started)
	}
	b.mu.Unlock()
	if r.URL.Query().Has("block") {
		<-release
	}
	_, _ = fmt.Fprintf(w, "ok %s", id)
}

// waitStarted waits for request id's handler to start.
func (b *blocker) waitStarted(t *testing.T, id string) {
	t.Helper()
	started, _ := b.chans(id)
	select {
	case <-started:
	case <-time.After(guard):
		t.Fatalf("request %s did not start", id)
	}
}

// hasStarted reports whether request id's handler has started.
func (b *blocker) hasStarted(id string) bool {
	started, _ := b.chans(id)
	select {
	case <-started:
		return true
	default:
		return false
	}
}

func (b *blocker) unblock(id string) {
	_, release := b.chans(id)
	close(release)
}

// harness is an httptest server behind an Admission, with a client of its
// own that reports connection reuse.
type harness struct {
	a        *Admission
	srv      *httptest.Server
	tr       *http.Transport
	client   *http.Client
	newConns atomic.Int64
}

func newHarness(t *testing.T, cfg admit.Config, h http.Handler) *harness {
	t.Helper()
	a, err := New(cfg)
	require.NoError(t, err)
	hs := &harness{a: a}
	hs.srv = httptest.NewUnstartedServer(hs.a.Wrap(h))
	hs.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			hs.newConns.Add(1)
		}
	}
	hs.srv.Config.ErrorLog = nil
	hs.srv.Start()
	hs.tr = &http.Transport{MaxIdleConnsPerHost: 16, ExpectContinueTimeout: guard}
	hs.client = &http.Client{Transport: hs.tr}
	t.Cleanup(func() {
		hs.a.Close()
		hs.tr.CloseIdleConnections()
		hs.srv.Close()
	})
	return hs
}

type result struct {
	status int
	header http.Header
	body   string
	reused bool
	closed bool // the server asked to close the connection
	err    error
}

func (r result) reason() string { return r.header.Get("Sluice-Reject-Reason") }

func (hs *harness) do(req *http.Request) result {
	var res result
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { res.reused = i.Reused }}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := hs.client.Do(req)
	if err != nil {
		res.err = err
		return res
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	res.status, res.header, res.body, res.closed, res.err = resp.StatusCode, resp.Header, string(b), resp.Close, err
	return res
}

func (hs *harness) newRequest(ctx context.Context, method, target string, body io.Reader, header ...string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, method, hs.srv.URL+target, body)
	if err != nil {
		panic(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return req
}

func (hs *harness) get(target string, header ...string) result {
	return hs.do(hs.newRequest(context.Background(), http.MethodGet, target, nil, header...))
}

// goGet sends a GET on its own goroutine; the result comes on the channel.
func (hs *harness) goGet(target string, header ...string) <-chan result {
	ch := make(chan result, 1)
	go func() { ch <- hs.get(target, header...) }()
	return ch
}

func await(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		require.NoError(t, r.err)
		return r
	case <-time.After(guard):
		t.Fatal("no response")
		return result{}
	}
}

// waitQueued waits until n requests wait in the queue: the test's own
// synchronisation, not the middleware's.
func (hs *harness) waitQueued(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return hs.a.Pipeline().Queue().Len() == n }, guard, 100*time.Microsecond,
		"waiting for %d queued requests", n)
}

// gates is a Config that asks gates, without a queue.
func gates(gs ...admit.Policy) admit.Config { return admit.Config{Gates: gs} }

// queued is a Config that asks gates and makes the refused wait up to
// maxAge.
func queued(maxAge time.Duration, gs ...admit.Policy) admit.Config {
	return admit.Config{Gates: gs, Queue: &admit.QueueConfig{}, MaxAge: maxAge}
}

// scripted is a GoSched reader with settable counts.
type scripted struct{ running, runnable atomic.Int64 }

func (s *scripted) set(running, runnable int) {
	s.running.Store(int64(running))
	s.runnable.Store(int64(runnable))
}

func (s *scripted) read() (int, int) { return int(s.running.Load()), int(s.runnable.Load()) }
