//go:build linux

package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
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
	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/queue"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/sched"
)

// laneRecorder is a policy that admits everything and records the lane of
// each request by its path.
type laneRecorder struct {
	mu    sync.Mutex
	lanes map[string]string
}

func (p *laneRecorder) Admit(a *admit.Attempt) *admit.Refusal {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lanes == nil {
		p.lanes = map[string]string{}
	}
	p.lanes[a.Path] = a.Lane
	return nil
}

func (p *laneRecorder) Done(*admit.Attempt, admit.Outcome) {}

func (p *laneRecorder) lane(path string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lanes[path]
}

// laneRuntime is a started runtime of workers with the lanes given.
func laneRuntime(t *testing.T, workers int, specs ...lanes.Spec) *srt.Runtime {
	t.Helper()
	return schedtest.RuntimeWith(t, srt.Config{Workers: workers, Lanes: specs})
}

// ranIn returns how many tasks each lane has run, by name.
func ranIn(rt *srt.Runtime) map[string]int64 {
	m := map[string]int64{}
	for _, l := range rt.Snapshot().Lanes {
		m[l.Name] = l.Run
	}
	return m
}

func getLane(t *testing.T, c *http.Client, url string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestLanesClassifyByPatternHeaderClassAndFunc(t *testing.T) {
	rt := laneRuntime(t, 2,
		lanes.Spec{Name: "background", Priority: 2, Shares: 10},
		lanes.Spec{Name: "critical", Priority: 0, Shares: 400},
		lanes.Spec{Name: "reports", Priority: 1, Shares: 50},
		lanes.Spec{Name: "custom", Priority: 1})
	rec := &laneRecorder{}
	cfg := Config{
		Lanes: Lanes{
			Func: func(r *Request) string {
				if strings.HasSuffix(r.URL.Path, ".custom") {
					return "custom"
				}
				return ""
			},
			Routes: map[string]string{
				"GET /export/":           "background",
				"GET /export/small/{id}": "upstream", // more specific: the default lanes
				"/report/{id}":           "reports",
				"POST /checkout":         "critical",
				"api.example.test/hc":    "critical",
			},
			Header:       "X-Work",
			HeaderValues: map[string]string{"batch": "background"},
			Classes:      map[queue.Class]string{queue.Critical: "critical"},
		},
		Admission: admit.Config{
			Policies: []admit.Policy{rec},
			Gates:    []admit.Policy{gatetest.Concurrency(t, 1000)},
			Queue:    &admit.QueueConfig{Classify: admit.ClassFromHeader("X-Class")},
		},
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	_, addr := serveNativeOn(t, rt, HTTPHandler(h), cfg)
	c := &http.Client{}
	t.Cleanup(c.CloseIdleConnections)
	base := "http://" + addr

	cases := []struct {
		method, path string
		header       []string
		lane         string
	}{
		{"GET", "/export/all", nil, "background"},
		{"GET", "/export/small/7", nil, ""},                         // named "upstream": default lanes
		{"GET", "/export/small/8", []string{"X-Work", "batch"}, ""}, // the route decides before the header
		{"HEAD", "/export/all", nil, "background"},
		{"GET", "/report/3", nil, "reports"},
		{"POST", "/checkout", nil, "critical"},
		{"GET", "/checkout", nil, ""}, // the pattern says POST
		{"GET", "/x.custom", nil, "custom"},
		{"GET", "/export/y.custom", nil, "custom"}, // Func first
		{"GET", "/plain", []string{"X-Work", "batch"}, "background"},
		{"GET", "/plain2", []string{"X-Work", "other"}, ""},
		{"GET", "/urgent", []string{"X-Class", "critical"}, "critical"},
		{"GET", "/nothing", nil, ""},
	}
	for _, tc := range cases {
		before := ranIn(rt)
		req, err := http.NewRequest(tc.method, base+tc.path, nil)
		require.NoError(t, err)
		for i := 0; i+1 < len(tc.header); i += 2 {
			req.Header.Set(tc.header[i], tc.header[i+1])
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, tc.path)
		assert.Equal(t, tc.lane, rec.lane(tc.path), "%s %s", tc.method, tc.path)
		// The handler ran as a task of its lane: that lane ran one more
		// task (its start); a request of the default lanes ran in the
		// Upstream task that read it.
		// (The counter moves once the task has ended, which may be just
		// after the response reached us.)
		if tc.lane != "" {
			assert.Eventually(t, func() bool { return ranIn(rt)[tc.lane] > before[tc.lane] }, 5*time.Second, time.Millisecond,
				"%s %s ran in %s", tc.method, tc.path, tc.lane)
		}
		after := ranIn(rt)
		for _, other := range []string{"background", "critical", "reports", "custom"} {
			if other != tc.lane {
				assert.Equal(t, before[other], after[other], "%s %s must not run in %s", tc.method, tc.path, other)
			}
		}
	}

	// By host: the pattern with a host matches that host only.
	req, err := http.NewRequest("GET", base+"/hc", nil)
	require.NoError(t, err)
	req.Host = "api.example.test"
	resp, err := c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "critical", rec.lane("/hc"))
}

func TestLanesConfigErrors(t *testing.T) {
	rt := laneRuntime(t, 1, lanes.Spec{Name: "background", Priority: 2})
	h := HTTPHandler(http.NotFoundHandler())
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"unknown lane":   {Config{Lanes: Lanes{Routes: map[string]string{"/x": "nope"}}}, `lane "nope", which the runtime lacks`},
		"continuation":   {Config{Lanes: Lanes{Routes: map[string]string{"/x": "continuation"}}}, "cannot start in the Continuation lane"},
		"bad pattern":    {Config{Lanes: Lanes{Routes: map[string]string{"GET  x": "background"}}}, `Lanes.Routes["GET  x"]`},
		"conflict":       {Config{Lanes: Lanes{Routes: map[string]string{"/a/{x}/b": "background", "/a/b/{y}": "background"}}}, "conflicts"},
		"header alone":   {Config{Lanes: Lanes{Header: "X-Work"}}, "Lanes.Header and Lanes.HeaderValues go together"},
		"class no queue": {Config{Lanes: Lanes{Classes: map[queue.Class]string{queue.Sheddable: "background"}}}, "set Config.Admission.Queue.Classify"},
	} {
		t.Run(name, func(t *testing.T) {
			srv, err := Listen(rt, "127.0.0.1:0", h, tc.cfg)
			if srv != nil {
				_ = srv.Close(context.Background())
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestLaneGateLimitsOnlyItsLane(t *testing.T) {
	rt := laneRuntime(t, 2, lanes.Spec{Name: "background", Priority: 2, Shares: 10})
	bgGate := &switchGate{} // closed
	cfg := Config{
		Lanes:     Lanes{Routes: map[string]string{"/export/": "background"}},
		Admission: admit.Config{Gates: []admit.Policy{gate.ForLanes(bgGate, "background")}},
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	srv, addr := serveNativeOn(t, rt, HTTPHandler(h), cfg)
	c := &http.Client{}
	t.Cleanup(c.CloseIdleConnections)

	code, _ := getLane(t, c, "http://"+addr+"/export/a")
	assert.Equal(t, http.StatusServiceUnavailable, code, "the lane's gate is closed")
	code, body := getLane(t, c, "http://"+addr+"/interactive")
	assert.Equal(t, http.StatusOK, code, "other lanes do not see the gate")
	assert.Equal(t, "ok", body)
	assert.Equal(t, int32(0), bgGate.acquired.Load())

	bgGate.open.Store(true)
	code, _ = getLane(t, c, "http://"+addr+"/export/a")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, int32(1), bgGate.acquired.Load())
	require.Eventually(t, func() bool { return bgGate.release.Load() == 1 }, 5*time.Second, time.Millisecond,
		"Done reaches the lane's gate for its own requests only")
	getLane(t, c, "http://"+addr+"/interactive")
	assert.Equal(t, int32(1), bgGate.release.Load())
	st := srv.Stats()
	assert.Equal(t, int64(1), st.Rejected)
}

// On one worker, a background handler that computes in slices with Yield
// lets interactive requests through while it runs: without its lane (or
// without Yield) the interactive request would wait for it to end, and the
// handler, which waits for that request, would give up.
func TestYieldingBackgroundHandlerLetsInteractiveRequestsThrough(t *testing.T) {
	rt := laneRuntime(t, 1, lanes.Spec{Name: "background", Priority: 2, Shares: 10})
	var served atomic.Bool
	var slices atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/interactive" {
			served.Store(true)
			_, _ = io.WriteString(w, "ok")
			return
		}
		// A batch job: spin in 100 µs slices until the interactive
		// request was served, for 10 s at most.
		deadline := time.Now().Add(10 * time.Second)
		for !served.Load() && time.Now().Before(deadline) {
			for end := time.Now().Add(100 * time.Microsecond); time.Now().Before(end); {
			}
			slices.Add(1)
			if err := sched.Yield(r.Context()); err != nil {
				break
			}
		}
		fmt.Fprintf(w, "served=%v", served.Load())
	})
	_, addr := serveNativeOn(t, rt, HTTPHandler(h), Config{Lanes: Lanes{Routes: map[string]string{"/batch": "background"}}})
	bc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(bc.CloseIdleConnections)
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/batch", nil)
	require.NoError(t, err)
	batch := doAsync(bc, req)
	require.Eventually(t, func() bool { return slices.Load() > 10 }, 10*time.Second, time.Millisecond)
	c := &http.Client{}
	t.Cleanup(c.CloseIdleConnections)
	code, body := getLane(t, c, "http://"+addr+"/interactive")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok", body)
	assert.Equal(t, "served=true", <-batch, "the batch handler saw the interactive request served while it ran")
}

// Shares and priorities change while requests run in the lanes (run with
// -race).
func TestLaneChangesWhileServing(t *testing.T) {
	rt := laneRuntime(t, 2, lanes.Spec{Name: "background", Priority: 2, Shares: 10})
	bg, ok := rt.Lanes().Lookup("background")
	require.True(t, ok)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range 3 {
			_ = sched.Yield(r.Context())
		}
		_, _ = io.WriteString(w, "ok")
	})
	_, addr := serveNativeOn(t, rt, HTTPHandler(h), Config{Lanes: Lanes{Routes: map[string]string{"/batch/": "background"}}})
	stop := make(chan struct{})
	var tuner sync.WaitGroup
	tuner.Add(1)
	go func() {
		defer tuner.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			assert.NoError(t, rt.Lanes().SetShares(bg, uint32(1+i%200)))
			assert.NoError(t, rt.Lanes().SetPriority(bg, int32(i%3)))
			time.Sleep(100 * time.Microsecond)
		}
	}()
	var clients sync.WaitGroup
	for i := range 4 {
		clients.Add(1)
		go func() {
			defer clients.Done()
			c := &http.Client{}
			defer c.CloseIdleConnections()
			for j := range 50 {
				path := "/i"
				if (i+j)%2 == 0 {
					path = "/batch/x"
				}
				resp, err := c.Get("http://" + addr + path)
				if !assert.NoError(t, err) {
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
			}
		}()
	}
	clients.Wait()
	close(stop)
	tuner.Wait()
}

// A request that no route can match skips ServeMux: routing it allocates
// nothing.
func TestLaneRoutesCostNothingForUnroutedPaths(t *testing.T) {
	set := lanes.NewSet()
	_, err := set.Register(lanes.Spec{Name: "background", Priority: 2})
	require.NoError(t, err)
	lr, err := newLaneRouter(Lanes{Routes: map[string]string{"GET /export/": "background", "/report/{id}": "background"}}, set, nil)
	require.NoError(t, err)
	scratch := new(http.Request)
	req := func(path string) *Request {
		return &Request{Method: "GET", URL: &url.URL{Path: path}, Host: "x", Header: http.Header{}}
	}
	miss, hit := req("/interactive"), req("/report/7")
	ref, ok := lr.route(hit, nil, scratch)
	require.True(t, ok)
	assert.Equal(t, "background", ref.name)
	_, ok = lr.route(miss, nil, scratch)
	require.False(t, ok)
	_, ok = lr.route(req("/reportx"), nil, scratch) // a prefix, not a match
	require.False(t, ok)
	assert.Zero(t, testing.AllocsPerRun(100, func() { lr.route(miss, nil, scratch) }))
}
