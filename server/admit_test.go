//go:build linux

package server

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/gatetest"
)

// switchGate admits while open is set, and counts its calls.
type switchGate struct {
	open              atomic.Bool
	acquired, release atomic.Int32
	lastLatency       atomic.Int64
	lastStatus        atomic.Int64
}

var refusedBySwitch = &admit.Refusal{Reason: "switch"}

func (g *switchGate) Admit(*admit.Attempt) *admit.Refusal {
	if g.open.Load() {
		g.acquired.Add(1)
		return nil
	}
	return refusedBySwitch
}

func (g *switchGate) Done(_ *admit.Attempt, o admit.Outcome) {
	g.release.Add(1)
	g.lastLatency.Store(int64(o.Latency))
	g.lastStatus.Store(int64(o.Status))
}

// gated is a Config whose admission asks gates, with rejection options.
func gated(rj admit.Rejection, gates ...admit.Policy) Config {
	return Config{Admission: admit.Config{Gates: gates, Rejection: rj}}
}

func TestRejectionIsEarlyRetriableAndKeepsTheConnection(t *testing.T) {
	g := &switchGate{}
	var ran atomic.Int32
	var observed atomic.Value
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran.Add(1)
		fmt.Fprintf(w, "served %s", r.URL.Path)
	})
	srv, addr := serveHTTP(t, h, gated(admit.Rejection{
		RetryAfter: 1500 * time.Millisecond,
		Header:     http.Header{"X-Extra": {"yes"}},
		OnReject: func(a *admit.Attempt, reason string) {
			observed.Store(a.Path + " " + reason + " " + a.Request.(*Request).Method)
		},
	}, g))
	// Refused: a POST with a body, then a GET on the same connection,
	// still refused, then (gate open) a third one that is served.
	raw := "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" +
		"GET /b HTTP/1.1\r\nHost: x\r\n\r\n"
	resps, bodies, closed := rawExchange(t, addr, raw, "GET")
	require.Len(t, resps, 2)
	assert.False(t, closed, "a rejection keeps the connection")
	for i, resp := range resps {
		assert.Equal(t, 503, resp.StatusCode)
		assert.Equal(t, "2", resp.Header.Get("Retry-After"))
		assert.Equal(t, "1", resp.Header.Get(NotStartedHeader))
		assert.Equal(t, "switch", resp.Header.Get(ReasonHeader))
		assert.Equal(t, "yes", resp.Header.Get("X-Extra"))
		assert.True(t, strings.HasPrefix(bodies[i], "request not started"))
	}
	assert.Equal(t, int32(0), ran.Load(), "no handler work for a rejected request")
	assert.Equal(t, "/b switch GET", observed.Load())

	g.open.Store(true)
	resps, bodies, _ = rawExchange(t, addr, "GET /c HTTP/1.1\r\nHost: x\r\n\r\n", "GET")
	require.Len(t, resps, 1)
	assert.Equal(t, 200, resps[0].StatusCode)
	assert.Equal(t, "served /c", bodies[0])
	assert.Equal(t, int32(1), g.acquired.Load())
	assert.Equal(t, int32(1), g.release.Load())
	assert.GreaterOrEqual(t, g.lastLatency.Load(), int64(0))
	assert.Equal(t, int64(200), g.lastStatus.Load(), "the outcome carries the status")

	st := srv.Stats()
	assert.Greater(t, st.GatesClosed, time.Duration(0), "closed from the first refusal to the admission")
	assert.Equal(t, int64(2), st.Rejected)
	assert.Equal(t, int64(1), st.Admitted)
	assert.Equal(t, int64(0), st.InFlight)
	assert.Equal(t, map[string]int64{"switch": 2}, st.RejectedBy)
}

func TestRejectionThroughNetHTTPClient(t *testing.T) {
	g := &switchGate{}
	_, addr := serveHTTP(t, http.HandlerFunc(echoPath), gated(admit.Rejection{RetryAfter: -1}, g))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for range 3 {
		resp, err := client.Post("http://"+addr+"/p", "text/plain", strings.NewReader(strings.Repeat("x", 10_000)))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 503, resp.StatusCode)
		assert.Empty(t, resp.Header.Get("Retry-After"))
	}
}

func TestRejectionNamesTheGateThatRefused(t *testing.T) {
	conc := gatetest.Concurrency(t, 0) // admits nothing
	open := &switchGate{}
	open.open.Store(true)
	srv, addr := serveHTTP(t, http.HandlerFunc(echoPath), gated(admit.Rejection{}, open, conc))
	resps, _, _ := rawExchange(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "GET")
	require.Len(t, resps, 1)
	assert.Equal(t, 503, resps[0].StatusCode)
	assert.Equal(t, "concurrency", resps[0].Header.Get(ReasonHeader))
	assert.Equal(t, map[string]int64{"concurrency": 1}, srv.Stats().RejectedBy)
	assert.Equal(t, int32(1), open.acquired.Load())
	assert.Equal(t, int32(1), open.release.Load(), "the gate before the refusal was given back")
}

