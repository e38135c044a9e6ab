package ratelimit

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/httpgate"
	"github.com/sluice-go/sluice/internal/gatetest"
	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/reject"
	"github.com/sluice-go/sluice/sched"
	"github.com/sluice-go/sluice/server"
)

func newPolicy(t testing.TB, l *Limiter, opts PolicyConfig) *Policy {
	t.Helper()
	p, err := NewPolicy(l, opts)
	require.NoError(t, err)
	return p
}

func fromIP(s string) *admit.Attempt {
	return &admit.Attempt{Peer: netip.MustParseAddrPort(s)}
}

func TestRefusalHeadersExact(t *testing.T) {
	l, clk := newLimiter(t, Config{Window: time.Minute, Quota: 2})
	p := newPolicy(t, l, PolicyConfig{})
	clk.set(30 * time.Second)
	a := fromIP("203.0.113.7:5555")
	assert.Nil(t, p.Admit(a))
	assert.Nil(t, p.Admit(a))
	r := p.Admit(a)
	require.NotNil(t, r)
	// 2 counted 30 s into window 0: in window 1 they weigh 2 × (60 − t)/60,
	// and one more fits at t = 30 s, 60 s from now.
	assert.Equal(t, reject.RateLimit, r.Reason)
	assert.Equal(t, http.StatusTooManyRequests, r.Status)
	assert.Equal(t, time.Duration(-1), r.RetryAfter, "in the refusal's own fields")
	assert.Equal(t, http.Header{
		"Ratelimit-Policy": {`"default";q=2;w=60`},
		"Ratelimit":        {`"default";r=0;t=60`},
		"Retry-After":      {"60"},
	}, r.Header)
	assert.Same(t, r, p.Admit(a), "built once")
	clk.set(50 * time.Second)
	r = p.Admit(a)
	assert.Equal(t, `"default";r=0;t=40`, r.Header.Get("Ratelimit"))
	assert.Equal(t, "40", r.Header.Get("Retry-After"))

	// The whole answer, as the pipeline writes it.
	ans := reject.NewAnswer(r.Reason, r.Status, r.RetryAfter, nil)
	h := http.Header{}
	ans.SetHeader(h, true, r.Header)
	assert.Equal(t, http.Header{
		"Content-Length":       {"32"},
		"Content-Type":         {"text/plain; charset=utf-8"},
		"Ratelimit":            {`"default";r=0;t=40`},
		"Ratelimit-Policy":     {`"default";q=2;w=60`},
		"Retry-After":          {"40"},
		"Sluice-Not-Started":   {"1"},
		"Sluice-Reject-Reason": {"rate-limit"},
	}, h)
	assert.Equal(t, "request not started: rate-limit\n", ans.Body)
}

