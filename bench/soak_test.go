//go:build linux

package bench

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSoakConfigDefaults(t *testing.T) {
	var c SoakConfig
	require.NoError(t, c.defaults())
	assert.Equal(t, 5.0, c.Multiple)
	assert.Equal(t, time.Minute, c.Duration)
	assert.Equal(t, time.Second, c.Bucket)
	assert.Equal(t, 10*time.Second, c.Settle)
	assert.Equal(t, 100, c.PanicEvery)
	require.NotNil(t, c.Chaos)
	assert.Equal(t, DefaultChaosMix, *c.Chaos)
	assert.Equal(t, DefaultSoakRules, c.Rules)

	short := SoakConfig{Duration: 10 * time.Second, PanicEvery: -1, Chaos: &ChaosMix{}}
	require.NoError(t, short.defaults())
	assert.Equal(t, 3*time.Second, short.Settle, "a third of a short soak, in whole buckets")
	assert.Zero(t, short.PanicEvery, "negative: never")
	assert.Zero(t, short.Chaos.Total(), "a zero mix runs no chaos")

	tiny := SoakConfig{Duration: time.Second, Bucket: 250 * time.Millisecond}
	require.NoError(t, tiny.defaults())
	assert.Equal(t, 250*time.Millisecond, tiny.Settle)

	rules := SoakConfig{Rules: SoakRules{Enforce: []string{}, MinGoodput: 0.5, ExitSlack: -3}}
	require.NoError(t, rules.defaults())
	assert.Empty(t, rules.Rules.Enforce, "an empty list enforces nothing")
	assert.Equal(t, 0.5, rules.Rules.MinGoodput)
	assert.Equal(t, 1.5, rules.Rules.Growth)
	assert.Zero(t, rules.Rules.ExitSlack)

	for _, bad := range []SoakConfig{
		{Duration: 1500 * time.Millisecond},
		{Duration: 5 * time.Second, Settle: 6 * time.Second},
		{Multiple: -1},
		{Chaos: &ChaosMix{Reset: -1}},
	} {
		assert.Error(t, bad.defaults(), "%+v", bad)
	}
}

// soakSample builds a soak sample of target: 10 buckets of 1 s at C 100,
// settling at 3 s, with ok[i] OK answers in bucket i and the readings of
// read (called for 0 to 10 s), drained and stopped cleanly.
func soakSample(target string, ok []int64, read func(k int) Resources) *Sample {
	si := &SoakInfo{
		Duration: 10 * time.Second, Bucket: time.Second, Settle: 3 * time.Second,
		Rules: DefaultSoakRules,
		Stop: StopInfo{Took: 5 * time.Millisecond, Child: &ChildExit{
			GoroutinesBefore: 1, GoroutinesAfter: 1, FDsBefore: 10, FDsAfter: 10, After: time.Millisecond,
		}},
	}
	s := &Sample{Scenario: ScenarioSoak, Target: target, Capacity: 100, Multiple: 5, Soak: si}
	for i, n := range ok {
		s.Series = append(s.Series, Bucket{Start: time.Duration(i) * time.Second, OK: n})
	}
	for k := 0; k <= 10; k++ {
		r := read(k)
		r.At = time.Duration(k) * time.Second
		si.Resources = append(si.Resources, r)
	}
	si.Drained = Resources{At: 300 * time.Millisecond, Up: true, FDs: 12, Goroutines: 30, RSS: 20 << 20}
	return s
}

// steady reads 12 descriptors and 4 goroutines before the load, then 400
// and 20, and 20 MiB throughout.
func steady(k int) Resources {
	if k == 0 {
		return Resources{Up: true, FDs: 12, Goroutines: 4, RSS: 12 << 20}
	}
	return Resources{Up: true, FDs: 400, Goroutines: 20, RSS: 20 << 20}
}

func goodOK() []int64 { return []int64{90, 92, 85, 88, 91, 90, 89, 93, 90, 87} }

// byName returns the checks by name.
func byName(cs []Check) map[string]Check {
	m := make(map[string]Check, len(cs))
	for _, c := range cs {
		m[c.Name] = c
	}
	return m
}

