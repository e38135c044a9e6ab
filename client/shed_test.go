package client

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
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
	"github.com/sluice-go/sluice/shed"
)

// shedBase is an http.RoundTripper made of a function.
type shedBase func(*http.Request) (*http.Response, error)

func (f shedBase) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// shedAnswer returns a response of the given status.
func shedAnswer(req *http.Request, code int) *http.Response {
	return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody, Request: req}
}

// shedLadder returns a Rand that walks the midpoints of n equal steps of
// the 64-bit range: of n decisions at drop probability p it refuses
// exactly round(p × n).
func shedLadder(n uint64) func() uint64 {
	step := math.MaxUint64 / n
	var k atomic.Uint64
	return func() uint64 { return (k.Add(1)-1)%n*step + step/2 }
}

// shedNanos is a shedder clock read from a client Clock.
func shedNanos(c Clock) func() int64 { return func() int64 { return c.Now().UnixNano() } }

// closeRecorder is a request body that records whether it was closed.
type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeRecorder) Close() error { c.closed.Store(true); return nil }

// shedCall sends a GET through tr and returns its status (0 on an error) with
// the error.
func shedCall(t *testing.T, tr http.RoundTripper) (int, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://dependency/x", nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// A call the policies refuse is not sent: an error matching ErrShed, or
// the Fallback's answer (ShedResponse: a synthetic 503 with Retry-After).
func TestShedTransportSheds(t *testing.T) {
	always, err := shed.NewCustom(shed.CustomConfig{Value: func() float64 { return 1 }})
	require.NoError(t, err)
	var sent atomic.Int64
	base := shedBase(func(r *http.Request) (*http.Response, error) { sent.Add(1); return shedAnswer(r, 200), nil })

	tr, err := NewShedTransport(ShedConfig{Policies: []admit.Policy{always}, Base: base})
	require.NoError(t, err)
	body := &closeRecorder{Reader: strings.NewReader("payload")}
	req, err := http.NewRequest(http.MethodPost, "http://dependency/x", body)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	assert.Nil(t, resp)
	require.ErrorIs(t, err, ErrShed)
	var se *ShedError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, ShedError{Reason: "shed-custom", RetryAfter: time.Second}, *se)
	assert.Equal(t, "client: call shed before it was sent (shed-custom)", err.Error())
	assert.True(t, body.closed.Load(), "the body is closed, as a RoundTripper must")

	_, err = (&http.Client{Transport: tr}).Get("http://dependency/y")
	assert.ErrorIs(t, err, ErrShed, "through http.Client's *url.Error")
	assert.Zero(t, sent.Load(), "nothing was sent")
	assert.Equal(t, ShedStats{Shed: 2}, tr.Stats())

	own, err := shed.NewCustom(shed.CustomConfig{Value: func() float64 { return 1 }, Config: shed.Config{RetryAfter: 3 * time.Second}})
	require.NoError(t, err)
	tr, err = NewShedTransport(ShedConfig{Policies: []admit.Policy{own}, Base: base, Fallback: ShedResponse})
	require.NoError(t, err)
	resp, err = (&http.Client{Transport: tr}).Get("http://dependency/z")
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "503 Service Unavailable", resp.Status)
	assert.Equal(t, "3", resp.Header.Get("Retry-After"))
	assert.Equal(t, "1", resp.Header.Get("Sluice-Not-Started"))
	assert.Equal(t, "shed-custom", resp.Header.Get("Sluice-Reject-Reason"))
	assert.Equal(t, "request not started: shed-custom\n", string(b))
	assert.Zero(t, sent.Load())

	none := &admit.Refusal{Reason: "x", RetryAfter: -1, Status: 429}
	resp, err = ShedResponse(nil, none)
	require.NoError(t, err)
	assert.Equal(t, 429, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("Retry-After"), "a refusal without Retry-After")
	assert.Equal(t, time.Duration(0), retryAfterOf(none))
}

