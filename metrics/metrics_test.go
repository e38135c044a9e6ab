package metrics

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/client"
	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/internal/selfsigned"
	"github.com/sluice-go/sluice/ratelimit"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/sched"
	"github.com/sluice-go/sluice/tenant"
)

// ticket is a request as an adapter holds it.
type ticket struct {
	admit.Ticket
	started chan struct{}
}

func newTicket(path string) *ticket {
	t := &ticket{started: make(chan struct{}, 1)}
	t.Method, t.Path = http.MethodGet, path
	t.OnStart = func() { t.started <- struct{}{} }
	t.OnReject = func() {}
	return t
}

// Scripted traffic on a fake clock: every admission metric has the name,
// the type and the value the script makes.
func TestAdmissionMetricsAfterScriptedTraffic(t *testing.T) {
	clk := newClock(time.Second)
	quota := newSwitch("quota", http.StatusTooManyRequests, true)
	gate := newSwitch("busy", 0, true)
	p, err := admit.New(admit.Config{
		Policies: []admit.Policy{quota},
		Gates:    []admit.Policy{gate},
		Queue:    &admit.QueueConfig{},
	}, admit.Host{Clock: clk.now})
	require.NoError(t, err)
	defer p.Close()
	c, err := New(Config{Clock: clk.now, Window: 10 * time.Second}, Admission("api", p))
	require.NoError(t, err)
	defer c.Close()

	// r1 runs; r2 finds the gate closed and waits 20 ms, until r1 ends;
	// r2 runs 10 ms and fails; r3 is over its quota.
	r1 := newTicket("/1")
	require.Equal(t, admit.Admitted, p.Decide(&r1.Ticket))
	gate.open.Store(false)
	r2 := newTicket("/2")
	require.Equal(t, admit.Queued, p.Decide(&r2.Ticket))
	clk.add(20 * time.Millisecond)
	gate.open.Store(true)
	p.Done(&r1.Ticket, admit.Outcome{Status: http.StatusOK})
	<-r2.started
	clk.add(10 * time.Millisecond)
	p.Done(&r2.Ticket, admit.Outcome{Status: http.StatusInternalServerError})
	quota.open.Store(false)
	r3 := newTicket("/3")
	require.Equal(t, admit.Rejected, p.Decide(&r3.Ticket))
	clk.add(70 * time.Millisecond) // 100 ms since the source was added

	mfs := gather(t, c)
	counter, gauge, hist := dto.MetricType_COUNTER, dto.MetricType_GAUGE, dto.MetricType_HISTOGRAM
	srv := "server=api"
	for _, w := range []struct {
		name   string
		typ    dto.MetricType
		labels []string
		want   float64
	}{
		{"sluice_http_requests_total", counter, []string{srv, "class=2xx"}, 1},
		{"sluice_http_requests_total", counter, []string{srv, "class=4xx"}, 1},
		{"sluice_http_requests_total", counter, []string{srv, "class=5xx"}, 1},
		{"sluice_http_requests_in_flight", gauge, []string{srv}, 0},
		{"sluice_http_handler_errors_total", counter, []string{srv}, 0},
		{"sluice_admission_admitted_total", counter, []string{srv}, 2},
		{"sluice_admission_queued_total", counter, []string{srv}, 1},
		{"sluice_admission_late_total", counter, []string{srv}, 0},
		{"sluice_admission_rejected_total", counter, []string{srv, "reason=quota", "code=429"}, 1},
		{"sluice_admission_gates_closed_seconds_total", counter, []string{srv}, 0.020},
		{"sluice_admission_queue_length", gauge, []string{srv}, 0},
		{"sluice_admission_max_age_seconds", gauge, []string{srv}, 0.1},
		{"sluice_admission_standing", gauge, []string{srv}, 0},
		{"sluice_admission_gates_closed_ratio", gauge, []string{srv}, 0.2},
		{"sluice_admission_queue_wait_mean_seconds", gauge, []string{srv}, 0.010},
	} {
		m := metric(t, mfs, w.name, w.typ, w.labels...)
		got := m.GetCounter().GetValue() + m.GetGauge().GetValue()
		assert.InDelta(t, w.want, got, 1e-9, "%s{%v}", w.name, w.labels)
	}
	assert.Nil(t, mfs["sluice_http_connections"], "an admission source has no connections")
	assert.Nil(t, mfs["sluice_executor_workers"], "nor an executor")

	d := metric(t, mfs, "sluice_http_request_duration_seconds", hist, srv).GetHistogram()
	assert.Equal(t, uint64(2), d.GetSampleCount())
	assert.InDelta(t, 0.030, d.GetSampleSum(), 1e-9)
	assert.Equal(t, uint64(0), bucket(t, d, 0.005))
	assert.Equal(t, uint64(1), bucket(t, d, 0.01), "10 ms is at or below 0.01")
	assert.Equal(t, uint64(2), bucket(t, d, 0.025))
	assert.Len(t, d.GetBucket(), 16)
	w := metric(t, mfs, "sluice_admission_queue_wait_seconds", hist, srv).GetHistogram()
	assert.Equal(t, uint64(2), w.GetSampleCount())
	assert.InDelta(t, 0.020, w.GetSampleSum(), 1e-9)
	assert.Equal(t, uint64(1), bucket(t, w, 0.0001), "r1 did not wait")
	assert.Equal(t, uint64(2), bucket(t, w, 0.025))

	// A scrape longer than the window after the last one: the autoscaling
	// gauges cover the time since that one, in which nothing happened.
	clk.add(20 * time.Second)
	mfs = gather(t, c)
	assert.Zero(t, value(t, mfs, "sluice_admission_gates_closed_ratio", srv))
	assert.Zero(t, value(t, mfs, "sluice_admission_queue_wait_mean_seconds", srv))
	assert.Equal(t, 2.0, value(t, mfs, "sluice_admission_admitted_total", srv), "counters stay")

	// The gates closed for the whole window: the ratio is 1.
	gate.open.Store(false)
	quota.open.Store(true)
	r4 := newTicket("/4")
	require.Equal(t, admit.Queued, p.Decide(&r4.Ticket))
	clk.add(10 * time.Second)
	assert.InDelta(t, 1.0, value(t, gather(t, c), "sluice_admission_gates_closed_ratio", srv), 1e-9)

	// Removed, the source is gone, and so is its observer.
	c.Remove(Admission("api", nil))
	assert.Nil(t, gather(t, c)["sluice_admission_admitted_total"])
	p.Close() // rejects r4: no observer left to hear it
}

