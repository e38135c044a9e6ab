//go:build linux

package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/chaos"
	"github.com/sluice-go/sluice/bench/load"
)

func TestSoakChecksAndDefaults(t *testing.T) {
	suite := &bench.SuiteConfig{}
	var c Soak
	require.NoError(t, c.Check(suite))
	assert.Equal(t, 5.0, c.Multiple)
	assert.Equal(t, time.Minute, c.Duration)
	assert.Equal(t, time.Second, c.Bucket)
	assert.Equal(t, 10*time.Second, c.Settle)
	assert.Equal(t, 100, c.PanicEvery)
	require.NotNil(t, c.Chaos)
	assert.Equal(t, DefaultChaosMix(), *c.Chaos)
	assert.Equal(t, DefaultSoakRules(), c.Rules)

	short := Soak{Duration: 10 * time.Second, PanicEvery: -1, Chaos: &chaos.Mix{}}
	require.NoError(t, short.Check(suite))
	assert.Equal(t, 3*time.Second, short.Settle, "a third of a short soak, in whole buckets")
	assert.Zero(t, short.PanicEvery, "negative: never")
	assert.Zero(t, short.Chaos.Total(), "a zero mix runs no chaos")

	tiny := Soak{Duration: time.Second, Bucket: 250 * time.Millisecond}
	require.NoError(t, tiny.Check(suite))
	assert.Equal(t, 250*time.Millisecond, tiny.Settle)

	rules := Soak{Rules: SoakRules{Enforce: []string{}, MinGoodput: 0.5, ExitSlack: -3}}
	require.NoError(t, rules.Check(suite))
	assert.Empty(t, rules.Rules.Enforce, "an empty list enforces nothing")
	assert.Equal(t, 0.5, rules.Rules.MinGoodput)
	assert.Equal(t, 1.5, rules.Rules.Growth)
	assert.Zero(t, rules.Rules.ExitSlack)

	for _, bad := range []Soak{
		{Duration: 1500 * time.Millisecond},
		{Duration: 5 * time.Second, Settle: 6 * time.Second},
		{Multiple: -1},
		{Chaos: &chaos.Mix{Reset: -1}},
	} {
		assert.Error(t, bad.Check(suite), "%+v", bad)
	}
	assert.ErrorContains(t, (&Soak{}).Check(&bench.SuiteConfig{Clients: 8}), "-clients")
	assert.ErrorContains(t, (&Soak{}).Check(&bench.SuiteConfig{TLS: true}), "-tls")

	parse := func(args ...string) (*Soak, error) {
		so := &Soak{}
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		so.Flags(fs)
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		return so, so.Check(&bench.SuiteConfig{})
	}
	so, err := parse()
	require.NoError(t, err)
	assert.Equal(t, DefaultSoakDuration, so.Duration)
	so, err = parse("-soak-duration", "20s")
	require.NoError(t, err)
	assert.Equal(t, 20*time.Second, so.Duration)
	assert.Equal(t, 20*time.Second/3/time.Second*time.Second, so.Settle)
	for _, bad := range []string{"0s", "2h"} {
		_, err = parse("-soak-duration", bad)
		assert.ErrorContains(t, err, "-soak-duration", bad)
	}
}

// soakCase is a soak sample and its detail, apart.
type soakCase struct {
	*bench.Sample
	Soak *SoakDetail
}

// evaluate is EvaluateSoak of a soakCase.
func evaluate(c soakCase) []SoakCheck { return EvaluateSoak(c.Sample, c.Soak) }

// sample returns the case's sample with its detail stored in it.
func (c soakCase) sample(t *testing.T) bench.Sample {
	t.Helper()
	s := *c.Sample
	require.NoError(t, s.SetDetail(c.Soak))
	return s
}