// A policy's refusal carries its own status, Retry-After and fields, on
// the direct path and through the request's coroutine alike.
func TestPolicyRefusalWithItsOwnStatus(t *testing.T) {
	quota := &quotaPolicy{r: &admit.Refusal{Reason: "rate-limit", Status: http.StatusTooManyRequests,
		RetryAfter: 7 * time.Second, Header: http.Header{"Ratelimit-Remaining": {"0"}}}}
	_, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{Admission: admit.Config{Policies: []admit.Policy{quota}}})
	for _, raw := range []string{
		"GET /q HTTP/1.1\r\nHost: x\r\n\r\n",                        // direct
		"POST /q HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx", // coroutine
	} {
		resps, bodies, closed := rawExchange(t, addr, raw, "GET")
		require.Len(t, resps, 1)
		assert.False(t, closed)
		assert.Equal(t, 429, resps[0].StatusCode)
		assert.Equal(t, "7", resps[0].Header.Get("Retry-After"))
		assert.Equal(t, "0", resps[0].Header.Get("Ratelimit-Remaining"))
		assert.Equal(t, "1", resps[0].Header.Get(NotStartedHeader))
		assert.Equal(t, "request not started: rate-limit\n", bodies[0])
	}
}

// quotaPolicy refuses everything with its refusal.
type quotaPolicy struct{ r *admit.Refusal }

func (q *quotaPolicy) Admit(*admit.Attempt) *admit.Refusal { return q.r }
func (q *quotaPolicy) Done(*admit.Attempt, admit.Outcome)  {}

// TestDirectRejectionMatchesTheCoroutines compares the rejections written
// directly (bodiless HTTP/1.1) with those written by a request's coroutine
// (a request with a body, and HEAD): same status, fields and body, for
// pipelined requests on one kept connection.
func TestDirectRejectionMatchesTheCoroutines(t *testing.T) {
	bodiless := "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /2 HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /3 HTTP/1.1\r\nHost: x\r\n\r\n"
	withBody := "POST /1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx" +
		"POST /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx" +
		"POST /3 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx"
	answers := func(cfg Config, raw string) ([]*http.Response, []string, *Server) {
		srv, addr := serveHTTP(t, http.HandlerFunc(echoPath), cfg)
		resps, bodies, closed := rawExchange(t, addr, raw, "GET")
		assert.False(t, closed)
		require.Len(t, resps, 3)
		head, headBodies, _ := rawExchange(t, addr, "HEAD /4 HTTP/1.1\r\nHost: x\r\n\r\n", "HEAD")
		require.Len(t, head, 1)
		return append(resps, head[0]), append(bodies, headBodies[0]), srv
	}
	extra := http.Header{"X-Extra": {"yes"}}
	direct, directBodies, srv := answers(gated(admit.Rejection{Header: extra}, &switchGate{}), bodiless)
	viaCoro, coroBodies, _ := answers(gated(admit.Rejection{Header: extra}, &switchGate{}), withBody)
	for i := range direct {
		d, c := direct[i], viaCoro[i]
		assert.Equal(t, 503, d.StatusCode)
		assert.Equal(t, c.StatusCode, d.StatusCode)
		d.Header.Del("Date")
		c.Header.Del("Date")
		assert.Equal(t, c.Header, d.Header, "request %d", i+1)
		assert.Equal(t, coroBodies[i], directBodies[i])
	}
	assert.Equal(t, "request not started: switch\n", directBodies[0])
	assert.Empty(t, directBodies[3], "HEAD: no body")
	assert.Equal(t, "yes", direct[1].Header.Get("X-Extra"))
	assert.Equal(t, map[string]int64{"switch": 4}, srv.Stats().RejectedBy)
}

// keyRecorder is a policy keyed by a header, as the tenant tracker is: it
// asks for the field to be picked out and records, for each request, the
// key it read and whether it came picked.
type keyRecorder struct {
	key  admit.Key
	seen chan [2]string // key, "picked" or "map"
}

func (k *keyRecorder) Attach(env admit.Env) (func(), error) {
	name, _ := k.key.HeaderName()
	env.PickHeader(name)
	return nil, nil
}

func (k *keyRecorder) Admit(a *admit.Attempt) *admit.Refusal {
	var buf [admit.KeyBufLen]byte
	v, _ := k.key.Of(&buf, a)
	how := "map"
	if a.Picked != nil {
		how = "picked"
	}
	k.seen <- [2]string{strings.Clone(v), how}
	return nil
}

func (k *keyRecorder) Done(*admit.Attempt, admit.Outcome) {}

// TestKeyedHeaderIsPickedWhileParsing checks that the field a policy keys
// by reaches it picked out by the parser, with the value the map has:
// the first one, none when absent, and through the map when the field was
// folded over two lines.
func TestKeyedHeaderIsPickedWhileParsing(t *testing.T) {
	rec := &keyRecorder{key: admit.HeaderKey("X-Tenant"), seen: make(chan [2]string, 8)}
	_, addr := serveNative(t, HandlerFunc(func(w *ResponseWriter, _ *Request) {}),
		Config{Admission: admit.Config{Policies: []admit.Policy{rec}}})
	for _, c := range []struct {
		fields string
		want   [2]string
	}{
		{"X-Tenant: acme\r\n", [2]string{"acme", "picked"}},
		{"x-tenant: first\r\nX-Tenant: second\r\n", [2]string{"first", "picked"}},
		{"User-Agent: t\r\n", [2]string{"", "picked"}},
		{"X-Tenant: a\r\n b\r\n", [2]string{"a b", "map"}},
	} {
		resps, _, _ := rawExchange(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n"+c.fields+"\r\n", "GET")
		require.Len(t, resps, 1)
		assert.Equal(t, c.want, <-rec.seen, "%q", c.fields)
	}
}
