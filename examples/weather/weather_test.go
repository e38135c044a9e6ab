package weather

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/schedtest"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestForecastIsStablePerCity(t *testing.T) {
	h := Handler(Config{})
	get := func(q string) (int, Forecast) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/forecast"+q, nil))
		var f Forecast
		if rec.Code == 200 {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &f))
		}
		return rec.Code, f
	}
	code, a := get("?city=Lisbon")
	require.Equal(t, 200, code)
	_, b := get("?city=Lisbon")
	assert.Equal(t, a, b)
	assert.Equal(t, "Lisbon", a.City)
	assert.Contains(t, summaries, a.Summary)
	assert.True(t, a.Rain >= 0 && a.Rain <= 1)
	code, _ = get("")
	assert.Equal(t, 400, code)
}

// TestDatabaseWaitReleasesTheWorker serves the service on one sluice worker
// with a 50 ms database: with await.Sleep, all requests wait at once (the
// worker is free); with Blocking, they also overlap, because the worker goes
// on on a spare thread while each blocks (a thread per blocked request);
// with Blocking and that rescue off, they wait one after another. It
// needs the executor, so it skips off Linux.
func TestDatabaseWaitReleasesTheWorker(t *testing.T) {
	schedtest.SkipWithoutExecutor(t)
	for _, tc := range []struct {
		blocking bool
		rescue   time.Duration
	}{{false, 0}, {true, 0}, {true, -1}} {
		blocking := tc.blocking
		rt, err := srt.New(srt.Config{Workers: 1, Pinning: srt.PinOff, GOMAXPROCS: -1, BlockedAfter: tc.rescue})
		require.NoError(t, err)
		require.NoError(t, rt.Start())
		var inDB, peak atomic.Int32
		opts := Config{DB: 50 * time.Millisecond, Blocking: blocking}
		inner := Handler(opts)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := inDB.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			inner.ServeHTTP(w, r)
			inDB.Add(-1)
		})
		// No age limit: blocking requests wait their turn (up to 400 ms),
		// and every one must be served.
		srv, err := server.Listen(rt, "127.0.0.1:0", server.HTTPHandler(h), server.Config{Admission: admit.Config{MaxAge: -1}})
		require.NoError(t, err)
		tr := &http.Transport{}
		client := &http.Client{Transport: tr}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := client.Get("http://" + srv.Addr().String() + "/forecast?city=Porto")
				if assert.NoError(t, err) {
					resp.Body.Close()
					assert.Equal(t, 200, resp.StatusCode)
				}
			}()
		}
		wg.Wait()
		tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		assert.NoError(t, srv.Shutdown(ctx))
		assert.NoError(t, rt.Stop(ctx))
		cancel()
		switch {
		case blocking && tc.rescue < 0:
			assert.Equal(t, int32(1), peak.Load(), "a blocking wait holds the only worker")
		case blocking:
			assert.Greater(t, peak.Load(), int32(1), "the worker goes on while a request blocks")
			assert.Positive(t, rt.Snapshot().Handovers)
		default:
			assert.Greater(t, peak.Load(), int32(1), "await.Sleep lets other requests in meanwhile")
		}
	}
}

// Spin computes for about the CPU time it is asked, by the thread's CPU
// clock, however long that takes on the wall clock; twice as long a spin
// is about twice the work.
func TestSpinnerCountsCPUTime(t *testing.T) {
	s := NewSpinner()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu := func(d time.Duration) time.Duration {
		start := cpuNow()
		s.Spin(d)
		return cpuNow() - start
	}
	short, long := cpu(20*time.Millisecond), cpu(40*time.Millisecond)
	assert.InDelta(t, float64(20*time.Millisecond), float64(short), float64(12*time.Millisecond), "a 20 ms spin's CPU time")
	assert.InDelta(t, 2, float64(long)/float64(short), 0.8, "40 ms against 20 ms")
	assert.Zero(t, cpu(0)/time.Millisecond, "nothing to do")
}

// Two requests that share one CPU each do all their work: each takes
// longer on the wall clock, not less CPU. (A spin on the wall clock gave
// each about half its CPU time here.)
func TestSpinnerDoesItsWorkOnASharedCPU(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	s := NewSpinner()
	const d = 60 * time.Millisecond
	spin := func() time.Duration {
		runtime.LockOSThread() // the thread's CPU clock is this goroutine's
		defer runtime.UnlockOSThread()
		start := cpuNow()
		s.Spin(d)
		return cpuNow() - start
	}
	// A spin alone, the reference: on a shared machine the work a CPU
	// second does varies (a busy hyperthread sibling), so the shared
	// spins are compared with it, not with d.
	alone := spin()
	cpus := make([]time.Duration, 2)
	var wg sync.WaitGroup
	for i := range cpus {
		wg.Go(func() { cpus[i] = spin() })
	}
	wg.Wait()
	for i, c := range cpus {
		assert.Greater(t, c, 2*alone/3, "spin %d: %v of CPU time, against %v for a spin alone", i, c, alone)
	}
}

// A Spinner at a given rate does that many rounds a second of CPU time:
// half the measured rate, half the CPU time for the same spin. A rate
// that is not positive is refused.
func TestSpinnerAtARate(t *testing.T) {
	measured := NewSpinner()
	half, err := SpinnerAt(measured.Rate() / 2)
	require.NoError(t, err)
	assert.Equal(t, measured.Rate()/2, half.Rate())
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu := func(s *Spinner) time.Duration {
		start := cpuNow()
		s.Spin(40 * time.Millisecond)
		return cpuNow() - start
	}
	assert.InDelta(t, 0.5, float64(cpu(half))/float64(cpu(measured)), 0.25, "half the rate, half the work")
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		_, err := SpinnerAt(bad)
		assert.Error(t, err, "rate %v", bad)
	}
}
