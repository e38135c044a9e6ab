package httpgate

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/internal/gatetest"
	"github.com/sluice-go/sluice/queue"
	"github.com/sluice-go/sluice/reject"
)

func TestAdmittedServed(t *testing.T) {
	b := newBlocker()
	hs := newHarness(t, gates(gatetest.Concurrency(t, 4)), b)
	for i := range 3 {
		r := hs.get("/?id=a")
		require.NoError(t, r.err)
		assert.Equal(t, http.StatusOK, r.status)
		assert.Equal(t, "ok a", r.body)
		assert.Empty(t, r.header.Get(reject.NotStartedHeader))
		assert.Equal(t, i > 0, r.reused)
	}
	st := hs.a.Stats()
	assert.EqualValues(t, 3, st.Admitted)
	assert.EqualValues(t, 0, st.InFlight)
	assert.EqualValues(t, 0, st.Rejected)
	assert.Nil(t, hs.a.Pipeline().Queue())
}

func TestNoGateServesEverything(t *testing.T) {
	hs := newHarness(t, admit.Config{}, newBlocker())
	r := hs.get("/?id=a")
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusOK, r.status)
	assert.EqualValues(t, 1, hs.a.Stats().Admitted)
}

// What cannot work is refused by New: the busy-worker gate outside the
// executor, a queue with no gate.
func TestNewRefusesWhatCannotWork(t *testing.T) {
	_, err := New(admit.Config{Gates: []admit.Policy{gatetest.Busy(t, gate.BusyConfig{})}})
	assert.ErrorContains(t, err, "httpgate: admit: Config.Gates[0] (*gate.Busy): gate: the busy-worker gate reads the sluice executor")
	_, err = New(admit.Config{Queue: &admit.QueueConfig{}})
	assert.ErrorContains(t, err, "a queue needs a gate")
}

// A refusal without a queue: 503, the marker, the reason, Retry-After, the
// body, and the connection stays usable, with or without a request body.
func TestRejectedKeepsConnection(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	hs := newHarness(t, admit.Config{
		Gates: []admit.Policy{gatetest.Concurrency(t, 0)},
		Rejection: admit.Rejection{OnReject: func(a *admit.Attempt, reason string) {
			mu.Lock()
			seen = append(seen, a.Request.(*http.Request).URL.Path+" "+reason)
			mu.Unlock()
		}},
	}, newBlocker())

	check := func(r result) {
		t.Helper()
		require.NoError(t, r.err)
		assert.Equal(t, http.StatusServiceUnavailable, r.status)
		assert.Equal(t, "1", r.header.Get(reject.NotStartedHeader))
		assert.Equal(t, "concurrency", r.header.Get(reject.ReasonHeader))
		assert.Equal(t, "1", r.header.Get("Retry-After"))
		assert.Equal(t, "text/plain; charset=utf-8", r.header.Get("Content-Type"))
		assert.Equal(t, "request not started: concurrency\n", r.body)
	}
	r := hs.get("/a")
	check(r)
	assert.False(t, r.reused)
	assert.False(t, r.closed)
	r = hs.get("/b")
	check(r)
	assert.True(t, r.reused, "the connection survives a rejection")

	// A small body is drained: the connection survives.
	r = hs.do(hs.newRequest(context.Background(), http.MethodPost, "/c", strings.NewReader(strings.Repeat("x", 100<<10))))
	check(r)
	assert.True(t, r.reused)
	assert.False(t, r.closed)
	// So is a chunked one (unknown length).
	r = hs.do(hs.newRequest(context.Background(), http.MethodPost, "/d", io.MultiReader(strings.NewReader("chunked body"))))
	check(r)
	assert.True(t, r.reused)
	assert.False(t, r.closed)
	assert.EqualValues(t, 1, hs.newConns.Load(), "one connection for all")

	mu.Lock()
	assert.Equal(t, []string{"/a concurrency", "/b concurrency", "/c concurrency", "/d concurrency"}, seen)
	mu.Unlock()
	st := hs.a.Stats()
	assert.EqualValues(t, 4, st.Rejected)
	assert.Equal(t, map[string]int64{"concurrency": 4}, st.RejectedBy)
	assert.EqualValues(t, 0, st.Admitted)
	assert.Greater(t, st.GatesClosed, time.Duration(0), "closed since the first refusal")
}