func TestEvaluateSoakHealthy(t *testing.T) {
	s := soakSample("sluice", goodOK(), steady)
	checks := EvaluateSoak(s)
	names := make([]string, len(checks))
	for i, c := range checks {
		names[i] = c.Name
		assert.True(t, c.Pass, "%s: %s", c.Name, c.Detail)
		assert.True(t, c.Enforced, c.Name)
		assert.False(t, c.Failed(), c.Name)
	}
	assert.Equal(t, []string{CheckGoodput, CheckUp, CheckGoroutines, CheckFDs, CheckRSS, CheckDrained, CheckExit}, names)
	m := byName(checks)
	assert.Contains(t, m[CheckGoodput].Detail, "min 0.85 (2s-3s), median 0.90")
	assert.Contains(t, m[CheckFDs].Detail, "max 400 (at 3s) <= 1.5 x 400 (max up to 3s, at 1s) + 64 = 664, over 8 readings")
	assert.Contains(t, m[CheckRSS].Detail, "20.0 MiB")
	assert.Contains(t, m[CheckDrained].Detail, "fds 12 (before it 12")
	assert.Contains(t, m[CheckExit].Detail, "goroutines 1 (before start 1), fds 10 (before 10)")
	assert.Nil(t, EvaluateSoak(&Sample{}), "not a soak sample")
}

func TestEvaluateSoakGoodput(t *testing.T) {
	ok := goodOK()
	ok[6] = 69 // 0.69 of C in one bucket
	m := byName(EvaluateSoak(soakSample("sluice", ok, steady)))
	g := m[CheckGoodput]
	assert.False(t, g.Pass)
	assert.True(t, g.Failed())
	assert.Contains(t, g.Detail, "min 0.69 (6s-7s)")

	// The same figures on net/http are reported, not enforced.
	m = byName(EvaluateSoak(soakSample("nethttp", ok, steady)))
	assert.False(t, m[CheckGoodput].Pass)
	assert.False(t, m[CheckGoodput].Enforced)
	assert.False(t, m[CheckGoodput].Failed())

	s := soakSample("sluice", ok, steady)
	s.Capacity = 0
	assert.Contains(t, byName(EvaluateSoak(s))[CheckGoodput].Detail, "no goodput series")
}

func TestEvaluateSoakFlatness(t *testing.T) {
	// A leak: one descriptor more per second... passes; fifty a second
	// fails.
	for _, tc := range []struct {
		perSecond int
		pass      bool
	}{{1, true}, {50, false}} {
		s := soakSample("sluice", goodOK(), func(k int) Resources {
			r := steady(k)
			if k > 0 {
				r.FDs += tc.perSecond * k
			}
			return r
		})
		c := byName(EvaluateSoak(s))[CheckFDs]
		assert.Equal(t, tc.pass, c.Pass, c.Detail)
	}
	// A trough at the settling time does not lower the reference: the
	// highest reading up to it counts.
	s := soakSample("sluice", goodOK(), func(k int) Resources {
		r := steady(k)
		switch k {
		case 2:
			r.FDs = 2000
		case 3:
			r.FDs = 250
		case 7:
			r.FDs = 2100
		}
		return r
	})
	c := byName(EvaluateSoak(s))[CheckFDs]
	assert.True(t, c.Pass, c.Detail)
	assert.Contains(t, c.Detail, "max 2100 (at 7s) <= 1.5 x 2000 (max up to 3s, at 2s)")

	// Memory: 20 MiB at settling, 47 MiB later is more than 1.5x + 16.
	s = soakSample("sluice", goodOK(), func(k int) Resources {
		r := steady(k)
		if k == 9 {
			r.RSS = 47 << 20
		}
		return r
	})
	c = byName(EvaluateSoak(s))[CheckRSS]
	assert.False(t, c.Pass)
	assert.Contains(t, c.Detail, "max 47.0 MiB (at 9s) > 1.5 x 20.0 MiB")

	// Goroutines unknown (no probe): no verdict but a failure.
	s = soakSample("sluice", goodOK(), func(k int) Resources {
		r := steady(k)
		if k == 5 {
			r.Goroutines = -1
		}
		return r
	})
	c = byName(EvaluateSoak(s))[CheckGoroutines]
	assert.False(t, c.Pass)
	assert.Equal(t, "no reading at 5s", c.Detail)

	// Readings that stop before the end fail.
	s = soakSample("sluice", goodOK(), steady)
	s.Soak.Resources = s.Soak.Resources[:8]
	c = byName(EvaluateSoak(s))[CheckGoroutines]
	assert.False(t, c.Pass)
	assert.Contains(t, c.Detail, "readings stop at 7s")
	s.Soak.Resources = s.Soak.Resources[:2]
	assert.Contains(t, byName(EvaluateSoak(s))[CheckRSS].Detail, "no reading up to 3s")
}