func TestRefusalOfBytesAndNeverFits(t *testing.T) {
	l, _ := newLimiter(t, Config{Window: 10 * time.Second, Quota: 1000,
		Overrides: map[string]int64{"banned": 0}})
	p := newPolicy(t, l, PolicyConfig{Name: `up"load`, Key: admit.HeaderKey("X-Tenant"), Cost: ContentLength, Unit: "content-bytes"})
	req := func(tenant string, n int64) *admit.Attempt {
		r := httptest.NewRequest("POST", "/", strings.NewReader(strings.Repeat("x", int(n))))
		r.Header.Set("X-Tenant", tenant)
		return &admit.Attempt{Header: r.Header, Request: r}
	}
	assert.Nil(t, p.Admit(req("t1", 700)))
	r := p.Admit(req("t1", 400))
	require.NotNil(t, r)
	assert.Equal(t, `"up\"load";q=1000;qu="content-bytes";w=10`, r.Header.Get("Ratelimit-Policy"))
	// 300 bytes left, 400 asked: short by 100. They fit once the 700 of
	// window 0 weigh 600 or less, 1.43 s into window 1: 11.43 s from now.
	assert.Equal(t, `"up\"load";r=300;t=12`, r.Header.Get("Ratelimit"))

	// More than the quota, or a quota of 0: never; no t, no Retry-After.
	r = p.Admit(req("t2", 1001))
	require.NotNil(t, r)
	assert.Equal(t, `"up\"load";r=1000`, r.Header.Get("Ratelimit"))
	assert.NotContains(t, r.Header, "Retry-After")
	r = p.Admit(req("banned", 1))
	assert.Equal(t, `"up\"load";q=0;qu="content-bytes";w=10`, r.Header.Get("Ratelimit-Policy"))
	assert.Equal(t, `"up\"load";r=0`, r.Header.Get("Ratelimit"))

	// Without the header field the policy does not limit.
	assert.Nil(t, p.Admit(&admit.Attempt{Header: http.Header{}}))
	assert.Nil(t, p.Admit(&admit.Attempt{Header: http.Header{"X-Tenant": {""}}}))

	// A declared length read from the header (the sluice server's
	// requests are not *http.Request).
	assert.Equal(t, int64(42), ContentLength(&admit.Attempt{Header: http.Header{"Content-Length": {"42"}}}))
	assert.Equal(t, int64(0), ContentLength(&admit.Attempt{Header: http.Header{"Content-Length": {"-4"}}}))
}

func TestSubSecondWindowHasNoW(t *testing.T) {
	l, _ := newLimiter(t, Config{Window: 1500 * time.Millisecond, Quota: 1})
	p := newPolicy(t, l, PolicyConfig{Name: "burst"})
	a := fromIP("192.0.2.1:1")
	p.Admit(a)
	r := p.Admit(a)
	assert.Equal(t, `"burst";q=1`, r.Header.Get("Ratelimit-Policy"))
}

func TestNewPolicyNamesTheBadValue(t *testing.T) {
	l, _ := newLimiter(t, Config{Window: time.Second, Quota: 1})
	for _, tc := range []struct {
		l    *Limiter
		opts PolicyConfig
		want string
	}{
		{nil, PolicyConfig{}, "the Limiter is nil"},
		{l, PolicyConfig{Name: "é"}, `PolicyConfig.Name "é"`},
		{l, PolicyConfig{Unit: "Bytes"}, `PolicyConfig.Unit "Bytes"`},
		{l, PolicyConfig{Key: admit.ClientPrefix(33, 64)}, "PolicyConfig.Key: admit: ClientPrefix(33, 64)"},
		{l, PolicyConfig{Key: admit.HeaderKey("")}, `PolicyConfig.Key: admit: HeaderKey("")`},
		{l, PolicyConfig{Key: admit.KeyFunc(nil)}, "PolicyConfig.Key: admit: KeyFunc(nil)"},
	} {
		_, err := NewPolicy(tc.l, tc.opts)
		if assert.Error(t, err) {
			assert.Contains(t, err.Error(), tc.want)
		}
	}
}

// The policy counts each request under its Key (admit.Key's own tests are
// in package admit): the zero Key is admit.ClientIP(), so the addresses of
// one IPv6 /64 share a quota; a request without a key is not limited.
func TestPolicyKeys(t *testing.T) {
	l, _ := newLimiter(t, Config{Window: time.Minute, Quota: 1})
	byIP := newPolicy(t, l, PolicyConfig{})
	assert.Nil(t, byIP.Admit(fromIP("[2001:db8:1:2::1]:1")))
	assert.NotNil(t, byIP.Admit(fromIP("[2001:db8:1:2::2]:1")), "the same /64")
	assert.Nil(t, byIP.Admit(fromIP("[2001:db8:1:3::1]:1")), "another /64")
	assert.Equal(t, 0, allowN(l, "2001:db8:1:2::/64", 1), "counted under the /64")
	assert.Nil(t, byIP.Admit(&admit.Attempt{}), "no address: not limited")
	assert.Nil(t, byIP.Admit(&admit.Attempt{}))

	byPrefix := newPolicy(t, l, PolicyConfig{Key: admit.ClientPrefix(24, 48)})
	assert.Nil(t, byPrefix.Admit(fromIP("198.51.100.1:1")))
	assert.NotNil(t, byPrefix.Admit(fromIP("[::ffff:198.51.100.2]:1")), "the same /24")

	byFunc := newPolicy(t, l, PolicyConfig{Key: admit.KeyFunc(func(a *admit.Attempt) (string, bool) {
		return a.Path, a.Path != ""
	})})
	assert.Nil(t, byFunc.Admit(&admit.Attempt{Path: "/a"}))
	assert.NotNil(t, byFunc.Admit(&admit.Attempt{Path: "/a"}))
	assert.Nil(t, byFunc.Admit(&admit.Attempt{}), "no key: not limited")
	assert.Nil(t, byFunc.Admit(&admit.Attempt{}))
}