// A body over 256 KiB is not read: the answer closes the connection.
func TestRejectedLargeBodyCloses(t *testing.T) {
	hs := newHarness(t, gates(gatetest.Concurrency(t, 0)), newBlocker())
	r := hs.do(hs.newRequest(context.Background(), http.MethodPost, "/", bytes.NewReader(make([]byte, 300<<10))))
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusServiceUnavailable, r.status)
	assert.Equal(t, "request not started: concurrency\n", r.body)
	assert.True(t, r.closed)
	r = hs.get("/")
	require.NoError(t, r.err)
	assert.False(t, r.reused)
	assert.EqualValues(t, 2, hs.newConns.Load())
}

// A body held back for "Expect: 100-continue" is not asked for: the client
// gets the rejection without sending it, and the connection closes.
func TestRejectedExpectContinue(t *testing.T) {
	hs := newHarness(t, gates(gatetest.Concurrency(t, 0)), newBlocker())
	body := &countingReader{r: strings.NewReader("never sent")}
	req := hs.newRequest(context.Background(), http.MethodPost, "/", body, "Expect", "100-continue")
	req.ContentLength = int64(len("never sent"))
	r := hs.do(req)
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusServiceUnavailable, r.status)
	assert.True(t, r.closed)
	assert.Zero(t, body.n.Load(), "the body was not sent")
}

type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func TestRejectionOptions(t *testing.T) {
	hs := newHarness(t, admit.Config{
		Gates: []admit.Policy{gatetest.Concurrency(t, 0)},
		Rejection: admit.Rejection{
			Status:     http.StatusTooManyRequests,
			RetryAfter: 1500 * time.Millisecond,
			Header:     http.Header{"cache-control": {"no-store"}},
		},
	}, newBlocker())
	r := hs.get("/")
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusTooManyRequests, r.status)
	assert.Equal(t, "2", r.header.Get("Retry-After"))
	assert.Equal(t, "no-store", r.header.Get("Cache-Control"))
	assert.Equal(t, "1", r.header.Get(reject.NotStartedHeader))

	hs = newHarness(t, admit.Config{Gates: []admit.Policy{gatetest.Concurrency(t, 0)}, Rejection: admit.Rejection{RetryAfter: -1}}, newBlocker())
	r = hs.get("/")
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusServiceUnavailable, r.status)
	_, has := r.header["Retry-After"]
	assert.False(t, has)
}

// A queued request starts as soon as the request in flight ends: a
// concurrency limit of 1, the first request held in its handler, the
// second waiting; releasing the first starts the second.
func TestQueuedStartsWhenRequestEnds(t *testing.T) {
	b := newBlocker()
	hs := newHarness(t, queued(time.Hour, gatetest.Concurrency(t, 1)), b)
	first := hs.goGet("/?id=1&block")
	b.waitStarted(t, "1")
	second := hs.goGet("/?id=2")
	hs.waitQueued(t, 1)
	assert.False(t, b.hasStarted("2"))
	b.unblock("1")
	b.waitStarted(t, "2")
	assert.Equal(t, "ok 1", await(t, first).body)
	r := await(t, second)
	assert.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, "ok 2", r.body)

	st := hs.a.Stats()
	assert.EqualValues(t, 2, st.Admitted)
	assert.EqualValues(t, 1, st.Queued)
	assert.EqualValues(t, 0, st.InFlight)
	assert.EqualValues(t, 1, st.Queue.Started)
	assert.EqualValues(t, 0, st.Queue.Len)
}

// A waiting request is not overtaken by a newcomer that finds the gate
// open, and a Waker gate that opens starts the head at once.
func TestQueuedStartsWhenGateOpens(t *testing.T) {
	b := newBlocker()
	limit := gatetest.Concurrency(t, 1)
	hs := newHarness(t, queued(time.Hour, limit), b)
	first := hs.goGet("/?id=1&block")
	b.waitStarted(t, "1")
	second := hs.goGet("/?id=2&block")
	hs.waitQueued(t, 1)
	limit.SetLimit(2) // a wake-up: the head starts though the first still runs
	b.waitStarted(t, "2")
	limit.SetLimit(3)
	third := hs.goGet("/?id=3")
	b.waitStarted(t, "3")
	assert.Equal(t, "ok 3", await(t, third).body)
	b.unblock("1")
	b.unblock("2")
	await(t, first)
	await(t, second)
	assert.EqualValues(t, 1, hs.a.Stats().Queued)
}

