//go:build linux

package scenario

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
	"github.com/sluice-go/sluice/bench/report"
	"github.com/sluice-go/sluice/lanes"
	srt "github.com/sluice-go/sluice/runtime"
)

// The lanes scenario, short: every part on sluice, the parts without a lane
// on net/http, each with its figures filled in and the live change made.
// Nothing here is a timing threshold: the run is too short and the machine
// shared.
func TestSuiteLanes(t *testing.T) {
	cfg := tinySuite()
	cfg.Targets = []string{"nethttp", "sluice"}
	cfg.Scenarios = []bench.Scenario{&Lanes{Batch: 4 * time.Millisecond, Slice: 500 * time.Microsecond, Multiple: 0.3}}
	cfg.Duration = 800 * time.Millisecond
	var progress []string
	cfg.Progress = func(_, _ time.Duration, now string) { progress = append(progress, now) }
	rep, err := bench.RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	assert.NotEmpty(t, progress)
	cpus, err := srt.AffinityCPUs()
	require.NoError(t, err)

	type key struct{ target, part string }
	var got []key
	for _, s := range rep.Samples {
		li := detail[LanesDetail](t, &s)
		what := s.Target + " " + li.Part
		got = append(got, key{s.Target, li.Part})
		assert.Equal(t, "lanes", s.Scenario, what)
		assert.Equal(t, LanesShape, s.Shape, what)
		assert.Equal(t, DefaultLanesInteractive, s.Handler.CPU, what)
		assert.Positive(t, s.Capacity, what)
		assert.Equal(t, 0.3, s.Multiple, what)
		assert.InEpsilon(t, 0.3*s.Capacity, s.Rates.Offered, 0.5, what)
		assert.Equal(t, len(cpus), li.Workers, "%s: one per CPU, shared with the generator", what)
		assert.Equal(t, 4*time.Millisecond, li.Batch, what)
		assert.Equal(t, DefaultLanesWindow, li.Window, what)
		// The interactive route is served, and counted both ways.
		assert.Positive(t, s.Rates.Goodput, what)
		assert.Positive(t, li.InteractiveDone, what)
		assert.Positive(t, li.InteractiveShare, what)
		assert.Positive(t, li.TargetInteractiveShare, what)
		require.Len(t, li.Series, int(cfg.Duration/li.Window), what)
		assert.True(t, li.HostCPU == -1 || li.HostCPU > 0, "%s: host CPU %v", what, li.HostCPU)
		assert.GreaterOrEqual(t, li.OtherCPU, 0.0, what)
		for _, sh := range []float64{li.BatchShare, li.InteractiveShare, li.TargetBatchShare, li.TargetInteractiveShare} {
			assert.True(t, sh >= 0 && sh < 2, "%s: share %v", what, sh)
		}
		if li.Part == LanesAlone {
			assert.Zero(t, li.BatchRate, what)
			assert.Zero(t, li.BatchDone, what)
			assert.Zero(t, li.TargetBatchShare, what)
		} else {
			assert.InEpsilon(t, 2*float64(li.Workers)/0.004, li.BatchRate, 1e-9, what)
			assert.Equal(t, DefaultLanesConnsPerWorker*li.Workers, li.BatchConns, what)
			assert.Positive(t, li.BatchOffered, what)
			assert.Positive(t, li.BatchDone, "%s: the batch completes requests", what)
			assert.Positive(t, li.BatchShare, what)
			assert.Positive(t, li.TargetBatchShare, what)
		}
		switch li.Part {
		case LanesInBackground, LanesLive:
			assert.Equal(t, uint32(DefaultLanesShares), li.Shares, what)
			assert.Equal(t, int32(DefaultLanesPriority), li.Priority, what)
		default:
			assert.Zero(t, li.Shares, what)
		}
		if s.Target == "sluice" {
			require.NotNil(t, s.Placement, what)
			assert.Equal(t, li.Workers, s.Placement.Workers, what)
		}
		if li.Part != LanesLive {
			assert.Nil(t, li.Change, what)
			continue
		}
		assert.Equal(t, uint32(DefaultLanesLiveShares), li.LiveShares, what)
		require.NotNil(t, li.Change, what)
		c := li.Change
		assert.True(t, c.OK, "%s: %+v", what, c)
		assert.GreaterOrEqual(t, c.At, cfg.Duration/2, what)
		assert.Less(t, c.At, cfg.Duration, what)
		var before, after int
		for _, w := range li.Series {
			switch {
			case w.Start+li.Window <= c.At:
				before++
			case w.Start >= c.At:
				after++
			}
		}
		assert.GreaterOrEqual(t, before, 2, "%s: windows before the change", what)
		assert.GreaterOrEqual(t, after, 2, "%s: windows after the change", what)
	}
	assert.Equal(t, []key{
		{"nethttp", LanesOneLane}, {"nethttp", LanesAlone},
		{"sluice", LanesOneLane}, {"sluice", LanesInBackground}, {"sluice", LanesLive}, {"sluice", LanesAlone},
	}, got)
}