func TestEvaluateSoakCrash(t *testing.T) {
	s := soakSample("sluice", goodOK(), func(k int) Resources {
		if k >= 5 {
			return Resources{Goroutines: -1}
		}
		return steady(k)
	})
	s.Soak.Drained = Resources{Goroutines: -1}
	s.Soak.Stop = StopInfo{Err: "bench: target exit: exit status 2"}
	m := byName(EvaluateSoak(s))
	assert.False(t, m[CheckUp].Pass)
	assert.Equal(t, "gone at 5s", m[CheckUp].Detail)
	assert.Equal(t, "no reading at 5s", m[CheckFDs].Detail)
	assert.Equal(t, "no reading after the load", m[CheckDrained].Detail)
	assert.Equal(t, "bench: target exit: exit status 2", m[CheckExit].Detail)
	for _, c := range m {
		if c.Name != CheckGoodput {
			assert.False(t, c.Pass, c.Name)
		}
	}
}

func TestEvaluateSoakDrainAndExit(t *testing.T) {
	s := soakSample("sluice", goodOK(), steady)
	s.Soak.Drained.FDs = 17 // 5 more than before the load
	s.Soak.Drained.At = 5 * time.Second
	assert.False(t, byName(EvaluateSoak(s))[CheckDrained].Pass)
	s.Soak.Drained.FDs = 16
	assert.True(t, byName(EvaluateSoak(s))[CheckDrained].Pass, "within the slack of 4")

	cases := []struct {
		stop   StopInfo
		detail string
	}{
		{StopInfo{Took: 13 * time.Second, Child: &ChildExit{}}, "more than 12s"},
		{StopInfo{Took: time.Millisecond}, "did not report"},
		{StopInfo{Took: time.Millisecond, Child: &ChildExit{GoroutinesBefore: 1, GoroutinesAfter: 3, FDsBefore: 10, FDsAfter: 10}}, "goroutines 3 (before start 1)"},
		{StopInfo{Took: time.Millisecond, Child: &ChildExit{GoroutinesBefore: 1, GoroutinesAfter: 1, FDsBefore: 10, FDsAfter: 11}}, "fds 11 (before 10)"},
	}
	for _, tc := range cases {
		s := soakSample("sluice", goodOK(), steady)
		s.Soak.Stop = tc.stop
		c := byName(EvaluateSoak(s))[CheckExit]
		assert.False(t, c.Pass, tc.detail)
		assert.Contains(t, c.Detail, tc.detail)
	}
}

func TestSoakFailures(t *testing.T) {
	bad := goodOK()
	bad[0] = 10
	rep := &Report{Samples: []Sample{
		{Scenario: ScenarioSweep, Target: "sluice"},
		*soakSample("sluice", goodOK(), steady),
		*soakSample("nethttp", bad, steady),
		*soakSample("sluice-half", bad, steady),
	}}
	for i := range rep.Samples {
		if s := &rep.Samples[i]; s.Soak != nil {
			s.Soak.Checks = EvaluateSoak(s)
		}
	}
	failed := SoakFailures(rep)
	require.Len(t, failed, 1)
	assert.True(t, strings.HasPrefix(failed[0], "sluice-half: goodput: every 1s at least 0.70 of C"), failed[0])
	assert.Nil(t, SoakFailures(nil))
}

func TestGoodputFractions(t *testing.T) {
	s := &Sample{Capacity: 200, Series: []Bucket{{Start: 0, OK: 200}, {Start: time.Second, OK: 100}, {Start: 2 * time.Second, OK: 50}},
		Soak: &SoakInfo{Duration: 2500 * time.Millisecond, Bucket: time.Second}}
	assert.InDeltaSlice(t, []float64{1, 0.5, 0.5}, GoodputFractions(s), 1e-9, "the last bucket is half a second")
	assert.Nil(t, GoodputFractions(&Sample{Capacity: 1}))
}

func TestProcReadings(t *testing.T) {
	rss, threads, err := procStatus(os.Getpid())
	require.NoError(t, err)
	assert.Positive(t, rss)
	assert.Positive(t, threads)
	self := countFDs("self")
	assert.GreaterOrEqual(t, self, 3, "stdin, stdout, stderr at least")
	assert.InDelta(t, self, countFDs(strconv.Itoa(os.Getpid())), 2, "by name or by number, the same process")
	_, _, err = procStatus(1 << 30)
	assert.Error(t, err)
	assert.Equal(t, -1, countFDs("nope"))
}