func TestAdmitDoesNotAllocate(t *testing.T) {
	l, _ := newLimiter(t, Config{Window: time.Minute, Quota: 1 << 40})
	byIP := newPolicy(t, l, PolicyConfig{})
	byHeader := newPolicy(t, l, PolicyConfig{Key: admit.HeaderKey("X-Api-Key")})
	a4 := fromIP("203.0.113.7:5555")
	a6 := fromIP("[2001:db8::7]:5555")
	ah := &admit.Attempt{Header: http.Header{"X-Api-Key": {"secret"}}}
	for _, a := range []*admit.Attempt{a4, a6} {
		byIP.Admit(a)
		assert.Zero(t, testing.AllocsPerRun(1000, func() { byIP.Admit(a) }))
	}
	byHeader.Admit(ah)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { byHeader.Admit(ah) }))
	ar := &admit.Attempt{RemoteAddr: "192.0.2.7:4000"} // net/http's text, parsed per request
	byIP.Admit(ar)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { byIP.Admit(ar) }))
	// A refusal already built.
	lz, _ := newLimiter(t, Config{Window: time.Minute, Quota: 1})
	pz := newPolicy(t, lz, PolicyConfig{})
	pz.Admit(a4)
	pz.Admit(a4)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { pz.Admit(a4) }))
}

// refuse is a policy that refuses everything.
type refuse struct{}

func (refuse) Admit(*admit.Attempt) *admit.Refusal { return &admit.Refusal{Reason: "no"} }
func (refuse) Done(*admit.Attempt, admit.Outcome)  {}

// A request that a later policy refuses does not use the quota.
func TestAdmissionTakenBackIsRefunded(t *testing.T) {
	l, _ := newLimiter(t, Config{Window: time.Minute, Quota: 2})
	p := newPolicy(t, l, PolicyConfig{})
	pl, err := admit.New(admit.Config{Policies: []admit.Policy{p, refuse{}}}, admit.Host{})
	require.NoError(t, err)
	defer pl.Close()
	for range 5 {
		tk := &admit.Ticket{OnStart: func() {}, OnReject: func() {}}
		tk.Peer = netip.MustParseAddrPort("192.0.2.1:1")
		assert.Equal(t, admit.Rejected, pl.Decide(tk))
		a, _ := tk.Answer()
		assert.Equal(t, "no", a.Reason)
	}
	assert.Equal(t, 2, allowN(l, "192.0.2.1", 5), "the quota is whole")
}

// The over-quota scenario, common to both adapters: a gate of one request
// and a queue; each key has a quota of 2 per minute. A's first request
// holds the gate, B's waits in the queue, and so does A's second, within
// its quota. A's third is over its quota: it is refused at once, 429, and
// takes no queue slot, although requests wait.
type overQuota struct {
	lim    *Limiter
	clk    *fakeClock
	conc   *gate.Concurrency
	cfg    admit.Config
	h      http.Handler
	start  chan string
	unlock chan struct{}
}

