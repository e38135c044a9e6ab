//go:build linux

package load

import (
	"context"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluice-go/sluice/reject"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testServer starts a loopback server running h and closes it when the test
// ends (Close waits for the handlers still running).
func testServer(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}

func ok(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }

// sleepy answers after d, or gives up when the client goes away.
func sleepy(d time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(d):
			_, _ = w.Write([]byte("ok"))
		case <-r.Context().Done():
		}
	}
}

func TestRefusesBadConfig(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{"http://example.com/", "http://10.0.0.1:80/", "ftp://127.0.0.1/", "http://[::1", "http://0.0.0.0:80/"} {
		_, err := Run(ctx, Config{URL: u, Rate: 1, Duration: time.Millisecond})
		assert.Error(t, err, u)
	}
	_, err := Run(ctx, Config{URL: "http://127.0.0.1:1/", Rate: 0, Duration: time.Millisecond})
	assert.Error(t, err, "zero rate")
	_, err = Run(ctx, Config{URL: "http://127.0.0.1:1/", Rate: 1})
	assert.Error(t, err, "zero duration")
	_, err = Run(ctx, Config{URL: "http://127.0.0.1:1/", Rate: 1, Duration: 1, Arrival: 9})
	assert.Error(t, err, "unknown arrival")
	_, err = Run(ctx, Config{URL: "http://127.0.0.1:1/", Rate: 1, Duration: 1, NewConn: func(int) bool { return true }, Client: http.DefaultClient})
	assert.Error(t, err, "NewConn with Client")
}

func TestConstantRate(t *testing.T) {
	var hits atomic.Int64
	u := testServer(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1); ok(w, r) })
	res, err := Run(context.Background(), Config{URL: u, Rate: 200, Duration: 500 * time.Millisecond})
	require.NoError(t, err)
	t.Logf("%+v max lag %v", *res, res.MaxLag)
	assert.Equal(t, int64(100), res.Offered, "i/200 < 0.5 s for i in [0, 100)")
	assert.InDelta(t, 100, res.Sent, 10)
	assert.Equal(t, res.Sent, res.OK)
	assert.Equal(t, res.Sent, hits.Load())
	assert.Zero(t, res.Failed+res.Rejected)
	assert.Equal(t, 500*time.Millisecond, res.Duration)
	assert.InDelta(t, 200, res.Goodput(), 20)
	h := res.ByClass[""].Latency
	assert.Equal(t, res.OK, h.TotalCount())
}

func TestPoissonRate(t *testing.T) {
	u := testServer(t, ok)
	res, err := Run(context.Background(), Config{URL: u, Rate: 1000, Duration: 400 * time.Millisecond, Arrival: Poisson, Seed: 1})
	require.NoError(t, err)
	// 400 expected, standard deviation 20.
	assert.InDelta(t, 400, res.Offered, 100)
	assert.Equal(t, res.Offered, res.OK+res.Failed)
}

func TestLatencyFromSchedule(t *testing.T) {
	u := testServer(t, sleepy(50*time.Millisecond))
	res, err := Run(context.Background(), Config{URL: u, Rate: 50, Duration: 300 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, res.Sent, res.OK)
	h := res.ByClass[""].Latency
	assert.GreaterOrEqual(t, h.ValueAtQuantile(50), int64(50_000))
	assert.GreaterOrEqual(t, h.Min(), int64(50_000))
}

// A server answering one request at a time: queued requests wait in the
// server, and their latency, timed from the schedule, includes the wait.
func TestLatencyIncludesQueueing(t *testing.T) {
	gate := make(chan struct{}, 1)
	u := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		gate <- struct{}{}
		time.Sleep(20 * time.Millisecond)
		<-gate
		ok(w, r)
	})
	// 100/s against a capacity of 50/s: 10 requests, the last waits
	// about 100 ms behind the others.
	res, err := Run(context.Background(), Config{URL: u, Rate: 100, Duration: 100 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, int64(10), res.OK)
	assert.GreaterOrEqual(t, res.ByClass[""].Latency.Max(), int64(90_000))
}

func TestDeadline(t *testing.T) {
	u := testServer(t, sleepy(200*time.Millisecond))
	start := time.Now()
	res, err := Run(context.Background(), Config{URL: u, Rate: 100, Duration: 100 * time.Millisecond, Deadline: 100 * time.Millisecond})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 500*time.Millisecond, "waits for stragglers at most the deadline")
	assert.Equal(t, int64(10), res.Sent)
	assert.Equal(t, res.Sent, res.Failed)
	assert.Zero(t, res.OK)
	assert.Zero(t, res.Goodput())
}