func TestLanesChecksAndDefaults(t *testing.T) {
	suite := &bench.SuiteConfig{}
	var c Lanes
	require.NoError(t, c.Check(suite))
	assert.Equal(t, Lanes{
		Interactive: time.Millisecond, Batch: 20 * time.Millisecond, Slice: 500 * time.Microsecond,
		Multiple: 0.8, BatchMultiple: 2, Priority: 2, Shares: 11, LiveShares: 100, Window: 100 * time.Millisecond,
	}, c)
	assert.Equal(t, 8, c.batchConns(2))
	c.BatchConns = 3
	assert.Equal(t, 3, c.batchConns(2))

	for _, bad := range []Lanes{
		{Multiple: -1},
		{BatchMultiple: -2},
		{Batch: time.Millisecond, Slice: 2 * time.Millisecond},
		{Shares: lanes.MaxShares + 1},
		{Window: -time.Second},
	} {
		assert.Error(t, bad.Check(suite), "%+v", bad)
	}
	assert.ErrorContains(t, (&Lanes{}).Check(&bench.SuiteConfig{TLS: true}), "-tls")
	assert.ErrorContains(t, (&Lanes{}).Check(&bench.SuiteConfig{Clients: 4}), "-clients")
}

// Targets without lanes run the parts without a lane only.
func TestLanesPointsRunOn(t *testing.T) {
	c := &Lanes{}
	for _, p := range c.Points(&bench.SuiteConfig{}) {
		assert.True(t, c.RunsOn(p, "sluice"), p.Part)
		assert.True(t, c.RunsOn(p, "sluice-half"), p.Part)
		assert.Equal(t, p.Part == LanesOneLane || p.Part == LanesAlone, c.RunsOn(p, "nethttp"), p.Part)
	}
}

// The shares and series come from the completions at the generator and
// from the target's log, each in the window it ended in.
func TestLanesDetailFill(t *testing.T) {
	const w = 100 * time.Millisecond
	series := func(done ...int64) []load.Bucket {
		out := make([]load.Bucket, len(done))
		for i, d := range done {
			out[i] = load.Bucket{Start: time.Duration(i) * w, Completed: d}
		}
		return out
	}
	ires := &load.Result{Duration: 4 * w, Series: series(100, 80, 60, 40)}
	bres := &load.Result{Offered: 70, Duration: 4 * w, Series: series(1, 2, 3, 4)}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// The target's log began 20 ms before the run, in 10 ms buckets: the
	// buckets ending a window's work are the 10 from 2+10i.
	work := &WorkSeries{Origin: t0.Add(-20 * time.Millisecond), Bucket: 10 * time.Millisecond}
	for k := range 44 {
		work.Batch = append(work.Batch, int64(time.Millisecond))
		work.Interactive = append(work.Interactive, int64(k)*int64(time.Microsecond))
	}
	li := &LanesDetail{Workers: 2, Interactive: time.Millisecond, Batch: 20 * time.Millisecond, Window: w}
	li.fill(ires, bres, work, t0)

	assert.Equal(t, int64(280), li.InteractiveDone)
	assert.Equal(t, int64(10), li.BatchDone)
	assert.Equal(t, int64(70), li.BatchOffered)
	assert.InDelta(t, 280*0.001/(0.4*2), li.InteractiveShare, 1e-9)
	assert.InDelta(t, 10*0.020/(0.4*2), li.BatchShare, 1e-9)
	require.Len(t, li.Series, 4)
	for i, lw := range li.Series {
		assert.Equal(t, time.Duration(i)*w, lw.Start)
		assert.InDelta(t, float64(ires.Series[i].Completed)*0.001/0.2, lw.Interactive, 1e-9, "window %d", i)
		assert.InDelta(t, float64(bres.Series[i].Completed)*0.020/0.2, lw.Batch, 1e-9, "window %d", i)
		assert.InDelta(t, 10*0.001/0.2, lw.TargetBatch, 1e-9, "window %d: ten buckets of 1 ms", i)
		var want float64
		for k := 2 + 10*i; k < 12+10*i; k++ {
			want += float64(k) * 1e-6
		}
		assert.InDelta(t, want/0.2, lw.TargetInteractive, 1e-9, "window %d", i)
	}
	assert.InDelta(t, 40*0.001/(0.4*2), li.TargetBatchShare, 1e-9, "the buckets before the run and after its window are left out")

	// Without the batch, or the target's log, those figures stay zero.
	li = &LanesDetail{Workers: 1, Interactive: time.Millisecond, Batch: 20 * time.Millisecond, Window: w}
	li.fill(ires, nil, nil, t0)
	assert.Zero(t, li.BatchDone)
	assert.Zero(t, li.TargetInteractiveShare)
	assert.InDelta(t, 280*0.001/0.4, li.InteractiveShare, 1e-9)
}

