package httpgate

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/shed"
)

// A shedder's refusal is the pipeline's rejection: 503, Retry-After (the
// pipeline's 1 s, or the shedder's own), not started, its reason; a
// shedder learns from the outcomes the middleware records.
func TestShedRefusalsCarryRetryAfter(t *testing.T) {
	always := func() float64 { return 1 }
	plain, err := shed.NewCustom(shed.CustomConfig{Value: always})
	require.NoError(t, err)
	own, err := shed.NewCustom(shed.CustomConfig{Value: always, Config: shed.Config{Name: "too-hot", RetryAfter: 2500 * time.Millisecond}})
	require.NoError(t, err)
	for _, c := range []struct {
		policy      *shed.Shedder
		retryAfter  string
		reason      string
		rejectionRA time.Duration
	}{
		{plain, "1", "shed-custom", 0},
		{plain, "4", "shed-custom", 4 * time.Second},
		{own, "3", "too-hot", 0},
	} {
		a, err := New(admit.Config{Policies: []admit.Policy{c.policy}, Rejection: admit.Rejection{RetryAfter: c.rejectionRA}})
		require.NoError(t, err)
		rec := httptest.NewRecorder()
		a.Wrap(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		a.Close()
		assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
		assert.Equal(t, c.retryAfter, rec.Header().Get("Retry-After"))
		assert.Equal(t, "1", rec.Header().Get("Sluice-Not-Started"))
		assert.Equal(t, c.reason, rec.Header().Get("Sluice-Reject-Reason"))
		assert.Equal(t, "request not started: "+c.reason+"\n", rec.Body.String())
	}
}

func TestShedLearnsFromTheMiddlewaresOutcomes(t *testing.T) {
	var now int64
	clock := func() int64 { return now }
	lat, err := shed.NewLatency(shed.LatencyConfig{Lower: 10 * time.Millisecond, Upper: 20 * time.Millisecond,
		Window: shed.Window{MinSamples: 2}, Config: shed.Config{Interval: shed.Manual, Clock: clock}})
	require.NoError(t, err)
	errs, err := shed.NewErrorRate(shed.ErrorRateConfig{Lower: 0.25, Upper: 0.75,
		Window: shed.Window{MinSamples: 2}, Config: shed.Config{Interval: shed.Manual, Clock: clock}})
	require.NoError(t, err)
	a, err := New(admit.Config{Policies: []admit.Policy{lat, errs}})
	require.NoError(t, err)
	defer a.Close()
	h := a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		if r.URL.Path == "/panic" {
			panic(http.ErrAbortHandler)
		}
		time.Sleep(30 * time.Millisecond)
	}))
	for _, path := range []string{"/slow", "/fail", "/panic"} {
		func() {
			defer func() { _ = recover() }()
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
		}()
	}
	ls := lat.Refresh()
	assert.Equal(t, 3, ls.Samples)
	assert.GreaterOrEqual(t, ls.Latency, 10*time.Millisecond, "the mean of 30 ms and two quick ones")
	es := errs.Refresh()
	assert.Equal(t, 3, es.Samples)
	assert.InDelta(t, 2.0/3, es.ErrorRate, 1e-12, "a 502 and a panic (500) of three")
	assert.InDelta(t, (2.0/3-0.25)/0.5, es.Reject, 1e-12)
}