// Add refuses what would export the same series twice, and what is not a
// source; Remove and Close let go.
func TestAddRefusesDuplicatesAndZeroSources(t *testing.T) {
	p, err := admit.New(admit.Config{}, admit.Host{})
	require.NoError(t, err)
	defer p.Close()
	_, err = New(Config{Window: -time.Second})
	require.ErrorContains(t, err, "Window")
	c, err := New(Config{}, Admission("a", p))
	require.NoError(t, err)
	defer c.Close()
	require.ErrorContains(t, c.Add(Admission("a", p)), `"a"`)
	require.ErrorContains(t, c.Add(Source{}), "zero Source")
	require.ErrorContains(t, c.Add(Admission("", p)), "no name")
	require.ErrorContains(t, c.Add(Admission("b", p), Admission("b", p)), `"b"`)
	require.NoError(t, c.Add(Admission("b", p)), "a failed Add adds nothing")
	c.Close()
	assert.Empty(t, gather(t, c))
	require.NoError(t, c.Add(Admission("a", p)), "usable after Close")
}

// A real server under a little load, with every kind of source: the
// output passes promtool's lint, and the server's and executor's metrics
// say what the traffic did. Off Linux, where the front door serves on
// net/http with no executor or sluice server to read, it skips.
func TestServerMetricsPassPromtool(t *testing.T) {
	schedtest.SkipWithoutExecutor(t)
	tracker, err := tenant.New(tenant.Config{})
	require.NoError(t, err)
	limiter, err := ratelimit.New(ratelimit.Config{Window: time.Second, Quota: 1000})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/fail", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusBadGateway) })
	srv, err := sluice.Listen("127.0.0.1:0", mux, sluice.Config{Admission: admit.Config{
		Policies: []admit.Policy{tracker},
	}, Runtime: srt.Config{Workers: 2}})
	require.NoError(t, err)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, srv.Stop(ctx))
	}()
	base := "http://" + srv.Addr().String()
	store := tenant.NewMemoryStore(nil)
	ctrl, err := tenant.NewController(tenant.ControllerConfig{})
	require.NoError(t, err)
	agent, err := tenant.NewAgent(tenant.AgentConfig{Store: store, Tracker: tracker, Controller: ctrl})
	require.NoError(t, err)
	tr, err := client.New(client.Config{Balancer: client.BalancerConfig{Backends: []string{base}}})
	require.NoError(t, err)
	defer tr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer rdb.Close()
	// A limiter of its own, untouched, so that closing the syncer has
	// nothing to send to its (absent) Redis.
	shared, err := ratelimit.New(ratelimit.Config{Window: time.Second, Quota: 1000})
	require.NoError(t, err)
	rsync, err := ratelimit.NewRedisSync(shared, rdb, ratelimit.RedisConfig{Manual: true})
	require.NoError(t, err)
	defer rsync.Close()

	c, err := New(Config{},
		Server("api", srv),
		Tenants("api", tracker),
		TenantAgent("api", agent),
		RateLimiter("api", limiter),
		RedisSync("api", rsync),
		Transport("backends", tr),
	)
	require.NoError(t, err)
	defer c.Close()

	hc := &http.Client{Transport: tr}
	defer hc.CloseIdleConnections()
	// Two control periods of 30 requests, 10% failing, from two tenants:
	// the first period's are pooled under ~other, the tracker follows the
	// tenants by name from the second.
	for range 2 {
		for i := range 30 {
			path := "/ok"
			if i%10 == 9 {
				path = "/fail"
			}
			req, err := http.NewRequest(http.MethodGet, base+path, nil)
			require.NoError(t, err)
			req.Header.Set("X-Tenant", []string{"acme", "globex"}[i%2])
			resp, err := hc.Do(req)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			limiter.Allow("k")
		}
		require.NoError(t, agent.Tick(context.Background()))
	}
	require.NoError(t, tracker.Apply(tenant.Table{Version: 99, Drops: map[string]float64{"acme": 0.25}}))

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
	out, err := serveOnce(h)
	require.NoError(t, err)

	mfs := gather(t, c)
	srvL := "server=api"
	assert.Equal(t, 54.0, value(t, mfs, "sluice_http_requests_total", srvL, "class=2xx"))
	assert.Equal(t, 6.0, value(t, mfs, "sluice_http_requests_total", srvL, "class=5xx"))
	assert.Equal(t, 60.0, value(t, mfs, "sluice_admission_admitted_total", srvL))
	assert.GreaterOrEqual(t, value(t, mfs, "sluice_http_connections", srvL), 1.0)
	assert.Zero(t, value(t, mfs, "sluice_http_connections_parked", srvL), "nothing was refused for its age")
	assert.Zero(t, metric(t, mfs, "sluice_http_holds_total", dto.MetricType_COUNTER, srvL).GetCounter().GetValue())
	assert.NotNil(t, metric(t, mfs, "sluice_http_connection_moves_total", dto.MetricType_COUNTER, srvL), "exported")
	assert.Nil(t, mfs["sluice_tls_handshakes_total"], "a plain HTTP server has no handshakes")
	assert.Equal(t, uint64(60), metric(t, mfs, "sluice_http_request_duration_seconds", dto.MetricType_HISTOGRAM, srvL).GetHistogram().GetSampleCount())
	ex := "executor=api"
	assert.Equal(t, 2.0, value(t, mfs, "sluice_executor_workers", ex))
	assert.Positive(t, value(t, mfs, "sluice_executor_lane_tasks_total", ex, "lane=upstream"))
	metric(t, mfs, "sluice_executor_worker_busy_seconds_total", dto.MetricType_COUNTER, ex, "worker=1")
	assert.Zero(t, value(t, mfs, "sluice_executor_worker_lends_total", ex, "worker=0"), "HTTP/1.1 borrows no worker")
	assert.Zero(t, value(t, mfs, "sluice_executor_worker_lends_taken_total", ex, "worker=1"))
	// acme's first requests may count under ~other, until the tracker
	// follows it by name.
	acme := value(t, mfs, "sluice_tenant_admitted_total", srvL, "tenant=acme")
	assert.GreaterOrEqual(t, acme, 15.0)
	other := 0.0
	if mfs["sluice_tenant_requests_total"] != nil {
		for _, m := range mfs["sluice_tenant_requests_total"].GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "tenant" && lp.GetValue() == tenant.Other {
					other = m.GetCounter().GetValue()
				}
			}
		}
	}
	assert.Equal(t, 60.0, value(t, mfs, "sluice_tenant_requests_total", srvL, "tenant=acme")+
		value(t, mfs, "sluice_tenant_requests_total", srvL, "tenant=globex")+other)
	assert.Equal(t, 0.25, value(t, mfs, "sluice_tenant_drop_ratio", srvL, "tenant=acme"))
	assert.Equal(t, 99.0, value(t, mfs, "sluice_tenant_table_version", srvL))
	assert.Equal(t, 1.0, value(t, mfs, "sluice_tenant_enforcing", srvL))
	assert.Equal(t, 2.0, value(t, mfs, "sluice_tenant_agent_ticks_total", srvL))
	assert.Equal(t, 60.0, value(t, mfs, "sluice_ratelimit_decisions_total", "limiter=api", "result=allowed"))
	assert.Zero(t, value(t, mfs, "sluice_ratelimit_redis_flushes_total", "limiter=api"))
	assert.Equal(t, 60.0, value(t, mfs, "sluice_client_requests_total", "client=backends"))
	assert.Equal(t, 1.0, value(t, mfs, "sluice_client_breaker_state", "client=backends", "backend="+base, "state=closed"))
	assert.Zero(t, value(t, mfs, "sluice_client_breaker_state", "client=backends", "backend="+base, "state=open"))
	for name := range mfs {
		assert.True(t, strings.HasPrefix(name, "sluice_"), name)
	}
	promtool(t, out) // last: it may skip
}