const lanesWindow = 100 * time.Millisecond

// lanesSeries returns windows of the given target-side batch shares, the
// interactive ones making up 0.9 with them, and the request-side batch
// ones in fifths, a fifth up every other window (a 20 ms request is a fifth
// of a 100 ms window on one worker).
func lanesSeries(batch ...float64) []LanesWindow {
	out := make([]LanesWindow, len(batch))
	for i, b := range batch {
		out[i] = LanesWindow{
			Start: time.Duration(i) * lanesWindow, TargetBatch: b, TargetInteractive: 0.9 - b,
			Batch: float64(int(b*5)+i%2) / 5, Interactive: 0.9 - b,
		}
	}
	return out
}

// lanesRun builds a lanes sample of one part.
func lanesSample(t *testing.T, target, part string, repeat int, p99, batchShare float64) bench.Sample {
	s := bench.Sample{
		Scenario: "lanes", Shape: LanesShape, Handler: bench.HandlerSpec{CPU: time.Millisecond},
		Target: target, Repeat: repeat, Capacity: 1000, Multiple: 0.8,
		Rates:   bench.Rates{Offered: 800, Goodput: 790, Failed: 10},
		Latency: bench.Percentiles{P50: p99 / 4, P99: p99},
	}
	li := &LanesDetail{
		Part: part, Workers: 1, Interactive: time.Millisecond, Batch: 20 * time.Millisecond, Slice: 500 * time.Microsecond,
		InteractiveDone: 7900, InteractiveShare: 0.79, TargetInteractiveShare: 0.8, Window: lanesWindow,
		HostCPU: 1.1, OtherCPU: 0.1,
	}
	if part != LanesAlone {
		li.BatchRate, li.BatchConns, li.BatchOffered = 100, 4, 1000
		li.BatchDone = int64(batchShare * 500) // 20 ms each over 10 s
		li.BatchShare, li.TargetBatchShare = batchShare, batchShare+0.01
	}
	if part == LanesInBackground || part == LanesLive {
		li.Priority, li.Shares = 2, 10
	}
	shares := make([]float64, 100)
	for i := range shares {
		shares[i] = batchShare
	}
	if part == LanesLive {
		li.LiveShares = 50
		// The change at 5.05 s; the share at 0.33 from 5.3 s, but for a
		// stray window at 5.5 s in the first repeat.
		for i := 50; i < 100; i++ {
			shares[i] = 0.33
		}
		shares[51], shares[52] = 0.25, 0.28
		if repeat == 0 {
			shares[55] = 0.2
		}
		li.Change = &LanesChange{At: 5050 * time.Millisecond, Took: 2 * time.Millisecond, Attempts: 1, OK: true}
	}
	if part == LanesAlone {
		shares = make([]float64, 100)
	}
	li.Series = lanesSeries(shares...)
	if strings.HasPrefix(target, "sluice") {
		s.Placement = &bench.Placement{Workers: 1}
	}
	require.NoError(t, s.SetDetail(li))
	return s
}

// lanesSweep is a sweep sample beside the lanes ones.
func lanesSweep() bench.Sample {
	return bench.Sample{Scenario: "sweep", Shape: "cpu", Target: "sluice", Capacity: 1000, Multiple: 2,
		Rates: bench.Rates{Offered: 2000, Goodput: 900, Rejected: 1100}, Latency: bench.Percentiles{P50: 1, P99: 5}}
}