func TestQueueTimeout(t *testing.T) {
	b := newBlocker()
	hs := newHarness(t, queued(50*time.Millisecond, gatetest.Concurrency(t, 1)), b)
	first := hs.goGet("/?id=1&block")
	b.waitStarted(t, "1")
	r := hs.get("/?id=2")
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusServiceUnavailable, r.status)
	assert.Equal(t, reject.QueueTimeout, r.reason())
	assert.Equal(t, "request not started: queue-timeout\n", r.body)
	assert.Equal(t, "1", r.header.Get(reject.NotStartedHeader))
	assert.False(t, b.hasStarted("2"))
	b.unblock("1")
	await(t, first)
	st := hs.a.Stats()
	assert.Equal(t, map[string]int64{reject.QueueTimeout: 1}, st.RejectedBy)
	assert.EqualValues(t, 1, st.Queue.Rejected[queue.Timeout])
	// The connection of the rejected request is reused.
	r = hs.get("/?id=3")
	require.NoError(t, r.err)
	assert.True(t, r.reused)
}

// A critical request overtakes a sheddable one that waited longer.
func TestClassesCriticalFirst(t *testing.T) {
	b := newBlocker()
	cfg := queued(time.Hour, gatetest.Concurrency(t, 1))
	cfg.Queue.Classify = admit.ClassFromHeader("X-Priority")
	hs := newHarness(t, cfg, b)
	first := hs.goGet("/?id=first&block")
	b.waitStarted(t, "first")
	shed := hs.goGet("/?id=sheddable", "X-Priority", "sheddable")
	hs.waitQueued(t, 1)
	crit := hs.goGet("/?id=critical", "X-Priority", "critical")
	hs.waitQueued(t, 2)
	b.unblock("first")
	await(t, first)
	await(t, crit)
	await(t, shed)
	close(b.order)
	var order []string
	for id := range b.order {
		order = append(order, id)
	}
	assert.Equal(t, []string{"first", "critical", "sheddable"}, order)
}

func TestClassify(t *testing.T) {
	b := newBlocker()
	cfg := queued(time.Hour, gatetest.Concurrency(t, 1))
	cfg.Queue.Classify = func(a *admit.Attempt) queue.Class {
		if strings.HasPrefix(a.Path, "/checkout") {
			return queue.Critical
		}
		return queue.Sheddable
	}
	hs := newHarness(t, cfg, b)
	first := hs.goGet("/?id=first&block")
	b.waitStarted(t, "first")
	other := hs.goGet("/other?id=other")
	hs.waitQueued(t, 1)
	checkout := hs.goGet("/checkout?id=checkout")
	hs.waitQueued(t, 2)
	b.unblock("first")
	for _, ch := range []<-chan result{first, checkout, other} {
		await(t, ch)
	}
	close(b.order)
	var order []string
	for id := range b.order {
		order = append(order, id)
	}
	assert.Equal(t, []string{"first", "checkout", "other"}, order)
}

func TestQueueFullAndEvicted(t *testing.T) {
	b := newBlocker()
	cfg := queued(time.Hour, gatetest.Concurrency(t, 1))
	cfg.Queue.MaxLen = 1
	cfg.Queue.Classify = admit.ClassFromHeader("X-Priority")
	hs := newHarness(t, cfg, b)
	first := hs.goGet("/?id=first&block")
	b.waitStarted(t, "first")
	shed := hs.goGet("/?id=shed", "X-Priority", "sheddable")
	hs.waitQueued(t, 1)
	// Same class, no room: rejected at once.
	r := hs.get("/?id=full", "X-Priority", "sheddable")
	require.NoError(t, r.err)
	assert.Equal(t, reject.QueueFull, r.reason())
	// A critical one takes the sheddable one's place.
	crit := hs.goGet("/?id=crit", "X-Priority", "critical")
	r = await(t, shed)
	assert.Equal(t, http.StatusServiceUnavailable, r.status)
	assert.Equal(t, reject.QueueEvicted, r.reason())
	b.unblock("first")
	await(t, first)
	assert.Equal(t, "ok crit", await(t, crit).body)
	st := hs.a.Stats()
	assert.Equal(t, map[string]int64{reject.QueueFull: 1, reject.QueueEvicted: 1}, st.RejectedBy)
	assert.EqualValues(t, 3, st.Queued)
}