// serveOnce asks h for its page, as a scraper would, and returns the body.
func serveOnce(h http.Handler) (string, error) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		return "", fmt.Errorf("scrape: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String(), nil
}

// An HTTPS server's handshakes are counted by result. The counts are the
// sluice server's: off Linux, where there is none, it skips.
func TestTLSHandshakeMetrics(t *testing.T) {
	schedtest.SkipWithoutExecutor(t)
	cert, pool, err := selfsigned.New()
	require.NoError(t, err)
	srv, err := sluice.Listen("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}),
		sluice.Config{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}, Runtime: srt.Config{Workers: 1}})
	require.NoError(t, err)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, srv.Stop(ctx))
	}()
	for range 3 { // a connection each
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
		resp, err := (&http.Client{Transport: tr}).Get("https://" + srv.Addr().String() + "/")
		require.NoError(t, err)
		resp.Body.Close()
		tr.CloseIdleConnections()
	}
	_, err = tls.Dial("tcp", srv.Addr().String(), &tls.Config{ServerName: "wrong.example", RootCAs: pool})
	require.Error(t, err, "a name the certificate does not have")
	c, err := New(Config{}, Server("api", srv))
	require.NoError(t, err)
	defer c.Close()
	require.Eventually(t, func() bool {
		return value(t, gather(t, c), "sluice_tls_handshakes_total", "server=api", "result=failed") == 1
	}, 10*time.Second, 10*time.Millisecond, "the client's failure is the server's once it reads the alert")
	mfs := gather(t, c)
	assert.Equal(t, 3.0, value(t, mfs, "sluice_tls_handshakes_total", "server=api", "result=completed"))
	assert.Zero(t, value(t, mfs, "sluice_tls_handshakes_total", "server=api", "result=evicted"))
	assert.Zero(t, value(t, mfs, "sluice_tls_handshakes_in_progress", "server=api"))
}