// The error rate of the calls sent, as the dependency answers them:
// while it fails, calls are shed in proportion, and nothing more reaches
// it; once its failures have left the window, calls go through again.
func TestShedTransportLearnsTheErrorRate(t *testing.T) {
	clock := newFakeClock(false)
	errs, err := shed.NewErrorRate(shed.ErrorRateConfig{Lower: 0, Upper: 1,
		Window: shed.Window{Length: 10 * time.Second, Buckets: 10, MinSamples: 10},
		Config: shed.Config{Interval: shed.Manual, Clock: shedNanos(clock), Rand: shedLadder(100)}})
	require.NoError(t, err)
	dep := newScripted(t, "dependency", status(http.StatusBadGateway, ""))
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr, err := NewShedTransport(ShedConfig{Policies: []admit.Policy{errs}, Base: base, Clock: clock})
	require.NoError(t, err)
	get := func() (int, error) {
		t.Helper()
		resp, err := (&http.Client{Transport: tr}).Get(dep.srv.URL)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	for range 10 {
		code, err := get()
		require.NoError(t, err)
		require.Equal(t, http.StatusBadGateway, code)
	}
	st := errs.Refresh()
	assert.Equal(t, 1.0, st.ErrorRate)
	assert.Equal(t, 1.0, st.Reject)
	for range 5 {
		_, err := get()
		require.ErrorIs(t, err, ErrShed)
	}
	assert.Equal(t, int64(10), dep.hits.Load(), "the shed calls never reached it")

	clock.Advance(10 * time.Second) // the failures leave the window
	dep.set(ok)
	assert.Zero(t, errs.Refresh().Reject)
	for range 10 {
		code, err := get()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code)
	}
	dep.set(status(http.StatusInternalServerError, ""))
	for range 10 {
		_, err := get()
		require.NoError(t, err)
	}
	assert.InDelta(t, 0.5, errs.Refresh().Reject, 1e-12, "10 failed of 20")
	refused := 0
	for range 100 {
		if _, err := get(); errors.Is(err, ErrShed) {
			refused++
		}
	}
	assert.Equal(t, 50, refused, "half of them, exactly with the scripted draws")
	assert.Equal(t, ShedStats{Sent: 30 + 50, Shed: 5 + 50}, tr.Stats())
}

// The latency of the calls, measured on the transport's clock: a
// dependency that slows down gets fewer calls, in proportion.
func TestShedTransportLearnsTheLatency(t *testing.T) {
	clock := newFakeClock(false)
	var delay atomic.Int64
	base := shedBase(func(r *http.Request) (*http.Response, error) {
		clock.Advance(time.Duration(delay.Load()))
		return shedAnswer(r, 200), nil
	})
	p90, err := shed.NewLatency(shed.LatencyConfig{Lower: 100 * time.Millisecond, Upper: 300 * time.Millisecond, Percentile: 0.9,
		Window: shed.Window{MinSamples: 10},
		Config: shed.Config{Interval: shed.Manual, Clock: shedNanos(clock), Rand: shedLadder(100)}})
	require.NoError(t, err)
	tr, err := NewShedTransport(ShedConfig{Policies: []admit.Policy{p90}, Base: base, Clock: clock})
	require.NoError(t, err)
	delay.Store(int64(10 * time.Millisecond))
	for range 10 {
		_, err := shedCall(t, tr)
		require.NoError(t, err)
	}
	st := p90.Refresh()
	assert.InEpsilon(t, 10*time.Millisecond, st.Latency, 0.0625)
	assert.Zero(t, st.Reject)

	delay.Store(int64(250 * time.Millisecond))
	for range 90 {
		_, err := shedCall(t, tr)
		require.NoError(t, err)
	}
	st = p90.Refresh()
	assert.InEpsilon(t, 250*time.Millisecond, st.Latency, 0.0625)
	want := (float64(st.Latency) - float64(100*time.Millisecond)) / float64(200*time.Millisecond)
	assert.InDelta(t, want, st.Reject, 1e-12)
	refused := 0
	for range 100 {
		if _, err := shedCall(t, tr); errors.Is(err, ErrShed) {
			refused++
		}
	}
	assert.Equal(t, int(math.Round(want*100)), refused)
}

// Calls in flight, counted until Base returns; a call its caller canceled
// teaches nothing; the policies before a refusing one get the call back.
func TestShedTransportInFlightAndCanceled(t *testing.T) {
	conc, err := shed.NewConcurrency(shed.ConcurrencyConfig{Lower: 0, Upper: 1})
	require.NoError(t, err)
	errs, err := shed.NewErrorRate(shed.ErrorRateConfig{Window: shed.Window{MinSamples: 1}, Config: shed.Config{Interval: shed.Manual}})
	require.NoError(t, err)
	entered, release := make(chan struct{}), make(chan struct{})
	base := shedBase(func(r *http.Request) (*http.Response, error) {
		if r.URL.Path == "/hold" {
			entered <- struct{}{}
			<-release
		}
		if r.URL.Path == "/cancel" {
			return nil, r.Context().Err()
		}
		return shedAnswer(r, 200), nil
	})
	tr, err := NewShedTransport(ShedConfig{Policies: []admit.Policy{errs, conc}, Base: base})
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, "http://dependency/hold", nil)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		done <- err
	}()
	<-entered
	assert.Equal(t, 1, conc.Stats().InFlight)
	_, err = shedCall(t, tr)
	require.ErrorIs(t, err, ErrShed, "one in flight, at Upper")
	var se *ShedError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "shed-concurrency", se.Reason)
	close(release)
	require.NoError(t, <-done)
	assert.Zero(t, conc.Stats().InFlight, "counted out when Base returned")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://dependency/cancel", nil)
	require.NoError(t, err)
	_, err = tr.RoundTrip(req)
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, conc.Stats().InFlight)
	st := errs.Refresh()
	assert.Equal(t, 1, st.Samples, "the held call; the canceled one and the shed one are not outcomes")
	assert.Zero(t, st.ErrorRate)
}