func TestCloseRejectsWaiting(t *testing.T) {
	b := newBlocker()
	hs := newHarness(t, queued(time.Hour, gatetest.Concurrency(t, 1)), b)
	first := hs.goGet("/?id=first&block")
	b.waitStarted(t, "first")
	waiting := hs.goGet("/?id=waiting")
	hs.waitQueued(t, 1)
	hs.a.Close()
	hs.a.Close()
	assert.Equal(t, reject.QueueClosed, await(t, waiting).reason())
	assert.Equal(t, reject.QueueClosed, hs.get("/?id=later").reason())
	b.unblock("first")
	assert.Equal(t, http.StatusOK, await(t, first).status)
	// Admitted requests are still served.
	assert.Equal(t, http.StatusOK, hs.get("/?id=again").status)
}

// A client that gives up while queued leaves the queue; the middleware
// counts it and keeps no goroutine.
func TestQueuedClientGoesAway(t *testing.T) {
	b := newBlocker()
	hs := newHarness(t, queued(time.Hour, gatetest.Concurrency(t, 1)), b)
	first := hs.goGet("/?id=first&block")
	b.waitStarted(t, "first")
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan result, 1)
	go func() { gone <- hs.do(hs.newRequest(ctx, http.MethodGet, "/?id=gone", nil)) }()
	hs.waitQueued(t, 1)
	cancel()
	r := <-gone
	require.ErrorIs(t, r.err, context.Canceled)
	require.Eventually(t, func() bool { return hs.a.Stats().Canceled == 1 }, guard, time.Millisecond)
	assert.Zero(t, hs.a.Stats().Rejected)
	assert.EqualValues(t, 1, hs.a.Stats().Queue.Removed)
	b.unblock("first")
	await(t, first)
	assert.False(t, b.hasStarted("gone"))
	assert.EqualValues(t, 0, hs.a.Stats().InFlight)
}

// The reason names the gate that refused; the gates before it are given
// back.
func TestGatesReason(t *testing.T) {
	s := &scripted{}
	s.set(3, 0)
	limit := gatetest.Concurrency(t, 10)
	sched := gatetest.GoSched(t, gate.GoSchedConfig{Procs: 2, Reader: s.read, MaxAge: gate.Manual})
	hs := newHarness(t, gates(limit, sched), newBlocker())
	r := hs.get("/")
	require.NoError(t, r.err)
	assert.Equal(t, "gosched", r.reason())
	assert.Equal(t, 0, limit.InFlight(), "the concurrency slot was given back")
	s.set(1, 0)
	sched.Refresh()
	assert.Equal(t, http.StatusOK, hs.get("/").status)
}

// The GoSched gate with a scripted reader: it refuses while the scheduler
// is loaded; a request it made wait starts when a request in flight ends,
// the only event that can reopen it (it is no Waker).
func TestGoSchedRefusesAndQueuePumpedOnRequestEnd(t *testing.T) {
	s := &scripted{}
	s.set(1, 0)
	sched := gatetest.GoSched(t, gate.GoSchedConfig{Procs: 2, Reader: s.read, MaxAge: gate.Manual}) // limit 1
	b := newBlocker()
	hs := newHarness(t, gates(sched), b)
	assert.Equal(t, http.StatusOK, hs.get("/?id=open").status)
	s.set(2, 1)
	sched.Refresh()
	r := hs.get("/?id=refused")
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusServiceUnavailable, r.status)
	assert.Equal(t, "gosched", r.reason())
	assert.Equal(t, "request not started: gosched\n", r.body)

	s.set(1, 0)
	sched.Refresh()
	hq := newHarness(t, queued(time.Hour, sched), b)
	first := hq.goGet("/?id=first&block")
	b.waitStarted(t, "first")
	s.set(2, 0) // the first handler runs on the other P
	sched.Refresh()
	second := hq.goGet("/?id=second")
	hq.waitQueued(t, 1)
	s.set(1, 0) // the scheduler frees up: nothing tells the queue
	sched.Refresh()
	assert.False(t, b.hasStarted("second"))
	b.unblock("first") // the first request's end pumps the queue
	b.waitStarted(t, "second")
	await(t, first)
	assert.Equal(t, "ok second", await(t, second).body)
}

