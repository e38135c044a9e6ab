//go:build linux

package load

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/reject"
)

func TestCalibrateRefusesBadConfig(t *testing.T) {
	ctx := context.Background()
	u := "http://127.0.0.1:1/"
	for name, cfg := range map[string]CalibrateConfig{
		"not loopback":      {URL: "http://example.com/"},
		"bad URL":           {URL: "http://[::1"},
		"negative Conns":    {URL: u, Conns: -1},
		"negative Warmup":   {URL: u, Warmup: -time.Second},
		"negative Duration": {URL: u, Duration: -time.Second},
		"negative Deadline": {URL: u, Deadline: -time.Second},
		"bad method":        {URL: u, Method: "NOT A METHOD"},
	} {
		_, err := Calibrate(ctx, cfg)
		assert.Error(t, err, name)
	}
}

func TestCalibrateDefaults(t *testing.T) {
	cfg, err := CalibrateConfig{URL: "http://localhost:1/"}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, DefaultCalibrateConns, cfg.Conns)
	assert.Equal(t, DefaultCalibrateWarmup, cfg.Warmup)
	assert.Equal(t, DefaultCalibrateDuration, cfg.Duration)
	assert.Equal(t, DefaultDeadline, cfg.Deadline)
	assert.Equal(t, http.MethodGet, cfg.Method)
}

// A target of n slots each busy for d answers n/d requests per second when
// more workers than slots keep it saturated.
func TestCalibrateGoodput(t *testing.T) {
	const n, d = 4, 20 * time.Millisecond
	slots := make(chan struct{}, n)
	u := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		defer func() { <-slots }()
		select {
		case <-time.After(d):
			ok(w, r)
		case <-r.Context().Done():
		}
	})
	res, err := Calibrate(context.Background(), CalibrateConfig{
		URL: u, Conns: 16, Warmup: 100 * time.Millisecond, Duration: 500 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Logf("goodput %.0f/s, ok %d, rejected %d, failed %d, p50 %d µs", res.Goodput, res.OK, res.Rejected, res.Failed, res.Latency.ValueAtQuantile(50))
	want := n / d.Seconds() // 200/s
	assert.Equal(t, 500*time.Millisecond, res.Duration)
	assert.GreaterOrEqual(t, res.Goodput, 0.3*want)
	assert.LessOrEqual(t, res.Goodput, 1.5*want)
	assert.InDelta(t, float64(res.OK)/0.5, res.Goodput, 1e-6)
	assert.Zero(t, res.Rejected+res.Failed)
	assert.Equal(t, res.OK, res.Latency.TotalCount())
	// 16 workers on 4 slots: each request waits about 3 others' turns.
	assert.GreaterOrEqual(t, res.Latency.ValueAtQuantile(50), d.Microseconds())
}

// Only the answers completed after the warmup count.
func TestCalibrateSkipsWarmup(t *testing.T) {
	var hits atomic.Int64
	u := testServer(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1); ok(w, r) })
	res, err := Calibrate(context.Background(), CalibrateConfig{
		URL: u, Conns: 2, Warmup: 150 * time.Millisecond, Duration: 150 * time.Millisecond,
	})
	require.NoError(t, err)
	assert.Positive(t, res.OK)
	assert.Less(t, res.OK, hits.Load(), "the warmup's answers are not counted")
}

// Rejections are counted apart, and the pause after each keeps a worker
// below one request per CalibrateBackoff.
func TestCalibrateRejections(t *testing.T) {
	u := testServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set(reject.NotStartedHeader, "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	const conns, window = 4, 200 * time.Millisecond
	res, err := Calibrate(context.Background(), CalibrateConfig{
		URL: u, Conns: conns, Warmup: 50 * time.Millisecond, Duration: window,
	})
	require.NoError(t, err)
	assert.Positive(t, res.Rejected)
	assert.Zero(t, res.OK+res.Failed)
	assert.Zero(t, res.Goodput)
	// Completions in the window are at least CalibrateBackoff apart per
	// worker: a bound that holds however slow the machine is.
	assert.LessOrEqual(t, res.Rejected, int64(conns*(window/CalibrateBackoff+1)))
}

func TestCalibrateFailures(t *testing.T) {
	var n atomic.Int64
	u := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) % 3 {
		case 0:
			ok(w, r)
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable) // no header: a failure
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	res, err := Calibrate(context.Background(), CalibrateConfig{
		URL: u, Conns: 3, Warmup: 20 * time.Millisecond, Duration: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	assert.Positive(t, res.OK)
	assert.Positive(t, res.Failed)
	assert.Zero(t, res.Rejected)
}

func TestCalibrateDeadline(t *testing.T) {
	u := testServer(t, sleepy(time.Second))
	res, err := Calibrate(context.Background(), CalibrateConfig{
		URL: u, Conns: 2, Warmup: 10 * time.Millisecond, Duration: 300 * time.Millisecond, Deadline: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	assert.Zero(t, res.OK)
	assert.Positive(t, res.Failed, "requests past the deadline fail")
}

func TestCalibrateContextCancel(t *testing.T) {
	u := testServer(t, sleepy(20*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := Calibrate(ctx, CalibrateConfig{URL: u, Conns: 4, Warmup: 50 * time.Millisecond, Duration: 10 * time.Second})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Positive(t, res.Duration)
	assert.Less(t, res.Duration, time.Second)
	assert.Positive(t, res.OK)
	assert.InDelta(t, float64(res.OK)/res.Duration.Seconds(), res.Goodput, 1e-6)
	assert.Zero(t, res.Failed, "requests cut by the context do not count")

	// Ended during the warmup: an empty window.
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res, err = Calibrate(ctx, CalibrateConfig{URL: u, Conns: 2, Warmup: 5 * time.Second})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Zero(t, res.Duration)
	assert.Zero(t, res.Goodput)
	assert.Zero(t, res.OK)
}
