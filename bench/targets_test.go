//go:build linux

package bench

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/bench/load"
	"github.com/sluice-go/sluice/examples/weather"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/internal/selfsigned"
)

func TestTargetsServeTheWeather(t *testing.T) {
	for _, tg := range Targets() {
		t.Run(tg.Name, func(t *testing.T) {
			rn, err := tg.Serve(weather.Handler(weather.Config{CPU: 100 * time.Microsecond, DB: time.Millisecond}))
			require.NoError(t, err)
			defer func() { assert.NoError(t, rn.Stop()) }()
			base := rn.URL
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr}).Get(base + "/forecast?city=Oslo")
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, 200, resp.StatusCode)
			var f weather.Forecast
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&f))
			assert.Equal(t, "Oslo", f.City)
			// And the generator can drive it.
			res, err := load.Run(context.Background(), load.Config{URL: base + "/forecast?city=Oslo", Rate: 100, Duration: 200 * time.Millisecond})
			require.NoError(t, err)
			assertLightLoadServed(t, tg.Name, res, "")
		})
	}
}

// assertLightLoadServed checks a run far below the target's capacity:
// every request is served. The gosched target is let refuse: its gate
// counts every runnable goroutine of the process, the test binary's others
// included, so on a loaded machine it refuses some of a light load (see
// GoSchedFraction); every request must still be answered.
func assertLightLoadServed(t *testing.T, target string, res *load.Result, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if target == "gosched" {
		assert.Equal(t, res.Offered, res.OK+res.Rejected, "%s: every request is answered", msg)
		assert.Positive(t, res.OK, msg)
		return
	}
	assert.Equal(t, res.Offered, res.OK, "%s: far below capacity, everything is served", msg)
}

func TestSemaphoreRejectsAfterItsWait(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	var once sync.Once
	h := semaphore(1, 20*time.Millisecond, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	base, stop, err := ServeNetHTTP(h)
	require.NoError(t, err)
	defer func() { once.Do(func() { close(release) }); assert.NoError(t, stop()) }()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	first := make(chan struct{})
	go func() {
		defer close(first)
		if resp, err := client.Get(base); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	<-entered // the first request holds the only slot
	resp, err := client.Get(base)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "a second request waits 20 ms, then gets 503")
	once.Do(func() { close(release) })
	<-first
}

// Over TLS, every target serves HTTPS, and the generator drives it on
// kept-alive connections and on a new connection (a full handshake) per
// request; the calibration too.
func TestTargetsServeOverTLS(t *testing.T) {
	cert, _, err := selfsigned.New()
	require.NoError(t, err)
	o := serveOptions{tls: &tls.Config{Certificates: []tls.Certificate{cert}}}
	for _, name := range []string{"sluice", "nethttp", "gosched"} {
		t.Run(name, func(t *testing.T) {
			tg, ok := targetByName(name, o)
			require.True(t, ok)
			rn, err := tg.Serve(weather.Handler(weather.Config{CPU: 100 * time.Microsecond}))
			require.NoError(t, err)
			defer func() { assert.NoError(t, rn.Stop()) }()
			require.True(t, strings.HasPrefix(rn.URL, "https://"), rn.URL)
			url := rn.URL + "/forecast?city=Oslo"
			for _, fresh := range []bool{false, true} {
				cfg := load.Config{URL: url, Rate: 100, Duration: 200 * time.Millisecond}
				if fresh {
					cfg.NewConn = func(int) bool { return true }
				}
				res, err := load.Run(context.Background(), cfg)
				require.NoError(t, err)
				assertLightLoadServed(t, name, res, "fresh %v", fresh)
				if fresh {
					assert.EqualValues(t, res.Offered, res.Dials, "a connection per request")
				}
			}
			cal, err := load.Calibrate(context.Background(), load.CalibrateConfig{URL: url, Conns: 2, Warmup: 50 * time.Millisecond, Duration: 200 * time.Millisecond, NewConns: true})
			require.NoError(t, err)
			assert.Positive(t, cal.OK)
			assert.Zero(t, cal.Failed)
		})
	}
}

// The two targets serve, and the CPU gate's refresher stops with its
// target (goleak checks it at the end of the package's tests).
func TestShedTargets(t *testing.T) {
	for _, name := range []string{TargetSluiceBusy, TargetSluiceCPU} {
		tg, ok := TargetByName(name)
		require.True(t, ok, name)
		rn, err := tg.Serve(weather.Handler(weather.Config{CPU: 10 * time.Microsecond}))
		require.NoError(t, err, name)
		tr := &http.Transport{}
		resp, err := (&http.Client{Transport: tr}).Get(rn.URL + WeatherPath)
		require.NoError(t, err, name)
		_ = resp.Body.Close()
		tr.CloseIdleConnections()
		assert.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, resp.StatusCode, name)
		require.NoError(t, rn.Stop(), name)
	}
	for _, tg := range Targets() {
		assert.NotContains(t, []string{TargetSluiceBusy, TargetSluiceCPU}, tg.Name, "not in the other scenarios' default set")
	}
	cfg, cpu := SluiceCPUConfig()
	defer cpu.Close()
	assert.Equal(t, []admit.Policy{cpu}, cfg.Admission.Policies)
	assert.Negative(t, cfg.Admission.MaxAge, "no age limit")
	assert.Nil(t, cfg.Admission.Queue)
	busy := SluiceBusyConfig()
	require.Len(t, busy.Admission.Gates, 1)
	assert.IsType(t, &gate.Busy{}, busy.Admission.Gates[0])
	assert.Negative(t, busy.Admission.MaxAge)
}