// A handler that panics still ends its request: the gate is released and
// the outcome says 500 with the panic.
func TestPanickingHandlerReleases(t *testing.T) {
	limit := gatetest.Concurrency(t, 1)
	var seen admit.Outcome
	out := &outcomes{fn: func(o admit.Outcome) { seen = o }}
	a, err := New(admit.Config{Policies: []admit.Policy{out}, Gates: []admit.Policy{limit}})
	require.NoError(t, err)
	defer a.Close()
	h := a.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	assert.PanicsWithValue(t, "boom", func() {
		h.ServeHTTP(nopWriter{}, httpRequest())
	})
	assert.Equal(t, 0, limit.InFlight())
	assert.EqualValues(t, 0, a.Stats().InFlight)
	assert.EqualValues(t, 1, a.Stats().Admitted)
	assert.Equal(t, http.StatusInternalServerError, seen.Status)
	assert.ErrorContains(t, seen.Err, "boom")
}

// The outcome carries the status the handler wrote; the writer passes
// Flush, Hijack, io.Copy's ReadFrom and ResponseController through.
func TestOutcomeStatusAndWriterPassThrough(t *testing.T) {
	var statuses []int
	out := &outcomes{fn: func(o admit.Outcome) { statuses = append(statuses, o.Status) }}
	a, err := New(admit.Config{Policies: []admit.Policy{out}})
	require.NoError(t, err)
	defer a.Close()
	for i, tc := range []struct {
		h    http.HandlerFunc
		want int
	}{
		{func(w http.ResponseWriter, r *http.Request) {}, 200},
		{func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, 404},
		{func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "x") }, 200},
		{func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusContinue) // informational: not the status
			w.WriteHeader(http.StatusAccepted)
		}, 202},
		{func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(w, strings.NewReader("copied"))
		}, 200},
		{func(w http.ResponseWriter, r *http.Request) {
			assert.NoError(t, http.NewResponseController(w).Flush())
			w.(http.Flusher).Flush()
			_, _, err := w.(http.Hijacker).Hijack()
			assert.ErrorContains(t, err, "cannot hijack")
		}, 200},
	} {
		rec := httptest.NewRecorder()
		a.Wrap(tc.h).ServeHTTP(rec, httpRequest())
		require.Len(t, statuses, i+1)
		assert.Equal(t, tc.want, statuses[i], "case %d", i)
		if i == 4 {
			assert.Equal(t, "copied", rec.Body.String())
		}
		if i == 5 {
			assert.True(t, rec.Flushed)
		}
	}
}

// outcomes is a policy that admits all and reports each outcome.
type outcomes struct{ fn func(admit.Outcome) }

func (o *outcomes) Admit(*admit.Attempt) *admit.Refusal    { return nil }
func (o *outcomes) Done(_ *admit.Attempt, x admit.Outcome) { o.fn(x) }

// nopWriter is a ResponseWriter that discards everything.
type nopWriter struct{}

var nopHeader = http.Header{}

func (nopWriter) Header() http.Header         { return nopHeader }
func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriter) WriteHeader(int)             {}

// recorder is a minimal ResponseWriter that keeps the status and body.
type recorder struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(p)
}
func (r *recorder) WriteHeader(s int) {
	if r.status == 0 {
		r.status = s
	}
}

func httpRequest() *http.Request {
	r, err := http.NewRequest(http.MethodGet, "http://example.com/", nil)
	if err != nil {
		panic(err)
	}
	return r
}