func TestRejections(t *testing.T) {
	u := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("X-Kind") {
		case "reject":
			w.Header().Set(reject.NotStartedHeader, "1")
			w.WriteHeader(http.StatusServiceUnavailable)
		case "plain503":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "500":
			w.WriteHeader(http.StatusInternalServerError)
		default:
			ok(w, r)
		}
	})
	kinds := []string{"ok", "reject", "plain503", "500"}
	res, err := Run(context.Background(), Config{
		URL: u, Rate: 400, Duration: 100 * time.Millisecond,
		Classify: func(i int) (string, http.Header) {
			k := kinds[i%len(kinds)]
			return k, http.Header{"X-Kind": {k}}
		},
	})
	require.NoError(t, err)
	require.Len(t, res.ByClass, 4)
	for _, k := range kinds {
		c := res.ByClass[k]
		assert.Equal(t, int64(10), c.Offered, k)
		assert.Equal(t, int64(10), c.Sent, k)
	}
	assert.Equal(t, int64(10), res.ByClass["ok"].OK)
	assert.Equal(t, int64(10), res.ByClass["ok"].Latency.TotalCount())
	assert.Equal(t, int64(10), res.ByClass["reject"].Rejected)
	assert.Zero(t, res.ByClass["reject"].Latency.TotalCount(), "only OK answers are in the histogram")
	assert.Equal(t, int64(10), res.ByClass["plain503"].Failed, "a 503 without the header is a failure")
	assert.Equal(t, int64(10), res.ByClass["500"].Failed)
	assert.Equal(t, int64(40), res.Offered)
	assert.Equal(t, int64(10), res.OK)
	assert.Equal(t, int64(10), res.Rejected)
	assert.Equal(t, int64(20), res.Failed)
}

func TestBehindWhenInFlightBoundHit(t *testing.T) {
	u := testServer(t, sleepy(100*time.Millisecond))
	res, err := Run(context.Background(), Config{
		URL: u, Rate: 1e5, Duration: 50 * time.Millisecond,
		Deadline: 200 * time.Millisecond, MaxInFlight: 4,
	})
	require.NoError(t, err)
	assert.True(t, res.Behind)
	assert.Equal(t, int64(4), res.Sent)
	assert.Equal(t, res.Offered-4, res.Dropped)
	assert.Equal(t, res.Offered, res.OK+res.Failed)
}

func TestBehindWhenLate(t *testing.T) {
	u := testServer(t, ok)
	// A classifier that stalls the dispatcher stands for a generator that
	// cannot keep up.
	res, err := Run(context.Background(), Config{
		URL: u, Rate: 100, Duration: 100 * time.Millisecond,
		Classify: func(i int) (string, http.Header) {
			if i == 2 {
				time.Sleep(30 * time.Millisecond)
			}
			return "", nil
		},
	})
	require.NoError(t, err)
	assert.True(t, res.Behind)
	assert.GreaterOrEqual(t, res.MaxLag, 15*time.Millisecond)
	assert.GreaterOrEqual(t, res.Late, int64(1))
	assert.Zero(t, res.Dropped)
}

