package dashboard

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/internal/gatetest"
	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/internal/syncbuf"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/tenant"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testServer starts a sluice server on two workers, behind cfg, serving
// "/ok" (a short answer) and "/fail" (a 502), and stops it at the end of
// the test. Off Linux it skips the test: the front door serves on net/http
// there, with no runtime or sluice server for the dashboard to show.
func testServer(t *testing.T, cfg sluice.Config, h http.Handler) *sluice.Server {
	t.Helper()
	schedtest.SkipWithoutExecutor(t)
	if h == nil {
		mux := http.NewServeMux()
		mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
		mux.HandleFunc("/fail", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusBadGateway) })
		h = mux
	}
	quiet := slog.New(slog.DiscardHandler) // a loaded test machine makes the executor warn
	cfg.Logger = quiet
	cfg.Runtime = srt.Config{Workers: 2, Logger: quiet}
	srv, err := sluice.Listen("127.0.0.1:0", h, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, srv.Stop(ctx))
	})
	return srv
}

// get sends n requests for path as tenant, one after the other.
func get(t *testing.T, c *http.Client, url, tenantName string, n int) {
	t.Helper()
	for range n {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		if tenantName != "" {
			req.Header.Set("X-Tenant", tenantName)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// fetch asks d for its data after seq.
func fetch(t *testing.T, d http.Handler, after uint64) Data {
	t.Helper()
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, newRequest(http.MethodGet, "/debug/sluice/data?after="+strconv.FormatUint(after, 10), nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var out Data
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	return out
}

// The data endpoint: a sample per interval while the page polls, with the
// traffic's rates, the workers, the lanes, the wait percentiles, the age
// limit, the rejections by reason and the tenants.
func TestDataEndpoint(t *testing.T) {
	tracker, err := tenant.New(tenant.Config{})
	require.NoError(t, err)
	srv := testServer(t, sluice.Config{Admission: admit.Config{Policies: []admit.Policy{tracker}}}, nil)
	d, err := New(Config{Server: srv, Tenants: tracker, Title: "test", Interval: 200 * time.Millisecond})
	require.NoError(t, err)
	defer d.Close()
	store := tenant.NewMemoryStore(nil)
	agent, err := tenant.NewAgent(tenant.AgentConfig{Store: store, Tracker: tracker})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, store.SetTable(ctx, tenant.Table{Version: 7, Drops: map[string]float64{"globex": 0.5}}))
	// The first period applies the table, the second follows globex by
	// name, and its drops apply from then on.
	require.NoError(t, agent.Tick(ctx))
	require.NoError(t, agent.Tick(ctx))

	first := fetch(t, d, 0)
	assert.Equal(t, "test", first.Title)
	assert.Equal(t, 200.0, first.Interval)
	assert.Len(t, first.Instance, 16)
	assert.False(t, first.Controls)
	require.NotNil(t, first.Tenants)
	assert.True(t, first.Tenants.Enforcing)

	c := &http.Client{}
	defer c.CloseIdleConnections()
	base := "http://" + srv.Addr().String()
	// Two periods: acme is pooled under ~other in the first, and
	// followed by name in the second.
	// The page polls meanwhile: a sample each interval.
	for range 2 {
		get(t, c, base+"/ok", "acme", 20)
		fetch(t, d, 0)
		get(t, c, base+"/fail", "acme", 2)
		fetch(t, d, 0)
		get(t, c, base+"/ok", "globex", 8) // 0.375 of them dropped: 429 (below)
		fetch(t, d, 0)
		require.NoError(t, agent.Tick(ctx))
	}
	time.Sleep(200 * time.Millisecond)
	data := fetch(t, d, 0)
	require.NotEmpty(t, data.Samples, "a sample once an interval has passed")
	var admitted, rejected, dropped float64
	for i, s := range data.Samples {
		assert.Equal(t, uint64(i+1), s.Seq)
		admitted += s.Admitted * s.Seconds
		rejected += s.Rejected * s.Seconds
		dropped += s.RejectedBy[tenant.Reason] * s.Seconds
	}
	// The table drops half of globex's requests; the server has no gates
	// so the tracker keeps 1.25 times the half it leaves: 6 of 16 dropped.
	assert.InDelta(t, 54, admitted, 0.5, "every admission is in a sample")
	assert.InDelta(t, 6, rejected, 0.5)
	assert.InDelta(t, 6, dropped, 0.5, "globex's drops")
	s := data.Samples[len(data.Samples)-1]
	assert.Equal(t, 2, s.Workers)
	assert.Equal(t, 100.0, s.MaxAge, "the default age limit, in ms")
	assert.False(t, s.Standing)
	var waits, latencies uint64
	for _, s := range data.Samples {
		waits += s.Wait.N
		latencies += s.Latency.N
		assert.GreaterOrEqual(t, s.Latency.P99, s.Latency.P50)
		assert.GreaterOrEqual(t, s.BusyMean, 0.0)
	}
	assert.Equal(t, uint64(54), waits)
	assert.Equal(t, uint64(54), latencies)
	assert.GreaterOrEqual(t, s.Conns, 1)
	names := []string{}
	for _, l := range s.Lanes {
		names = append(names, l.Name)
	}
	assert.Equal(t, []string{"continuation", "upstream"}, names)
	assert.Equal(t, []LaneState{{"continuation", 800, 0}, {"upstream", 100, 1}}, data.Lanes)

	require.NotNil(t, data.Tenants)
	assert.Equal(t, uint64(7), data.Tenants.Version)
	rows := map[string]TenantRow{}
	for _, r := range data.Tenants.Rows {
		rows[r.Tenant] = r
	}
	require.Contains(t, rows, "acme", "rows: %+v", data.Tenants.Rows)
	// acme's first requests may count under ~other, until the tracker
	// follows it by name.
	assert.InDelta(t, 44.0/60, rows["acme"].Share+rows[tenant.Other].Share, 1e-9)
	assert.GreaterOrEqual(t, rows["acme"].Share, 22.0/60)
	assert.InDelta(t, 44.0/54, rows["acme"].AdmittedShare+rows[tenant.Other].AdmittedShare, 1e-9)
	assert.InDelta(t, 16.0/60, rows["globex"].Share, 1e-9)
	assert.Equal(t, 0.5, rows["globex"].Drop)
	assert.InDelta(t, 0.375, rows["globex"].Dropped, 1e-9)

	// Polling again at once takes no new sample; after an interval, one;
	// ?after= gives only the new ones.
	again := fetch(t, d, s.Seq)
	assert.Empty(t, again.Samples)
	time.Sleep(200 * time.Millisecond)
	next := fetch(t, d, s.Seq)
	require.Len(t, next.Samples, 1)
	assert.Equal(t, s.Seq+1, next.Samples[0].Seq)
	assert.Zero(t, next.Samples[0].Admitted, "no traffic since")
}

// The history is bounded, and a reading after a long pause only becomes
// the base of the next sample.
func TestHistoryBoundAndPause(t *testing.T) {
	p, err := admit.New(admit.Config{}, admit.Host{})
	require.NoError(t, err)
	defer p.Close()
	d, err := New(Config{Pipeline: p, Interval: 20 * time.Millisecond, History: 3})
	require.NoError(t, err)
	defer d.Close()
	for range 6 {
		time.Sleep(25 * time.Millisecond)
		fetch(t, d, 0)
	}
	data := fetch(t, d, 0)
	require.Len(t, data.Samples, 3)
	assert.Zero(t, data.Samples[0].Workers, "no executor")
	assert.Equal(t, -1, data.Samples[0].Conns, "no connections known")
	last := data.Samples[2].Seq
	time.Sleep(150 * time.Millisecond) // more than 5 intervals
	assert.Empty(t, fetch(t, d, last).Samples)
	time.Sleep(25 * time.Millisecond)
	assert.Len(t, fetch(t, d, last).Samples, 1)
}

// The page and its assets: types, the content security policy that keeps
// it from loading anything from elsewhere, the title escaped, 404s.
func TestPageAndAssets(t *testing.T) {
	p, err := admit.New(admit.Config{}, admit.Host{})
	require.NoError(t, err)
	defer p.Close()
	d, err := New(Config{Pipeline: p, Title: `<script>alert(1)</script>`})
	require.NoError(t, err)
	defer d.Close()
	for _, c := range []struct{ path, ctype, contains string }{
		{"/debug/sluice/", "text/html; charset=utf-8", "&lt;script&gt;alert(1)&lt;/script&gt;"},
		{"/debug/sluice/app.js", "text/javascript; charset=utf-8", "fetch('data?after="},
		{"/debug/sluice/style.css", "text/css; charset=utf-8", ".chart"},
		{"/debug/sluice/favicon.svg", "image/svg+xml", "<svg"},
	} {
		rec := httptest.NewRecorder()
		d.ServeHTTP(rec, newRequest(http.MethodGet, c.path, nil))
		require.Equal(t, http.StatusOK, rec.Code, c.path)
		assert.Equal(t, c.ctype, rec.Header().Get("Content-Type"), c.path)
		assert.Contains(t, rec.Body.String(), c.contains, c.path)
		assert.Contains(t, rec.Header().Get("Content-Security-Policy"), "default-src 'self'")
		assert.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"))
	}
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, newRequest(http.MethodGet, "/debug/sluice/", nil))
	assert.NotContains(t, rec.Body.String(), "<script>alert")
	// Nothing names another host: no absolute or scheme-relative address,
	// no CSS url().
	for _, name := range []string{"index.html", "app.js", "style.css"} {
		b, err := assets.ReadFile("assets/" + name)
		require.NoError(t, err)
		for _, u := range []string{"http:", "https:", `"//`, `'//`, "url(", "@import"} {
			assert.NotContains(t, string(b), u, name)
		}
	}
	for _, path := range []string{"/debug/sluice/nope", "/debug/sluice/assets/index.html"} {
		rec := httptest.NewRecorder()
		d.ServeHTTP(rec, newRequest(http.MethodGet, path, nil))
		assert.Equal(t, http.StatusNotFound, rec.Code, path)
	}
	rec = httptest.NewRecorder()
	d.ServeHTTP(rec, newRequest(http.MethodPost, "/debug/sluice/", nil))
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}

// post sends a change to the control endpoint, as the page does.
func post(d http.Handler, body string, mod func(*http.Request)) *httptest.ResponseRecorder {
	req := newRequest(http.MethodPost, "/debug/sluice/control", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if mod != nil {
		mod(req)
	}
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, req)
	return rec
}

// Controls are off by default; on, each change is applied and logged,
// and what is out of range, not JSON, or from another origin is refused.
func TestControls(t *testing.T) {
	tracker, err := tenant.New(tenant.Config{})
	require.NoError(t, err)
	conc := gatetest.Concurrency(t, 64)
	busy := gatetest.Busy(t, gate.BusyConfig{})
	srv := testServer(t, sluice.Config{Admission: admit.Config{
		Policies: []admit.Policy{tracker},
		Gates:    []admit.Policy{busy, conc},
	}}, nil)
	knobs := []Knob{ConcurrencyKnob(conc), BusyKnob(busy, 2), MaxAgeKnob(srv.Server().Pipeline())}

	off, err := New(Config{Server: srv, Tenants: tracker, Knobs: knobs})
	require.NoError(t, err)
	defer off.Close()
	rec := post(off, `{"knob":"concurrency limit","value":8}`, nil)
	assert.Equal(t, http.StatusForbidden, rec.Code)
	assert.Contains(t, rec.Body.String(), "Config.Controls")
	assert.Equal(t, 64, conc.Limit())
	data := fetch(t, off, 0)
	assert.False(t, data.Controls)
	require.Len(t, data.Knobs, 3, "shown read-only")
	assert.Equal(t, KnobState{Name: "concurrency limit", Unit: "requests", Value: 64, Max: math.MaxInt32, Step: 1}, data.Knobs[0])
	assert.Equal(t, 1.0, data.Knobs[1].Value, "2 workers at the default half")
	assert.Equal(t, 100.0, data.Knobs[2].Value)

	var logs syncbuf.Buffer
	on, err := New(Config{Server: srv, Tenants: tracker, Knobs: knobs, Controls: true,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	defer on.Close()
	assert.True(t, fetch(t, on, 0).Controls)

	rec = post(on, `{"knob":"concurrency limit","value":8}`, nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.JSONEq(t, `{"what":"knob concurrency limit","from":64,"to":8}`, rec.Body.String())
	assert.Equal(t, 8, conc.Limit())
	require.Equal(t, http.StatusOK, post(on, `{"knob":"busy gate limit","value":2}`, nil).Code)
	assert.Equal(t, 2, busy.Limit())
	require.Equal(t, http.StatusOK, post(on, `{"knob":"age limit","value":250}`, nil).Code)
	assert.Equal(t, 250*time.Millisecond, srv.Stats().MaxAge)
	require.Equal(t, http.StatusOK, post(on, `{"lane":"upstream","shares":300}`, nil).Code)
	id, ok := srv.Runtime().Lanes().Lookup("upstream")
	require.True(t, ok)
	spec, err := srv.Runtime().Lanes().Spec(id)
	require.NoError(t, err)
	assert.Equal(t, uint32(300), spec.Shares)
	require.Equal(t, http.StatusOK, post(on, `{"enforce":false}`, nil).Code)
	assert.False(t, tracker.Enforcing())

	log := logs.String()
	for _, want := range []string{
		`what="knob concurrency limit" from=64 to=8`,
		`what="knob busy gate limit" from=1 to=2`,
		`what="knob age limit" from=100 to=250`,
		`what="lane upstream shares" from=100 to=300`,
		`what="tenant enforcement" from=true to=false`,
	} {
		assert.Contains(t, log, want)
	}
	assert.Equal(t, 5, strings.Count(log, "changed from the page"))

	for _, c := range []struct {
		body string
		mod  func(*http.Request)
		code int
	}{
		{`{"knob":"concurrency limit","value":-1}`, nil, http.StatusBadRequest},
		{`{"knob":"concurrency limit","value":1e19}`, nil, http.StatusBadRequest},
		{`{"knob":"busy gate limit","value":3}`, nil, http.StatusBadRequest},
		{`{"knob":"nope","value":1}`, nil, http.StatusBadRequest},
		{`{"knob":"concurrency limit"}`, nil, http.StatusBadRequest},
		{`{"lane":"upstream","shares":0}`, nil, http.StatusBadRequest},
		{`{"lane":"nope","shares":5}`, nil, http.StatusBadRequest},
		{`{"enforce":true,"lane":"upstream","shares":5}`, nil, http.StatusBadRequest},
		{`{"surprise":1}`, nil, http.StatusBadRequest},
		{`not json`, nil, http.StatusBadRequest},
		{`{"enforce":true}`, func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, http.StatusUnsupportedMediaType},
		{`{"enforce":true}`, func(r *http.Request) { r.Method = http.MethodGet }, http.StatusMethodNotAllowed},
		{`{"enforce":true}`, func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, http.StatusForbidden},
		{`{"enforce":true}`, func(r *http.Request) {
			r.Header.Del("Sec-Fetch-Site")
			r.Header.Set("Origin", "http://evil.example")
		}, http.StatusForbidden},
	} {
		rec := post(on, c.body, c.mod)
		assert.Equal(t, c.code, rec.Code, "%s: %s", c.body, rec.Body)
	}
	assert.False(t, tracker.Enforcing(), "no refused change applied")
	assert.Equal(t, 8, conc.Limit())
	assert.Equal(t, 5, strings.Count(logs.String(), "changed from the page"))
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	p, err := admit.New(admit.Config{}, admit.Host{})
	require.NoError(t, err)
	defer p.Close()
	_, err = New(Config{})
	assert.ErrorContains(t, err, "neither a Server nor a Pipeline")
	get := func() float64 { return 0 }
	set := func(float64) error { return nil }
	_, err = New(Config{Pipeline: p, Knobs: []Knob{{Name: "a", Get: get, Set: set}, {Name: "a", Get: get, Set: set}, {Name: "b"}}})
	assert.ErrorContains(t, err, `two knobs are named "a"`)
	assert.ErrorContains(t, err, `Knobs[2] ("b") needs a Name, a Get and a Set`)
	_, err = New(Config{Pipeline: p, Interval: -1})
	assert.ErrorContains(t, err, "Interval")
}

// newRequest is httptest.NewRequest for the dashboard on an admin address
// reached by its IP (httptest's own Host, example.com, is a name the
// dashboard does not answer to).
func newRequest(method, target string, body io.Reader) *http.Request {
	req := httptest.NewRequest(method, target, body)
	req.Host = "127.0.0.1:8090"
	return req
}

// DNS rebinding: a page of another site whose name the attacker points at
// the dashboard's address sends Host and Origin of that name, so the
// cross-origin check alone passed it. The dashboard answers only its own
// names: IP addresses, localhost and Config.Hosts.
func TestOnlyItsOwnHostNames(t *testing.T) {
	tracker, err := tenant.New(tenant.Config{})
	require.NoError(t, err)
	srv := testServer(t, sluice.Config{Admission: admit.Config{Policies: []admit.Policy{tracker}}}, nil)
	d, err := New(Config{Server: srv, Tenants: tracker, Controls: true, Hosts: []string{"admin.internal"}})
	require.NoError(t, err)
	defer d.Close()

	rebind := func(r *http.Request) {
		r.Host = "rebind.evil"
		r.Header.Set("Origin", "http://rebind.evil")
		r.Header.Del("Sec-Fetch-Site")
	}
	rec := post(d, `{"enforce":false}`, rebind)
	assert.Equal(t, http.StatusMisdirectedRequest, rec.Code)
	assert.Contains(t, rec.Body.String(), "Config.Hosts")
	assert.True(t, tracker.Enforcing(), "enforcement stays on")
	for _, path := range []string{"/debug/sluice/data", "/debug/sluice/"} {
		req := newRequest(http.MethodGet, path, nil)
		req.Host = "rebind.evil:8090"
		rec := httptest.NewRecorder()
		d.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusMisdirectedRequest, rec.Code, path)
	}

	for _, host := range []string{"127.0.0.1:8090", "[::1]:8090", "localhost:8090", "LOCALHOST", "admin.internal:8090", "Admin.Internal."} {
		req := newRequest(http.MethodGet, "/debug/sluice/data", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		d.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusOK, rec.Code, host)
	}
}