func TestPanicking(t *testing.T) {
	h := panicking(3, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	call := func() (body string, panicked any) {
		rec := httptest.NewRecorder()
		func() {
			defer func() { panicked = recover() }()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/forecast", nil))
		}()
		return rec.Body.String(), panicked
	}
	var got []string
	for range 6 {
		body, p := call()
		switch {
		case p == nil:
			got = append(got, body)
		case body == "":
			assert.Equal(t, PanicValue, p)
			got = append(got, "panic before")
		default:
			got = append(got, "panic after "+body)
		}
	}
	assert.Equal(t, []string{"ok", "ok", "panic before", "ok", "ok", "panic after ok"}, got)
}

func TestChildHandler(t *testing.T) {
	get := func(h http.Handler, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec
	}
	plain := childHandler(ChildSpec{PanicEvery: 1})
	assert.Equal(t, http.StatusNotFound, get(plain, LargePath).Code, "only a soak serves the large answer")
	assert.Equal(t, http.StatusOK, get(plain, WeatherPath).Code, "and only a soak panics")

	soak := childHandler(ChildSpec{Soak: true, PanicEvery: 2})
	rec := get(soak, LargePath)
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, LargeSize, rec.Body.Len())
	assert.Equal(t, http.StatusNotFound, get(soak, "/elsewhere").Code)
	assert.Equal(t, http.StatusOK, get(soak, WeatherPath).Code)
	assert.PanicsWithValue(t, PanicValue, func() { get(soak, WeatherPath) }, "the second request")
}

func TestServeChildProbes(t *testing.T) {
	in, stop := io.Pipe()
	var out strings.Builder
	done := make(chan error, 1)
	go func() {
		done <- serveChild(context.Background(), `{"target":"nethttp","soak":true,"probe":10000000}`, in, &out)
	}()
	time.Sleep(60 * time.Millisecond)
	require.NoError(t, stop.Close())
	require.NoError(t, <-done)

	p := &Process{}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.GreaterOrEqual(t, len(lines), 3, out.String())
	assert.True(t, strings.HasPrefix(lines[0], "listening http://127.0.0.1:"), lines[0])
	probes := 0
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "probe ") {
			probes++
		}
		p.readLine(l)
	}
	assert.GreaterOrEqual(t, probes, 2, "one at once, then every 10 ms")
	r := p.probe.Load()
	require.NotNil(t, r)
	assert.Positive(t, r.Goroutines)
	assert.Positive(t, r.HeapBytes)
	require.NotNil(t, p.Exit, "the exit line")
	assert.True(t, strings.HasPrefix(lines[len(lines)-1], "exit "))
	// In this process, other tests' goroutines may still be ending: the
	// counts can only fall.
	assert.LessOrEqual(t, p.Exit.GoroutinesAfter, p.Exit.GoroutinesBefore)
	assert.LessOrEqual(t, p.Exit.FDsAfter, p.Exit.FDsBefore)
	assert.Nil(t, p.Stats, "net/http has no counters")
}

func TestProcessReadLine(t *testing.T) {
	p := &Process{}
	p.readLine(`stats {"admitted":3}`)
	p.readLine(`probe {"goroutines":7,"heap_bytes":1024}`)
	p.readLine(`exit {"goroutines_before":1,"goroutines_after":2,"fds_before":3,"fds_after":4,"after":5}`)
	p.readLine(`probe not json`)
	p.readLine(`other line`)
	assert.JSONEq(t, `{"admitted":3}`, string(p.Stats))
	r := p.probe.Load()
	require.NotNil(t, r)
	assert.Equal(t, childProbe{Goroutines: 7, HeapBytes: 1024}, r.childProbe)
	assert.Equal(t, &ChildExit{GoroutinesBefore: 1, GoroutinesAfter: 2, FDsBefore: 3, FDsAfter: 4, After: 5}, p.Exit)
}

// TestSuiteSoak runs a one-second soak of the sluice target in a child
// process, at a light load, with one chaos client of each kind.
func TestSuiteSoak(t *testing.T) {
	cfg := tinySuite()
	cfg.Targets = []string{"sluice"}
	cfg.Scenarios = []Scenario{builtIn(ScenarioSoak)}
	cfg.Soak = SoakConfig{
		Multiple: 0.2, Duration: time.Second, Bucket: 250 * time.Millisecond, PanicEvery: 10,
		Chaos: &ChaosMix{Slowloris: 1, NoRead: 1, Reset: 1, Garbage: 1, Flood: 1},
		Rules: SoakRules{MinGoodput: 0.05},
	}
	rep, err := RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	require.Len(t, rep.Samples, 1)
	s := rep.Samples[0]
	assert.Equal(t, ScenarioSoak, s.Scenario)
	assert.Equal(t, 0.2, s.Multiple)
	require.NotNil(t, s.Soak)
	si := s.Soak
	assert.Len(t, s.Series, 4)
	require.Len(t, si.Resources, 5, "before the load, then at the end of each bucket")
	for i, r := range si.Resources {
		assert.Equal(t, time.Duration(i)*250*time.Millisecond, r.At)
		assert.True(t, r.Up)
		assert.Positive(t, r.Goroutines)
		assert.Positive(t, r.FDs)
		assert.Positive(t, r.RSS)
		assert.GreaterOrEqual(t, r.Conns, 0)
		assert.LessOrEqual(t, r.Conns, r.FDs)
		assert.GreaterOrEqual(t, r.CloseWait, 0)
	}
	assert.Len(t, si.Chaos, len(ChaosKinds), "every kind ran")
	assert.Positive(t, si.Chaos["reset"].Conns)
	m := byName(si.Checks)
	require.Len(t, m, 7)
	for _, name := range []string{CheckUp, CheckDrained, CheckExit} {
		assert.True(t, m[name].Pass, "%s: %s", name, m[name].Detail)
		assert.True(t, m[name].Enforced, name)
	}
	js, err := json.Marshal(rep)
	require.NoError(t, err)
	var back Report
	require.NoError(t, json.Unmarshal(js, &back))
	assert.Equal(t, si.Checks, back.Samples[0].Soak.Checks, "the checks survive the JSON")
}