func lanesReport(t *testing.T) *bench.Report {
	var samples []bench.Sample
	for r := range 3 {
		samples = append(samples,
			lanesSample(t, "sluice", LanesOneLane, r, 90, 0.4),
			lanesSample(t, "sluice", LanesInBackground, r, 10+float64(r), 0.2),
			lanesSample(t, "sluice", LanesLive, r, 30, 0.25),
			lanesSample(t, "sluice", LanesAlone, r, 9, 0),
		)
		flood := lanesSample(t, "nethttp", LanesOneLane, r, 200+float64(r), 0.24)
		if r == 1 {
			d := detail[LanesDetail](t, &flood)
			d.HostCPU = -1 // unknown
			require.NoError(t, flood.SetDetail(d))
		}
		samples = append(samples, flood)
		alone := lanesSample(t, "nethttp", LanesAlone, r, 20, 0)
		if r == 2 {
			alone.Behind, alone.MaxLag = true, 50*time.Millisecond
			alone.Latency.P99 = 1000
		}
		samples = append(samples, alone)
	}
	return &bench.Report{Command: "sluice bench -scenarios lanes", Machine: "2 CPUs", Deadline: time.Second, Repeats: 3, Samples: samples}
}

func TestLanesSummarize(t *testing.T) {
	c := &Lanes{}
	rows, err := c.Summarize(lanesReport(t))
	require.NoError(t, err)
	require.Len(t, rows, 2)
	s, n := rows[0], rows[1]
	assert.Equal(t, "sluice", s.Target)
	assert.Equal(t, "floating", s.Placement)
	assert.Equal(t, 1, s.Workers)
	assert.Equal(t, 1000.0, s.Capacity)
	assert.Len(t, s.Parts, 4)
	bg := s.Parts[LanesInBackground]
	assert.Equal(t, 3, bg.Runs)
	assert.Equal(t, 11.0, bg.P99)
	assert.InDelta(t, 790.0/800, bg.GoodputFrac, 1e-9)
	assert.InDelta(t, 10.0, bg.BatchRate, 1e-9, "100 batch requests over the 10 s of the series")
	assert.Equal(t, 0.2, bg.BatchShare)
	assert.InDelta(t, 0.21, bg.TargetBatchShare, 1e-9)
	assert.InDelta(t, 11.0/9, s.P99Ratio, 1e-9)
	require.Len(t, s.Pairs, 3)
	for i, pr := range s.Pairs {
		assert.Equal(t, LanesPair{Repeat: i, Flooded: 10 + float64(i), Alone: 9, FloodedOther: 0.1, AloneOther: 0.1}, pr)
		assert.InDelta(t, (10+float64(i))/9, pr.Ratio(), 1e-9)
	}
	assert.InDelta(t, 0.1, bg.OtherCPU, 1e-9)

	live := s.Parts[LanesLive]
	assert.Equal(t, 3, live.Changed)
	assert.Equal(t, 5050*time.Millisecond, live.ChangeAt)
	assert.InDelta(t, 0.25, live.BatchBefore, 1e-9)
	assert.InDelta(t, 0.33, live.BatchAfter, 1e-9)
	assert.Equal(t, 250*time.Millisecond, live.Reach, "the window at 5.3 s")
	assert.Equal(t, []time.Duration{250 * time.Millisecond, 250 * time.Millisecond, 250 * time.Millisecond}, live.Settles,
		"the stray window of the first repeat moves no second's mean out of the band")
	assert.Equal(t, 250*time.Millisecond, live.Settle)
	assert.Equal(t, 3, live.Settled)
	assert.Equal(t, [3]int{3 * 47, 0, 1}, [3]int{live.Windows, live.Above, live.Below}, "from 5.3 s, the stray window (0.2) of the first repeat")
	assert.Equal(t, LanesNever, live.SettleRequests, "requests count in fifths: 0.2 and 0.4 are never within 10% of their mean")
	assert.Zero(t, live.SettledRequests)

	assert.Equal(t, "nethttp", n.Target)
	assert.Len(t, n.Parts, 2)
	alone := n.Parts[LanesAlone]
	assert.Equal(t, 2, alone.Runs)
	assert.Equal(t, 1, alone.Behind)
	assert.Equal(t, 20.0, alone.P99, "the behind run is left out")
	assert.InDelta(t, 201.0/20, n.P99Ratio, 1e-9, "one-lane against alone")
	require.Len(t, n.Pairs, 2, "the repeat whose alone run was behind is left out")
	assert.Equal(t, -1.0, n.Pairs[1].FloodedOther, "unknown")
	assert.InDelta(t, 0.1, n.Parts[LanesOneLane].OtherCPU, 1e-9, "the median of those known")

	assert.Equal(t, rows, c.Rows(lanesReport(t)), "the JSON rows")
	assert.Nil(t, c.Rows(&bench.Report{Samples: []bench.Sample{lanesSweep()}}))
	assert.Nil(t, c.Rows(nil))
}