func TestContextCancel(t *testing.T) {
	u := testServer(t, sleepy(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := Run(ctx, Config{URL: u, Rate: 100, Duration: 2 * time.Second})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 500*time.Millisecond)
	assert.Less(t, res.Duration, 200*time.Millisecond)
	assert.InDelta(t, 10, res.Sent, 3)
	assert.Equal(t, res.Sent, res.Failed, "requests in flight are cancelled")
}

func TestSeriesCountsByScheduledTime(t *testing.T) {
	var start atomic.Int64
	// Serves until 250 ms into the run, then rejects (not started).
	url := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		if time.Since(time.Unix(0, start.Load())) < 250*time.Millisecond {
			ok(w, r)
			return
		}
		w.Header().Set(reject.NotStartedHeader, "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	start.Store(time.Now().UnixNano())
	res, err := Run(context.Background(), Config{URL: url, Rate: 200, Duration: 500 * time.Millisecond, Bucket: 100 * time.Millisecond})
	require.NoError(t, err)
	require.Len(t, res.Series, 5)
	var sum Bucket
	for i, b := range res.Series {
		assert.Equal(t, time.Duration(i)*100*time.Millisecond, b.Start)
		assert.Equal(t, int64(20), b.Offered, "bucket %d", i)
		assert.Equal(t, b.Offered, b.OK+b.Rejected+b.Failed, "bucket %d", i)
		sum.Offered += b.Offered
		sum.OK += b.OK
		sum.Rejected += b.Rejected
		sum.Failed += b.Failed
	}
	assert.Equal(t, res.Offered, sum.Offered)
	assert.Equal(t, res.OK, sum.OK)
	assert.Equal(t, res.Rejected, sum.Rejected)
	assert.Equal(t, res.Failed, sum.Failed)
	// Generous: the switch at 250 ms is in bucket 2.
	assert.Equal(t, int64(20), res.Series[0].OK)
	assert.Equal(t, int64(20), res.Series[4].Rejected)

	res, err = Run(context.Background(), Config{URL: url, Rate: 100, Duration: 100 * time.Millisecond})
	require.NoError(t, err)
	assert.Nil(t, res.Series, "no series without Config.Bucket")
}

func TestSeriesCountsCompletionsByEndTime(t *testing.T) {
	var start atomic.Int64
	var held atomic.Int64
	// Holds what arrives in the first 100 ms until 250 ms into the run.
	url := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		began := time.Unix(0, start.Load())
		if time.Since(began) < 100*time.Millisecond {
			held.Add(1)
			time.Sleep(time.Until(began.Add(250 * time.Millisecond)))
		}
		ok(w, r)
	})
	start.Store(time.Now().UnixNano())
	res, err := Run(context.Background(), Config{URL: url, Rate: 200, Duration: 500 * time.Millisecond, Bucket: 100 * time.Millisecond})
	require.NoError(t, err)
	require.Len(t, res.Series, 5)
	require.Positive(t, held.Load())
	assert.Zero(t, res.Series[0].Completed, "nothing answered in the first 100 ms")
	assert.Positive(t, res.Series[0].OK, "though the requests sent then were served")
	var completed int64
	for _, b := range res.Series {
		completed += b.Completed
	}
	assert.LessOrEqual(t, completed, res.OK, "answers after the window are in no bucket")
	assert.GreaterOrEqual(t, completed, res.OK-20, "only the last few end after it")
	// The held answers leave at 250 ms or later: in bucket 2 or after,
	// whenever the machine lets them, never in bucket 0 or 1.
	var late int64
	for _, b := range res.Series[2:] {
		late += b.Completed
	}
	assert.GreaterOrEqual(t, late+res.OK-completed, held.Load())
}

func TestRefusesBadPhases(t *testing.T) {
	ctx := context.Background()
	u := "http://127.0.0.1:1/"
	good := Phase{Rate: 10, Duration: time.Second}
	for name, cfg := range map[string]Config{
		"Rate with Phases":     {Rate: 10, Phases: []Phase{good}},
		"Duration with Phases": {Duration: time.Second, Phases: []Phase{good}},
		"zero rate":            {Phases: []Phase{good, {Duration: time.Second}}},
		"negative rate":        {Phases: []Phase{{Rate: -1, Duration: time.Second}}},
		"NaN rate":             {Phases: []Phase{{Rate: math.NaN(), Duration: time.Second}}},
		"infinite rate":        {Phases: []Phase{{Rate: math.Inf(1), Duration: time.Second}}},
		"zero duration":        {Phases: []Phase{good, {Rate: 10}}},
		"negative duration":    {Phases: []Phase{{Rate: 10, Duration: -time.Second}}},
		"total overflows":      {Phases: []Phase{{Rate: 1, Duration: math.MaxInt64 / 2}, {Rate: 1, Duration: math.MaxInt64/2 + 2}}},
	} {
		cfg.URL = u
		_, err := Run(ctx, cfg)
		assert.Error(t, err, name)
	}
}

// The pool and the in-flight bound are sized for the highest phase rate.
func TestPlanSizesForPeakPhase(t *testing.T) {
	p, err := newPlan(Config{URL: "http://127.0.0.1:1/", Deadline: 100 * time.Millisecond, Phases: []Phase{
		{Rate: 100, Duration: time.Second},
		{Rate: 2000, Duration: time.Second},
		{Rate: 100, Duration: time.Second},
	}})
	require.NoError(t, err)
	assert.Equal(t, 2000.0, p.peak)
	assert.Equal(t, 3*time.Second, p.total)
	assert.Equal(t, 200, p.Conns, "ceil(2000/s * 100 ms)")
	assert.Equal(t, 2*200+64, p.MaxInFlight)

	p, err = newPlan(Config{URL: "http://127.0.0.1:1/", Rate: 50, Duration: time.Second})
	require.NoError(t, err)
	assert.Equal(t, []Phase{{Rate: 50, Duration: time.Second}}, p.phases)
	assert.Equal(t, 50, p.Conns, "ceil(50/s * DefaultDeadline)")
}