// attachRecorder is a policy that records its attachment.
type attachRecorder struct {
	admit.Policy
	attached, detached atomic.Int64
	err                error
	env                admit.Env
}

func (a *attachRecorder) Attach(env admit.Env) (func(), error) {
	if a.err != nil {
		return nil, a.err
	}
	a.attached.Add(1)
	a.env = env
	return func() { a.detached.Add(1) }, nil
}

func TestShedTransportConfig(t *testing.T) {
	conc, err := shed.NewConcurrency(shed.ConcurrencyConfig{})
	require.NoError(t, err)
	_, err = NewShedTransport(ShedConfig{Policies: []admit.Policy{conc, nil}})
	require.Error(t, err)
	assert.Equal(t, "client: NewShedTransport: ShedConfig.Policies[1] is nil: remove it or give a policy (see package gate)", err.Error())

	rec := &attachRecorder{Policy: conc}
	_, err = NewShedTransport(ShedConfig{Policies: []admit.Policy{rec, gatetest.Busy(t, gate.BusyConfig{})}})
	require.Error(t, err, "the busy gate needs the sluice executor")
	assert.Contains(t, err.Error(), "ShedConfig.Policies[1] (*gate.Busy)")
	assert.Equal(t, int64(1), rec.detached.Load(), "what was attached is detached again")

	rec = &attachRecorder{Policy: conc}
	clock := newFakeClock(false)
	tr, err := NewShedTransport(ShedConfig{Policies: []admit.Policy{rec}, Clock: clock})
	require.NoError(t, err)
	assert.Equal(t, int64(1), rec.attached.Load())
	assert.Nil(t, rec.env.Executor)
	assert.Equal(t, clock.Now().UnixNano(), rec.env.Now())
	assert.Zero(t, rec.env.GatesClosed())
	require.NoError(t, tr.Close())
	require.NoError(t, tr.Close())
	assert.Equal(t, int64(1), rec.detached.Load())

	tr, err = NewShedTransport(ShedConfig{}) // sheds nothing, sends with await's transport
	require.NoError(t, err)
	_, ok := tr.base.(interface{ CloseIdleConnections() })
	assert.True(t, ok)
	tr.CloseIdleConnections()
}

// Composed with the client's Transport as its Base: the shedder sees each
// request's final outcome, after the Transport's retries.
func TestShedTransportOverTheClientTransport(t *testing.T) {
	a := newScripted(t, "a", status(http.StatusInternalServerError, ""))
	inner := newTransport(t, Config{Clock: newFakeClock(true)}, a)
	errs, err := shed.NewErrorRate(shed.ErrorRateConfig{Window: shed.Window{MinSamples: 3}, Config: shed.Config{Interval: shed.Manual}})
	require.NoError(t, err)
	tr, err := NewShedTransport(ShedConfig{Policies: []admit.Policy{errs}, Base: inner})
	require.NoError(t, err)
	for range 3 {
		code, err := shedCall(t, tr)
		require.NoError(t, err)
		require.Equal(t, http.StatusInternalServerError, code)
	}
	assert.Equal(t, 1.0, errs.Refresh().Reject)
	_, err = shedCall(t, tr)
	require.ErrorIs(t, err, ErrShed)
	assert.Equal(t, int64(3), a.hits.Load())
}

// Calls from many goroutines at once, on the real clock (for the race
// detector): every call is either sent or shed.
func TestShedTransportConcurrentCalls(t *testing.T) {
	lat, err := shed.NewLatency(shed.LatencyConfig{Lower: time.Microsecond, Upper: time.Millisecond, Percentile: 0.5,
		Window: shed.Window{Length: 100 * time.Millisecond, MinSamples: 1}, Config: shed.Config{Interval: time.Millisecond}})
	require.NoError(t, err)
	conc, err := shed.NewConcurrency(shed.ConcurrencyConfig{Lower: 2, Upper: 6})
	require.NoError(t, err)
	base := shedBase(func(r *http.Request) (*http.Response, error) {
		time.Sleep(50 * time.Microsecond)
		return shedAnswer(r, 200), nil
	})
	tr, err := NewShedTransport(ShedConfig{Policies: []admit.Policy{lat, conc}, Base: base})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				_, err := shedCall(t, tr)
				if err != nil && !errors.Is(err, ErrShed) {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	st := tr.Stats()
	assert.Equal(t, int64(8*200), st.Sent+st.Shed)
	assert.Positive(t, st.Sent)
	assert.Zero(t, conc.Stats().InFlight)
}