// soakSample builds a soak sample of target: 10 buckets of 1 s at C 100,
// settling at 3 s, with ok[i] OK answers in bucket i and the readings of
// read (called for 0 to 10 s), drained and stopped cleanly.
func soakSample(target string, ok []int64, read func(k int) bench.Resources) soakCase {
	si := &SoakDetail{
		Duration: 10 * time.Second, Bucket: time.Second, Settle: 3 * time.Second,
		Rules: DefaultSoakRules(),
		Stop: SoakStop{Took: 5 * time.Millisecond, Child: &bench.ChildExit{
			GoroutinesBefore: 1, GoroutinesAfter: 1, FDsBefore: 10, FDsAfter: 10, After: time.Millisecond,
		}},
	}
	s := soakCase{&bench.Sample{Scenario: "soak", Target: target, Capacity: 100, Multiple: 5}, si}
	for i, n := range ok {
		s.Series = append(s.Series, load.Bucket{Start: time.Duration(i) * time.Second, OK: n})
	}
	for k := 0; k <= 10; k++ {
		r := read(k)
		r.At = time.Duration(k) * time.Second
		si.Resources = append(si.Resources, r)
	}
	si.Drained = bench.Resources{At: 300 * time.Millisecond, Up: true, FDs: 12, Goroutines: 30, RSS: 20 << 20}
	return s
}

// steady reads 12 descriptors and 4 goroutines before the load, then 400
// and 20, and 20 MiB throughout.
func steady(k int) bench.Resources {
	if k == 0 {
		return bench.Resources{Up: true, FDs: 12, Goroutines: 4, RSS: 12 << 20}
	}
	return bench.Resources{Up: true, FDs: 400, Goroutines: 20, RSS: 20 << 20}
}

func goodOK() []int64 { return []int64{90, 92, 85, 88, 91, 90, 89, 93, 90, 87} }

// byName returns the checks by name.
func byName(cs []SoakCheck) map[string]SoakCheck {
	m := make(map[string]SoakCheck, len(cs))
	for _, c := range cs {
		m[c.Name] = c
	}
	return m
}

func TestEvaluateSoakHealthy(t *testing.T) {
	s := soakSample("sluice", goodOK(), steady)
	checks := evaluate(s)
	names := make([]string, len(checks))
	for i, c := range checks {
		names[i] = c.Name
		assert.True(t, c.Pass, "%s: %s", c.Name, c.Detail)
		assert.True(t, c.Enforced, c.Name)
		assert.False(t, c.Failed(), c.Name)
	}
	assert.Equal(t, []string{SoakGoodput, SoakUp, SoakGoroutines, SoakFDs, SoakRSS, SoakDrained, SoakExit}, names)
	m := byName(checks)
	assert.Contains(t, m[SoakGoodput].Detail, "min 0.85 (2s-3s), median 0.90")
	assert.Contains(t, m[SoakFDs].Detail, "max 400 (at 3s) <= 1.5 x 400 (max up to 3s, at 1s) + 64 = 664, over 8 readings")
	assert.Contains(t, m[SoakRSS].Detail, "20.0 MiB")
	assert.Contains(t, m[SoakDrained].Detail, "fds 12 (before it 12")
	assert.Contains(t, m[SoakExit].Detail, "goroutines 1 (before start 1), fds 10 (before 10)")
	assert.Nil(t, EvaluateSoak(&bench.Sample{}, nil), "not a soak sample")
}

func TestEvaluateSoakGoodput(t *testing.T) {
	ok := goodOK()
	ok[6] = 69 // 0.69 of C in one bucket
	m := byName(evaluate(soakSample("sluice", ok, steady)))
	g := m[SoakGoodput]
	assert.False(t, g.Pass)
	assert.True(t, g.Failed())
	assert.Contains(t, g.Detail, "min 0.69 (6s-7s)")

	// The same figures on net/http are reported, not enforced.
	m = byName(evaluate(soakSample("nethttp", ok, steady)))
	assert.False(t, m[SoakGoodput].Pass)
	assert.False(t, m[SoakGoodput].Enforced)
	assert.False(t, m[SoakGoodput].Failed())

	s := soakSample("sluice", ok, steady)
	s.Capacity = 0
	assert.Contains(t, byName(evaluate(s))[SoakGoodput].Detail, "no goodput series")
}