// A low-high-low step: each bucket offers its phase's rate.
func TestPhasesStep(t *testing.T) {
	u := testServer(t, ok)
	const bucket = 100 * time.Millisecond
	res, err := Run(context.Background(), Config{
		URL: u, Bucket: bucket,
		Phases: []Phase{
			{Rate: 100, Duration: 200 * time.Millisecond},
			{Rate: 400, Duration: 200 * time.Millisecond},
			{Rate: 100, Duration: 200 * time.Millisecond},
		},
	})
	require.NoError(t, err)
	assert.Equal(t, 600*time.Millisecond, res.Duration)
	assert.Equal(t, int64(20+80+20), res.Offered)
	assert.Equal(t, res.Offered, res.OK+res.Rejected+res.Failed)
	require.Len(t, res.Series, 6)
	for i, want := range []int64{10, 10, 40, 40, 10, 10} {
		assert.Equal(t, time.Duration(i)*bucket, res.Series[i].Start)
		assert.InDelta(t, want, res.Series[i].Offered, 1, "bucket %d", i)
	}
	if !res.Behind {
		assert.Equal(t, res.Offered, res.OK, "a fast target answers everything")
	}
}

func TestPhasesPoisson(t *testing.T) {
	u := testServer(t, ok)
	res, err := Run(context.Background(), Config{
		URL: u, Arrival: Poisson, Seed: 5, Bucket: 100 * time.Millisecond,
		Phases: []Phase{
			{Rate: 100, Duration: 100 * time.Millisecond},
			{Rate: 1000, Duration: 200 * time.Millisecond},
		},
	})
	require.NoError(t, err)
	assert.Equal(t, 300*time.Millisecond, res.Duration)
	require.Len(t, res.Series, 3)
	// 10 then 2 x 100 expected: generous bounds.
	assert.Less(t, res.Series[0].Offered, int64(40))
	assert.InDelta(t, 200, res.Series[1].Offered+res.Series[2].Offered, 70)
}

func TestPhasesContextCancel(t *testing.T) {
	u := testServer(t, ok)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res, err := Run(ctx, Config{URL: u, Phases: []Phase{{Rate: 100, Duration: 50 * time.Millisecond}, {Rate: 100, Duration: 5 * time.Second}}})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, res.Duration, time.Second)
	assert.Less(t, res.Offered, int64(100))
}

// connServer is a loopback server that records which connection each
// request came on, by class, and how many connections it accepted.
type connServer struct {
	url   string
	mu    sync.Mutex
	conns int
	addrs map[string][]string // class -> RemoteAddr of each request
}

func newConnServer(t *testing.T) *connServer {
	cs := &connServer{addrs: make(map[string][]string)}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.mu.Lock()
		cs.addrs[r.Header.Get("X-Class")] = append(cs.addrs[r.Header.Get("X-Class")], r.RemoteAddr)
		cs.mu.Unlock()
		ok(w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			cs.mu.Lock()
			cs.conns++
			cs.mu.Unlock()
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	cs.url = s.URL
	return cs
}

func distinct(xs []string) map[string]bool {
	m := make(map[string]bool)
	for _, x := range xs {
		m[x] = true
	}
	return m
}

func TestNewConn(t *testing.T) {
	cs := newConnServer(t)
	class := func(i int) string {
		if i%2 == 1 {
			return "new"
		}
		return "kept"
	}
	res, err := Run(context.Background(), Config{
		URL: cs.url, Rate: 200, Duration: 200 * time.Millisecond,
		// One kept-alive connection: the kept requests all share it.
		Conns:   1,
		NewConn: func(i int) bool { return class(i) == "new" },
		Classify: func(i int) (string, http.Header) {
			return class(i), http.Header{"X-Class": {class(i)}}
		},
	})
	require.NoError(t, err)
	require.Equal(t, int64(40), res.OK)
	assert.Equal(t, int64(20), res.ByClass["kept"].OK)
	assert.Equal(t, int64(20), res.ByClass["new"].OK)

	cs.mu.Lock()
	defer cs.mu.Unlock()
	kept, fresh := distinct(cs.addrs["kept"]), distinct(cs.addrs["new"])
	assert.Len(t, cs.addrs["kept"], 20)
	assert.Len(t, kept, 1, "kept requests reuse their connection")
	assert.Len(t, cs.addrs["new"], 20)
	assert.Len(t, fresh, 20, "each new-connection request has a connection of its own")
	for a := range kept {
		assert.False(t, fresh[a], "the kept connection is not used for new-connection requests")
	}
	assert.Equal(t, 21, cs.conns, "connections accepted")
}

// Without NewConn, every request goes on the pool.
func TestNoNewConnReuses(t *testing.T) {
	cs := newConnServer(t)
	res, err := Run(context.Background(), Config{URL: cs.url, Rate: 200, Duration: 100 * time.Millisecond, Conns: 2})
	require.NoError(t, err)
	require.Equal(t, int64(20), res.OK)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	assert.LessOrEqual(t, cs.conns, 2)
}