func newOverQuota(t *testing.T) *overQuota {
	o := &overQuota{start: make(chan string, 8), unlock: make(chan struct{})}
	o.lim, o.clk = newLimiter(t, Config{Window: time.Minute, Quota: 2})
	o.clk.set(30 * time.Second)
	pol := newPolicy(t, o.lim, PolicyConfig{Name: "per-key", Key: admit.HeaderKey("X-Api-Key")})
	o.conc = gatetest.Concurrency(t, 1)
	o.cfg = admit.Config{
		Policies: []admit.Policy{pol},
		Gates:    []admit.Policy{o.conc},
		Queue:    &admit.QueueConfig{},
		MaxAge:   time.Minute,
	}
	o.h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.start <- r.URL.Path
		if r.URL.Path == "/hold" {
			// Released worker on the sluice server; in place under httpgate.
			_, _ = sched.Await(r.Context(), func(context.Context) (struct{}, error) {
				<-o.unlock
				return struct{}{}, nil
			})
		}
		io.WriteString(w, "ok "+r.URL.Path)
	})
	return o
}

type answer struct {
	status int
	header http.Header
	body   string
}

func get(t *testing.T, addr, path, key string) answer {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+addr+path, nil)
	require.NoError(t, err)
	req.Header.Set("X-Api-Key", key)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Do(req)
	if !assert.NoError(t, err) {
		return answer{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// run plays the scenario against a server at addr whose pipeline is pl.
func (o *overQuota) run(t *testing.T, addr string, pl func() *admit.Pipeline) {
	results := make(chan answer, 4)
	go func() { results <- get(t, addr, "/hold", "A") }()
	require.Equal(t, "/hold", <-o.start)
	go func() { results <- get(t, addr, "/waits", "B") }()
	require.Eventually(t, func() bool { return pl().Queue().Len() == 1 }, 10*time.Second, time.Millisecond)

	// A's second request is within its quota: it waits behind B.
	go func() { results <- get(t, addr, "/second", "A") }()
	require.Eventually(t, func() bool { return pl().Queue().Len() == 2 }, 10*time.Second, time.Millisecond)

	// A's third is over its quota: refused at once, without a slot.
	got := get(t, addr, "/third", "A")
	assert.Equal(t, http.StatusTooManyRequests, got.status)
	assert.Equal(t, `"per-key";q=2;w=60`, got.header.Get("RateLimit-Policy"))
	assert.Equal(t, `"per-key";r=0;t=60`, got.header.Get("RateLimit"))
	assert.Equal(t, "60", got.header.Get("Retry-After"))
	assert.Equal(t, "1", got.header.Get(reject.NotStartedHeader))
	assert.Equal(t, "rate-limit", got.header.Get(reject.ReasonHeader))
	assert.Equal(t, "request not started: rate-limit\n", got.body)
	st := pl().Stats()
	assert.Equal(t, 2, pl().Queue().Len(), "the queue holds B and A's second only")
	assert.Equal(t, int64(2), st.Queued)
	assert.Equal(t, map[string]int64{"rate-limit": 1}, st.RejectedBy)

	close(o.unlock)
	var bodies []string
	for range 3 {
		a := <-results
		assert.Equal(t, http.StatusOK, a.status)
		bodies = append(bodies, a.body)
	}
	assert.ElementsMatch(t, []string{"ok /hold", "ok /waits", "ok /second"}, bodies)
	for range 2 {
		<-o.start
	}
}

func TestOverQuotaTakesNoQueueSlotHTTPGate(t *testing.T) {
	o := newOverQuota(t)
	g, err := httpgate.New(o.cfg)
	require.NoError(t, err)
	defer g.Close()
	srv := httptest.NewServer(g.Wrap(o.h))
	defer srv.Close()
	o.run(t, srv.Listener.Addr().String(), g.Pipeline)
}

func TestOverQuotaTakesNoQueueSlotSluiceServer(t *testing.T) {
	o := newOverQuota(t)
	srv, err := server.Listen(schedtest.Runtime(t, 2), "127.0.0.1:0", server.HTTPHandler(o.h), server.Config{Admission: o.cfg})
	require.NoError(t, err)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, srv.Close(ctx))
	}()
	o.run(t, srv.Addr().String(), srv.Pipeline)
}