// A tenant's name is the client's choice, obs-text included: four requests
// of `X-Tenant: \xff\xfe` used to fail every scrape (label value is not
// valid UTF-8) until the name left the tracker.
func TestBadTenantNameDoesNotFailTheScrape(t *testing.T) {
	tracker, err := tenant.New(tenant.Config{})
	require.NoError(t, err)
	a := &admit.Attempt{Method: "GET", Path: "/", Header: http.Header{"X-Tenant": {"\xff\xfe"}}}
	for range 2 {
		for range 10 {
			require.Nil(t, tracker.Admit(a))
			tracker.Done(a, admit.Outcome{Latency: time.Millisecond})
		}
		tracker.Collect(time.Second)
	}
	c, err := New(Config{}, Tenants("api", tracker))
	require.NoError(t, err)
	defer c.Close()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	out, err := serveOnce(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	require.NoError(t, err)
	assert.Contains(t, out, "tenant=\"\uFFFD\"")
}

func TestValidLabels(t *testing.T) {
	ok := []string{"a", "b"}
	assert.Equal(t, ok, validLabels(ok))
	assert.Equal(t, []string{"a", "\uFFFDx", "\uFFFD"}, validLabels([]string{"a", "\xffx", "\xfe\xfd"}))
}

// snapshotOf is an executor whose snapshot is fixed.
type snapshotOf sched.Snapshot

func (s snapshotOf) Snapshot() sched.Snapshot { return sched.Snapshot(s) }

// The leases of each worker's CPU, and those the watchdog took back, are
// counted per worker as the snapshot says.
func TestExecutorExportsLeases(t *testing.T) {
	ex := snapshotOf{Workers: []sched.WorkerStats{{ID: 0, Lends: 7, LendsTaken: 1}, {ID: 1, Lends: 3}}}
	c, err := New(Config{}, Executor("api", ex))
	require.NoError(t, err)
	mfs := gather(t, c)
	assert.Equal(t, 7.0, value(t, mfs, "sluice_executor_worker_lends_total", "executor=api", "worker=0"))
	assert.Equal(t, 3.0, value(t, mfs, "sluice_executor_worker_lends_total", "executor=api", "worker=1"))
	assert.Equal(t, 1.0, value(t, mfs, "sluice_executor_worker_lends_taken_total", "executor=api", "worker=0"))
	assert.Zero(t, value(t, mfs, "sluice_executor_worker_lends_taken_total", "executor=api", "worker=1"))
}