func TestEvaluateSoakCountsDescriptorsBeyondConnections(t *testing.T) {
	// The clients open more connections as the run goes (the pool's
	// high grows): the descriptors follow, nothing else grows.
	s := soakSample("sluice", goodOK(), func(k int) Resources {
		r := steady(k)
		r.Conns = 380 + 100*k
		r.FDs = r.Conns + 20
		return r
	})
	c := byName(EvaluateSoak(s))[CheckFDs]
	assert.True(t, c.Pass, c.Detail)
	assert.Contains(t, c.Detail, "beyond the open connections, max 20")
	// Connections the clients closed pile up in CLOSE_WAIT: they count.
	s = soakSample("sluice", goodOK(), func(k int) Resources {
		r := steady(k)
		r.Conns, r.CloseWait = 380, 30*k
		r.FDs = r.Conns + 20 + r.CloseWait
		return r
	})
	c = byName(EvaluateSoak(s))[CheckFDs]
	assert.False(t, c.Pass, c.Detail)
	assert.Regexp(t, `; in CLOSE_WAIT at \d+s: \d+$`, c.Detail, "the detail says how many of them wait for the server's close")
	// Connections unknown: no verdict but a failure.
	s = soakSample("sluice", goodOK(), func(k int) Resources {
		r := steady(k)
		r.Conns = -1
		return r
	})
	assert.False(t, byName(EvaluateSoak(s))[CheckFDs].Pass)
}

func TestProcNetAddrs(t *testing.T) {
	assert.Equal(t, [2]string{"0100007F:1F90", "0000000000000000FFFF00000100007F:1F90"},
		procNetAddrs(netip.MustParseAddrPort("127.0.0.1:8080")))
	assert.Equal(t, [2]string{"-", "00000000000000000000000001000000:0050"},
		procNetAddrs(netip.MustParseAddrPort("[::1]:80")))
}

func TestTCPConns(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	addr := l.Addr().(*net.TCPAddr).AddrPort()
	var clients, servers []net.Conn
	defer func() {
		for _, c := range append(clients, servers...) {
			c.Close()
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", l.Addr().String())
		require.NoError(t, err)
		clients = append(clients, c)
	}
	for range 2 {
		s, err := l.Accept()
		require.NoError(t, err)
		servers = append(servers, s)
	}
	// Another address with the same port (a server on ::1, or another
	// process's client there) is not this server's: one connection to it.
	if l6, err := net.Listen("tcp", net.JoinHostPort("::1", strconv.Itoa(int(addr.Port())))); err == nil {
		defer l6.Close()
		c, err := net.Dial("tcp", l6.Addr().String())
		require.NoError(t, err)
		clients = append(clients, c)
		s, err := l6.Accept()
		require.NoError(t, err)
		servers = append(servers, s)
	} else {
		t.Logf("no second address with port %d: %v", addr.Port(), err)
	}
	// Two accepted, one still in the listener's queue (no process has
	// it); the clients' own sockets have another local port.
	est, cw, err := tcpConns(addr)
	require.NoError(t, err)
	assert.Equal(t, 2, est)
	assert.Zero(t, cw)
	// A client closes: its accepted connection waits in CLOSE_WAIT.
	require.NoError(t, clients[0].Close())
	assert.Eventually(t, func() bool {
		est, cw, err = tcpConns(addr)
		return err == nil && est == 1 && cw == 1
	}, 2*time.Second, 10*time.Millisecond, "established %d, close-wait %d", est, cw)
}