// On the sluice server a bodiless refusal is written straight from the
// parse, from prebuilt fields: the RateLimit fields are on the wire there
// too, with the client's address as the key.
func TestSluiceServerAnswersByClientIPOnTheWire(t *testing.T) {
	l, clk := newLimiter(t, Config{Window: 10 * time.Second, Quota: 1})
	clk.set(5 * time.Second)
	pol := newPolicy(t, l, PolicyConfig{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	srv, err := server.Listen(schedtest.Runtime(t, 2), "127.0.0.1:0", server.HTTPHandler(h),
		server.Config{Admission: admit.Config{Policies: []admit.Policy{pol}}})
	require.NoError(t, err)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, srv.Close(ctx))
	}()
	nc, err := net.Dial("tcp", srv.Addr().String())
	require.NoError(t, err)
	defer nc.Close()
	_, err = io.WriteString(nc, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(10*time.Second)))
	var raw strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(raw.String(), "request not started: rate-limit\n") {
		n, err := nc.Read(buf)
		raw.Write(buf[:n])
		require.NoError(t, err, raw.String())
	}
	second := raw.String()[strings.Index(raw.String(), "HTTP/1.1 429"):]
	for _, f := range []string{
		"HTTP/1.1 429 Too Many Requests\r\n",
		// One request 5 s into window 0 weighs 1 until the end of window
		// 1: 15 s from now.
		"Ratelimit: \"default\";r=0;t=15\r\n",
		"Ratelimit-Policy: \"default\";q=1;w=10\r\n",
		"Retry-After: 15\r\n",
		"Sluice-Not-Started: 1\r\n",
		"Sluice-Reject-Reason: rate-limit\r\n",
	} {
		assert.Contains(t, second, f)
	}
	assert.Equal(t, int64(1), srv.Stats().RejectedBy["rate-limit"])
	assert.Equal(t, 0, allowN(l, "127.0.0.1", 1), "keyed by the peer's address")
}

// Through the pipeline, refusals with many Retry-After values (a quota's
// time to room takes every value up to two windows) allocate nothing once
// built: the pipeline's answer is one, the policy's fields are cached.
func TestRefusalsThroughThePipelineDoNotAllocate(t *testing.T) {
	l, clk := newLimiter(t, Config{Window: time.Minute, Quota: 1})
	p := newPolicy(t, l, PolicyConfig{})
	pl, err := admit.New(admit.Config{Policies: []admit.Policy{p}}, admit.Host{})
	require.NoError(t, err)
	defer pl.Close()
	tk := &admit.Ticket{OnStart: func() {}, OnReject: func() {}}
	tk.Peer = netip.MustParseAddrPort("192.0.2.1:1")
	require.Equal(t, admit.Admitted, pl.Decide(tk))
	pl.Done(tk, admit.Outcome{Status: 200})
	pass := func() {
		for s := range 40 {
			clk.set(time.Duration(s) * time.Second)
			if pl.Decide(tk) != admit.Rejected {
				t.Fatal("admitted")
			}
		}
	}
	pass()
	a, extra := tk.Answer()
	assert.Equal(t, "81", extra.Get("Retry-After"), "1 request at 0 s weighs 1 until 120 s")
	assert.Equal(t, int64(-1), a.RetryAfter)
	assert.Zero(t, testing.AllocsPerRun(10, pass))
	assert.Equal(t, int64(40*12), pl.Stats().Rejected, "one pass, and AllocsPerRun's warm-up and 10")
}