func TestLanesSettle(t *testing.T) {
	get := func(w LanesWindow) float64 { return w.TargetBatch }
	// Three windows at 0.1, the change at 250 ms, then 0.3, and 0.5 with
	// single windows off by more than 10% (0.4, 0.6) that a second's mean
	// absorbs.
	shares := []float64{0.1, 0.1, 0.1, 0.3}
	for i := range 30 {
		v := 0.5
		switch i {
		case 4:
			v = 0.4
		case 12:
			v = 0.6
		}
		shares = append(shares, v)
	}
	series := lanesSeries(shares...)
	st := LanesSettle(series, lanesWindow, 250*time.Millisecond, get)
	assert.InDelta(t, 0.1, st.Before, 1e-9, "the windows wholly before")
	assert.InDelta(t, 0.5, st.Final, 1e-9, "the last half of those after")
	assert.Equal(t, 150*time.Millisecond, st.Reach, "the first window at 0.5")
	assert.Equal(t, 150*time.Millisecond, st.Settle, "every second's mean is within 10% from there on")
	assert.Equal(t, [3]int{30, 1, 1}, [3]int{st.Windows, st.Above, st.Below}, "0.6 above, 0.4 below")

	// A second of 0.39 after the first windows at 0.5: the share holds
	// only once no second's mean is below 0.45, from the span of windows
	// 10 to 19 (five of them low, and the 0.6).
	for i := 5; i < 15; i++ {
		series[i].TargetBatch = 0.39
	}
	st = LanesSettle(series, lanesWindow, 250*time.Millisecond, get)
	assert.InDelta(t, 0.5, st.Final, 1e-9)
	assert.Equal(t, 150*time.Millisecond, st.Reach)
	assert.Equal(t, 750*time.Millisecond, st.Settle)

	// The last second's mean out of the band: it never holds.
	for i := 24; i < 34; i++ {
		series[i].TargetBatch = 0.7
	}
	st = LanesSettle(series, lanesWindow, 250*time.Millisecond, get)
	assert.Equal(t, LanesNever, st.Settle)

	st = LanesSettle(series[:10], lanesWindow, 250*time.Millisecond, get)
	assert.Equal(t, LanesNever, st.Settle, "less than a second after the change")
	st = LanesSettle(series, lanesWindow, 10*time.Second, get)
	assert.Equal(t, LanesNever, st.Settle, "no window after the change")
	assert.Equal(t, LanesNever, st.Reach)
	st = LanesSettle(lanesSeries(0, 0, 0), lanesWindow, 0, get)
	assert.Equal(t, LanesNever, st.Settle, "nothing to settle at")
}

func TestLanesChecks(t *testing.T) {
	c := &Lanes{}
	rows, err := c.Summarize(lanesReport(t))
	require.NoError(t, err)
	checks := LanesChecks(rows)
	require.Len(t, checks, 4)
	for _, ch := range checks {
		assert.True(t, ch.Known, ch.What)
	}
	assert.False(t, checks[0].Pass, "p99 1.22x of alone")
	assert.Contains(t, checks[0].Value, "1.22x")
	assert.True(t, checks[1].Pass, "20%")
	assert.Contains(t, checks[1].Value, "20.0%")
	assert.True(t, checks[2].Pass, "settled after 250 ms")
	assert.Contains(t, checks[2].Value, "250ms (per run: 250ms, 250ms, 250ms")
	assert.True(t, checks[3].Info)
	assert.Contains(t, checks[3].What, "nethttp")
	assert.Contains(t, checks[3].Value, "201 ms")

	// Without the sluice target the first three are unknown.
	rows, err = c.Summarize(&bench.Report{Samples: []bench.Sample{
		lanesSample(t, "nethttp", LanesOneLane, 0, 200, 0.24),
	}})
	require.NoError(t, err)
	checks = LanesChecks(rows)
	require.Len(t, checks, 4)
	for _, ch := range checks[:3] {
		assert.False(t, ch.Known, ch.What)
		assert.Equal(t, "not measured", ch.Value)
	}
}