func TestEvaluateSoakFlatness(t *testing.T) {
	// A leak: one descriptor more per second... passes; fifty a second
	// fails.
	for _, tc := range []struct {
		perSecond int
		pass      bool
	}{{1, true}, {50, false}} {
		s := soakSample("sluice", goodOK(), func(k int) bench.Resources {
			r := steady(k)
			if k > 0 {
				r.FDs += tc.perSecond * k
			}
			return r
		})
		c := byName(evaluate(s))[SoakFDs]
		assert.Equal(t, tc.pass, c.Pass, c.Detail)
	}
	// A trough at the settling time does not lower the reference: the
	// highest reading up to it counts.
	s := soakSample("sluice", goodOK(), func(k int) bench.Resources {
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
	c := byName(evaluate(s))[SoakFDs]
	assert.True(t, c.Pass, c.Detail)
	assert.Contains(t, c.Detail, "max 2100 (at 7s) <= 1.5 x 2000 (max up to 3s, at 2s)")

	// Memory: 20 MiB at settling, 47 MiB later is more than 1.5x + 16.
	s = soakSample("sluice", goodOK(), func(k int) bench.Resources {
		r := steady(k)
		if k == 9 {
			r.RSS = 47 << 20
		}
		return r
	})
	c = byName(evaluate(s))[SoakRSS]
	assert.False(t, c.Pass)
	assert.Contains(t, c.Detail, "max 47.0 MiB (at 9s) > 1.5 x 20.0 MiB")

	// Goroutines unknown (no probe): no verdict but a failure.
	s = soakSample("sluice", goodOK(), func(k int) bench.Resources {
		r := steady(k)
		if k == 5 {
			r.Goroutines = -1
		}
		return r
	})
	c = byName(evaluate(s))[SoakGoroutines]
	assert.False(t, c.Pass)
	assert.Equal(t, "no reading at 5s", c.Detail)

	// Readings that stop before the end fail.
	s = soakSample("sluice", goodOK(), steady)
	s.Soak.Resources = s.Soak.Resources[:8]
	c = byName(evaluate(s))[SoakGoroutines]
	assert.False(t, c.Pass)
	assert.Contains(t, c.Detail, "readings stop at 7s")
	s.Soak.Resources = s.Soak.Resources[:2]
	assert.Contains(t, byName(evaluate(s))[SoakRSS].Detail, "no reading up to 3s")
}

func TestEvaluateSoakCrash(t *testing.T) {
	s := soakSample("sluice", goodOK(), func(k int) bench.Resources {
		if k >= 5 {
			return bench.Resources{Goroutines: -1}
		}
		return steady(k)
	})
	s.Soak.Drained = bench.Resources{Goroutines: -1}
	s.Soak.Stop = SoakStop{Err: "bench: target exit: exit status 2"}
	m := byName(evaluate(s))
	assert.False(t, m[SoakUp].Pass)
	assert.Equal(t, "gone at 5s", m[SoakUp].Detail)
	assert.Equal(t, "no reading at 5s", m[SoakFDs].Detail)
	assert.Equal(t, "no reading after the load", m[SoakDrained].Detail)
	assert.Equal(t, "bench: target exit: exit status 2", m[SoakExit].Detail)
	for _, c := range m {
		if c.Name != SoakGoodput {
			assert.False(t, c.Pass, c.Name)
		}
	}
}

func TestEvaluateSoakDrainAndExit(t *testing.T) {
	s := soakSample("sluice", goodOK(), steady)
	s.Soak.Drained.FDs = 17 // 5 more than before the load
	s.Soak.Drained.At = 5 * time.Second
	assert.False(t, byName(evaluate(s))[SoakDrained].Pass)
	s.Soak.Drained.FDs = 16
	assert.True(t, byName(evaluate(s))[SoakDrained].Pass, "within the slack of 4")

	cases := []struct {
		stop   SoakStop
		detail string
	}{
		{SoakStop{Took: 13 * time.Second, Child: &bench.ChildExit{}}, "more than 12s"},
		{SoakStop{Took: time.Millisecond}, "did not report"},
		{SoakStop{Took: time.Millisecond, Child: &bench.ChildExit{GoroutinesBefore: 1, GoroutinesAfter: 3, FDsBefore: 10, FDsAfter: 10}}, "goroutines 3 (before start 1)"},
		{SoakStop{Took: time.Millisecond, Child: &bench.ChildExit{GoroutinesBefore: 1, GoroutinesAfter: 1, FDsBefore: 10, FDsAfter: 11}}, "fds 11 (before 10)"},
	}
	for _, tc := range cases {
		s := soakSample("sluice", goodOK(), steady)
		s.Soak.Stop = tc.stop
		c := byName(evaluate(s))[SoakExit]
		assert.False(t, c.Pass, tc.detail)
		assert.Contains(t, c.Detail, tc.detail)
	}
}

func TestSoakFailures(t *testing.T) {
	bad := goodOK()
	bad[0] = 10
	rep := &bench.Report{Samples: []bench.Sample{{Scenario: "sweep", Target: "sluice"}}}
	for _, c := range []soakCase{
		soakSample("sluice", goodOK(), steady),
		soakSample("nethttp", bad, steady),
		soakSample("sluice-half", bad, steady),
	} {
		c.Soak.Checks = evaluate(c)
		rep.Samples = append(rep.Samples, c.sample(t))
	}
	so := &Soak{}
	failed, err := so.Failures(rep)
	require.NoError(t, err)
	require.Len(t, failed, 1)
	assert.True(t, strings.HasPrefix(failed[0], "sluice-half: goodput: every 1s at least 0.70 of C"), failed[0])
	failed, err = so.Failures(nil)
	assert.NoError(t, err)
	assert.Nil(t, failed)
}

func TestGoodputFractions(t *testing.T) {
	s := &bench.Sample{Capacity: 200, Series: []load.Bucket{{Start: 0, OK: 200}, {Start: time.Second, OK: 100}, {Start: 2 * time.Second, OK: 50}}}
	d := &SoakDetail{Duration: 2500 * time.Millisecond, Bucket: time.Second}
	assert.InDeltaSlice(t, []float64{1, 0.5, 0.5}, GoodputFractions(s, d), 1e-9, "the last bucket is half a second")
	assert.Nil(t, GoodputFractions(&bench.Sample{Capacity: 1}, nil))
}

// TestSuiteSoak runs a one-second soak of the sluice target in a child
// process, at a light load, with one chaos client of each kind.
func TestSuiteSoak(t *testing.T) {
	cfg := tinySuite()
	cfg.Targets = []string{"sluice"}
	cfg.Scenarios = []bench.Scenario{&Soak{
		Multiple: 0.2, Duration: time.Second, Bucket: 250 * time.Millisecond, PanicEvery: 10,
		Chaos: &chaos.Mix{Slowloris: 1, NoRead: 1, Reset: 1, Garbage: 1, Flood: 1},
		Rules: SoakRules{MinGoodput: 0.05},
	}}
	rep, err := bench.RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	require.Len(t, rep.Samples, 1)
	s := rep.Samples[0]
	assert.Equal(t, "soak", s.Scenario)
	assert.Equal(t, 0.2, s.Multiple)
	si := detail[SoakDetail](t, &s)
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
	assert.Len(t, si.Chaos, len(chaos.Kinds()), "every kind ran")
	assert.Positive(t, si.Chaos["reset"].Conns)
	m := byName(si.Checks)
	require.Len(t, m, 7)
	for _, name := range []string{SoakUp, SoakDrained, SoakExit} {
		assert.True(t, m[name].Pass, "%s: %s", name, m[name].Detail)
		assert.True(t, m[name].Enforced, name)
	}
	js, err := json.Marshal(rep)
	require.NoError(t, err)
	var back bench.Report
	require.NoError(t, json.Unmarshal(js, &back))
	assert.Equal(t, si.Checks, detail[SoakDetail](t, &back.Samples[0]).Checks, "the checks survive the JSON")
}

func TestEvaluateSoakCountsDescriptorsBeyondConnections(t *testing.T) {
	// The clients open more connections as the run goes (the pool's
	// high grows): the descriptors follow, nothing else grows.
	s := soakSample("sluice", goodOK(), func(k int) bench.Resources {
		r := steady(k)
		r.Conns = 380 + 100*k
		r.FDs = r.Conns + 20
		return r
	})
	c := byName(evaluate(s))[SoakFDs]
	assert.True(t, c.Pass, c.Detail)
	assert.Contains(t, c.Detail, "beyond the open connections, max 20")
	// Connections the clients closed pile up in CLOSE_WAIT: they count.
	s = soakSample("sluice", goodOK(), func(k int) bench.Resources {
		r := steady(k)
		r.Conns, r.CloseWait = 380, 30*k
		r.FDs = r.Conns + 20 + r.CloseWait
		return r
	})
	c = byName(evaluate(s))[SoakFDs]
	assert.False(t, c.Pass, c.Detail)
	assert.Regexp(t, `; in CLOSE_WAIT at \d+s: \d+$`, c.Detail, "the detail says how many of them wait for the server's close")
	// Connections unknown: no verdict but a failure.
	s = soakSample("sluice", goodOK(), func(k int) bench.Resources {
		r := steady(k)
		r.Conns = -1
		return r
	})
	assert.False(t, byName(evaluate(s))[SoakFDs].Pass)
}

// soakReportRun builds a soak sample of target: 6 buckets of 1 s at C
// 100, settling at 2 s, with ok[i] OK answers in bucket i, descriptors
// growing by grow a second, and its checks evaluated.
func soakReportRun(t *testing.T, target string, ok []int64, grow int) bench.Sample {
	d := &SoakDetail{
		Duration: 6 * time.Second, Bucket: time.Second, Settle: 2 * time.Second, PanicEvery: 100,
		ChaosMix: chaos.Mix{Slowloris: 2, Flood: 1},
		Chaos: chaos.Stats{
			"slowloris": {Conns: 4, ServerClosed: 2, CutMin: 10 * time.Second, CutMax: 10100 * time.Millisecond},
			"flood":     {Conns: 3, Requests: 30, Status: map[int]int64{200: 20, 503: 10}},
		},
		Rules: DefaultSoakRules(),
		Stop:  SoakStop{Took: time.Millisecond, Child: &bench.ChildExit{GoroutinesBefore: 1, GoroutinesAfter: 1, FDsBefore: 9, FDsAfter: 9}},
	}
	s := &bench.Sample{Scenario: "soak", Shape: "io", Handler: bench.HandlerSpec{CPU: time.Millisecond, DB: 10 * time.Millisecond},
		Target: target, Capacity: 100, Multiple: 5}
	for i, n := range ok {
		s.Series = append(s.Series, load.Bucket{Start: time.Duration(i) * time.Second, OK: n})
	}
	for k := 0; k <= 6; k++ {
		r := bench.Resources{At: time.Duration(k) * time.Second, Up: true, FDs: 300 + grow*k, Goroutines: 20, RSS: 24 << 20}
		if k == 0 {
			r.FDs, r.Goroutines, r.RSS = 12, 4, 12<<20
		}
		d.Resources = append(d.Resources, r)
	}
	d.Drained = bench.Resources{At: 200 * time.Millisecond, Up: true, FDs: 12, Goroutines: 20}
	d.Checks = EvaluateSoak(s, d)
	return soakCase{s, d}.sample(t)
}

func soakReport(t *testing.T) *bench.Report {
	return &bench.Report{Samples: []bench.Sample{
		{Scenario: "sweep", Target: "sluice", Multiple: 2},
		soakReportRun(t, "sluice", []int64{90, 80, 95, 91, 88, 92}, 0),
		soakReportRun(t, "nethttp", []int64{50, 0, 10, 0, 0, 30}, 300),
	}}
}

func TestSoakSummarize(t *testing.T) {
	so := &Soak{}
	rows, err := so.Summarize(soakReport(t))
	require.NoError(t, err)
	require.Len(t, rows, 2)
	s, n := rows[0], rows[1]
	assert.Equal(t, "sluice", s.Target)
	assert.InDelta(t, 0.80, s.MinGoodput, 1e-9)
	assert.InDelta(t, 0.905, s.MedianGoodput, 1e-9)
	assert.Equal(t, 2*time.Second, s.AtSettle.At)
	assert.Equal(t, 6*time.Second, s.AtEnd.At)
	assert.True(t, s.Pass)
	assert.True(t, s.Enforced)
	assert.Empty(t, s.Failed)

	assert.Equal(t, "nethttp", n.Target)
	assert.Zero(t, n.MinGoodput)
	assert.False(t, n.Pass)
	assert.False(t, n.Enforced)
	assert.Equal(t, []string{SoakGoodput, SoakFDs}, n.Failed)
	assert.Equal(t, rows, so.Rows(soakReport(t)), "the JSON rows")

	rows, err = so.Summarize(nil)
	assert.NoError(t, err)
	assert.Nil(t, rows)
	assert.Nil(t, so.Rows(&bench.Report{Samples: []bench.Sample{{Scenario: "sweep"}}}), "no soak sample")
}

func TestSoakReport(t *testing.T) {
	so := &Soak{}
	var buf bytes.Buffer
	require.NoError(t, so.WriteReport(&buf, soakReport(t)))
	out := buf.String()
	for _, want := range []string{
		"soak, shape io (cpu 1ms, db 10ms): 5x of C for 6s, goodput per 1s bucket; resources flat from 2s",
		"with 3 chaos clients (2 slowloris, 1 flood), and a handler that panics on every 100th request (1%)",
		"goodput/C min  median  rss MiB @2s   end  goroutines @2s  end  fds @2s   end",
		"PASS\n",
		"(fail: goodput, fds flat)",
		"sluice, run 0:\n  PASS goodput: every 1s at least 0.70 of C (100/s): min 0.80 (1s-2s), median 0.91",
		"  FAIL (not enforced) fds flat: beyond the open connections, max 2100 (at 6s) > 1.5 x 900 (max up to 2s, at 2s) + 64 = 1414",
		"  chaos: slowloris 4 conns, 2 closed by the server (cut after 10s-10.1s); flood 3 conns, 30 requests, answers 20×200 10×503",
		"A result in parentheses is reported only",
	} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, "fell behind")

	rep := soakReport(t)
	rep.Samples[1].Behind = true
	buf.Reset()
	require.NoError(t, so.WriteReport(&buf, rep))
	assert.Contains(t, buf.String(), "sluice *")
	assert.Contains(t, buf.String(), "fell behind its schedule")

	buf.Reset()
	require.NoError(t, so.WriteReport(&buf, &bench.Report{Samples: []bench.Sample{{Scenario: "sweep"}}}))
	assert.Empty(t, buf.String(), "nothing without soak samples")
	require.NoError(t, so.WriteReport(&buf, nil))
	assert.Empty(t, buf.String())
}

func TestDescribePanicsAndMix(t *testing.T) {
	assert.Equal(t, "a handler that never panics", describePanics(0))
	assert.Equal(t, "a handler that panics on every 2nd request (50%)", describePanics(2))
	assert.Equal(t, "a handler that panics on every 11th request (9.09%)", describePanics(11))
	assert.Equal(t, "a handler that panics on every 21st request (4.76%)", describePanics(21))
	assert.Equal(t, "no chaos clients", describeMix(chaos.Mix{}))
	assert.True(t, strings.HasPrefix(describeMix(DefaultChaosMix()), "32 chaos clients (16 slowloris, 4 noread"))
}

func TestSoakPlots(t *testing.T) {
	dir := t.TempDir()
	rep := soakReport(t)
	rep.Samples[2].Behind = true
	paths, err := (&Soak{}).Plots(dir, rep)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "soak-io.png")}, paths)
	info, err := os.Stat(paths[0])
	require.NoError(t, err)
	assert.Positive(t, info.Size())
}

// TestSoakReportsAnOldReport reads a sample written before the soak kept
// its figures in Sample.Detail: they were under "soak".
func TestSoakReportsAnOldReport(t *testing.T) {
	s := soakReportRun(t, "sluice", []int64{90, 80, 95, 91, 88, 92}, 0)
	back := asOldSample(t, s, "soak")
	rows, err := (&Soak{}).Summarize(&bench.Report{Samples: []bench.Sample{back}})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.True(t, rows[0].Pass)
	assert.InDelta(t, 0.80, rows[0].MinGoodput, 1e-9)
}