func TestLanesReport(t *testing.T) {
	c := &Lanes{}
	var buf bytes.Buffer
	require.NoError(t, WriteReport(&buf, lanesReport(t), All()))
	out := buf.String()
	assert.Contains(t, out, "Command:  sluice bench -scenarios lanes")
	assert.NotContains(t, out, "no samples", "the lanes are the report")
	assert.Contains(t, out, "batch offered at 100/s (C_b = workers / 20ms = 50/s) on 4 connections of its own")
	assert.Contains(t, out, "background lane: priority 2, 10 shares; live: 10 -> 50 shares")
	assert.Equal(t, []string{"sluice", "background", "1", "floating", "1000", "800", "0.988", "2.75", "11.0", "10.0", "20.0%", "79.0%", "21.0%", "80.0%", "0.10", "3/0"},
		lineOf(out, "sluice", "background"))
	assert.Equal(t, []string{"nethttp", "alone", "1", "1000", "800", "0.988", "5.00", "20.0", "0.0", "0.0%", "79.0%", "0.0%", "80.0%", "0.10", "2/1"},
		lineOf(out, "nethttp", "alone"))
	assert.Nil(t, lineOf(out, "nethttp", "live"), "no lanes on net/http")
	assert.Contains(t, out, "sluice live: change at 5.05 s; batch share (in target) 25.0% before, 33.0% after (final mean), first reached after 250ms")
	assert.Contains(t, out, "  sluice background: 1.22x; per repeat:\n"+
		"    #0 1.11x (10.0 ms against 9.00 ms; others' CPU 0.10, 0.10)\n"+
		"    #1 1.22x (11.0 ms against 9.00 ms; others' CPU 0.10, 0.10)\n")
	assert.Contains(t, out, "  FAIL  interactive p99 with the batch in the background lane within 20% of alone")
	assert.Contains(t, out, "  PASS  the batch in the background lane gets at least 9% of the CPU")
	assert.Contains(t, out, "  PASS  after the live change")
	assert.Contains(t, out, "    #1 10.05x (201 ms against 20.0 ms; others' CPU ?, 0.10)\n")
	assert.Contains(t, out, "  INFO  nethttp's interactive p99 under the same flood: 201 ms (alone 20.0 ms, 10.05x;")

	// Beside other scenarios, the main table comes first.
	rep := lanesReport(t)
	rep.Samples = append(rep.Samples, lanesSweep())
	buf.Reset()
	require.NoError(t, WriteReport(&buf, rep, All()))
	out = buf.String()
	sweep, lanes := strings.Index(out, "sweep, shape cpu"), strings.Index(out, "lanes: /interactive")
	assert.True(t, sweep > 0 && lanes > sweep, "sweep at %d, lanes at %d", sweep, lanes)
	assert.Empty(t, report.Summarize(lanesReport(t), TableNames(All())), "the lanes samples have a table of their own")

	buf.Reset()
	require.NoError(t, c.WriteReport(&buf, &bench.Report{}))
	assert.Empty(t, buf.String())
	require.NoError(t, c.WriteReport(&buf, nil))
	assert.Empty(t, buf.String())
}

func TestLanesPlots(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plots")
	c := &Lanes{}
	paths, err := c.Plots(dir, lanesReport(t))
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, LanesPlotName)}, paths)
	info, err := os.Stat(paths[0])
	require.NoError(t, err)
	assert.Positive(t, info.Size())

	rep := lanesReport(t)
	rep.Samples = rep.Samples[:2] // no live run
	paths, err = c.Plots(dir+"2", rep)
	require.NoError(t, err)
	assert.Empty(t, paths)
	assert.NoDirExists(t, dir+"2")

	runs, err := detailedRuns[LanesDetail](lanesReport(t), c.Name())
	require.NoError(t, err)
	s, ok := liveRun(runs)
	require.True(t, ok)
	assert.Equal(t, 0, s.Repeat, "the first repeat")
}

// TestLanesReportsAnOldReport reads a sample written before the lanes
// scenario kept its figures in Sample.Detail: they were under "lanes".
func TestLanesReportsAnOldReport(t *testing.T) {
	s := lanesSample(t, "sluice", LanesInBackground, 0, 10, 0.2)
	back := asOldSample(t, s, "lanes")
	rows, err := (&Lanes{}).Summarize(&bench.Report{Samples: []bench.Sample{back}})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, 0.2, rows[0].Parts[LanesInBackground].BatchShare)
}
