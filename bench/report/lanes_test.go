package report

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
)

const lanesWindow = 100 * time.Millisecond

// lanesSeries returns windows of the given target-side batch shares, the
// interactive ones making up 0.9 with them, and the request-side batch
// ones in fifths, a fifth up every other window (a 20 ms request is a fifth
// of a 100 ms window on one worker).
func lanesSeries(batch ...float64) []bench.LanesWindow {
	out := make([]bench.LanesWindow, len(batch))
	for i, b := range batch {
		out[i] = bench.LanesWindow{
			Start: time.Duration(i) * lanesWindow, TargetBatch: b, TargetInteractive: 0.9 - b,
			Batch: float64(int(b*5)+i%2) / 5, Interactive: 0.9 - b,
		}
	}
	return out
}

// lanesRun builds a lanes sample of one part.
func lanesRun(target, part string, repeat int, p99, batchShare float64) bench.Sample {
	s := bench.Sample{
		Scenario: bench.ScenarioLanes, Shape: bench.LanesShape, Handler: bench.HandlerSpec{CPU: time.Millisecond},
		Target: target, Repeat: repeat, Capacity: 1000, Multiple: 0.8,
		Rates:   bench.Rates{Offered: 800, Goodput: 790, Failed: 10},
		Latency: bench.Percentiles{P50: p99 / 4, P99: p99},
		Lanes: &bench.LanesInfo{
			Part: part, Workers: 1, Interactive: time.Millisecond, Batch: 20 * time.Millisecond, Slice: 500 * time.Microsecond,
			InteractiveDone: 7900, InteractiveShare: 0.79, TargetInteractiveShare: 0.8, Window: lanesWindow,
			HostCPU: 1.1, OtherCPU: 0.1,
		},
	}
	li := s.Lanes
	if part != bench.LanesAlone {
		li.BatchRate, li.BatchConns, li.BatchOffered = 100, 4, 1000
		li.BatchDone = int64(batchShare * 500) // 20 ms each over 10 s
		li.BatchShare, li.TargetBatchShare = batchShare, batchShare+0.01
	}
	if part == bench.LanesInBackground || part == bench.LanesLive {
		li.Priority, li.Shares = 2, 10
	}
	shares := make([]float64, 100)
	for i := range shares {
		shares[i] = batchShare
	}
	if part == bench.LanesLive {
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
		li.Change = &bench.LanesChange{At: 5050 * time.Millisecond, Took: 2 * time.Millisecond, Attempts: 1, OK: true}
	}
	if part == bench.LanesAlone {
		shares = make([]float64, 100)
	}
	li.Series = lanesSeries(shares...)
	if strings.HasPrefix(target, "sluice") {
		s.Placement = &bench.Placement{Workers: 1}
	}
	return s
}

func lanesReport() *bench.Report {
	var samples []bench.Sample
	for r := range 3 {
		samples = append(samples,
			lanesRun("sluice", bench.LanesOneLane, r, 90, 0.4),
			lanesRun("sluice", bench.LanesInBackground, r, 10+float64(r), 0.2),
			lanesRun("sluice", bench.LanesLive, r, 30, 0.25),
			lanesRun("sluice", bench.LanesAlone, r, 9, 0),
		)
		flood := lanesRun("nethttp", bench.LanesOneLane, r, 200+float64(r), 0.24)
		if r == 1 {
			flood.Lanes.HostCPU = -1 // unknown
		}
		samples = append(samples, flood)
		alone := lanesRun("nethttp", bench.LanesAlone, r, 20, 0)
		if r == 2 {
			alone = behind(alone)
			alone.Latency.P99 = 1000
		}
		samples = append(samples, alone)
	}
	return &bench.Report{Command: "sluice bench -scenarios lanes", Machine: "2 CPUs", Deadline: time.Second, Repeats: 3, Samples: samples}
}

func TestSummarizeLanes(t *testing.T) {
	rows := SummarizeLanes(lanesReport())
	require.Len(t, rows, 2)
	s, n := rows[0], rows[1]
	assert.Equal(t, "sluice", s.Target)
	assert.Equal(t, "floating", s.Placement)
	assert.Equal(t, 1, s.Workers)
	assert.Equal(t, 1000.0, s.Capacity)
	assert.Len(t, s.Parts, 4)
	bg := s.Parts[bench.LanesInBackground]
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

	live := s.Parts[bench.LanesLive]
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
	assert.Equal(t, Never, live.SettleRequests, "requests count in fifths: 0.2 and 0.4 are never within 10% of their mean")
	assert.Zero(t, live.SettledRequests)

	assert.Equal(t, "nethttp", n.Target)
	assert.Len(t, n.Parts, 2)
	alone := n.Parts[bench.LanesAlone]
	assert.Equal(t, 2, alone.Runs)
	assert.Equal(t, 1, alone.Behind)
	assert.Equal(t, 20.0, alone.P99, "the behind run is left out")
	assert.InDelta(t, 201.0/20, n.P99Ratio, 1e-9, "one-lane against alone")
	require.Len(t, n.Pairs, 2, "the repeat whose alone run was behind is left out")
	assert.Equal(t, -1.0, n.Pairs[1].FloodedOther, "unknown")
	assert.InDelta(t, 0.1, n.Parts[bench.LanesOneLane].OtherCPU, 1e-9, "the median of those known")

	assert.Nil(t, SummarizeLanes(&bench.Report{Samples: []bench.Sample{run(bench.ScenarioSweep, "sluice", 0, 1000, 2, 900, 0, 1)}}))
	assert.Nil(t, SummarizeLanes(nil))
}

func TestLanesSettle(t *testing.T) {
	get := func(w bench.LanesWindow) float64 { return w.TargetBatch }
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
	assert.Equal(t, Never, st.Settle)

	st = LanesSettle(series[:10], lanesWindow, 250*time.Millisecond, get)
	assert.Equal(t, Never, st.Settle, "less than a second after the change")
	st = LanesSettle(series, lanesWindow, 10*time.Second, get)
	assert.Equal(t, Never, st.Settle, "no window after the change")
	assert.Equal(t, Never, st.Reach)
	st = LanesSettle(lanesSeries(0, 0, 0), lanesWindow, 0, get)
	assert.Equal(t, Never, st.Settle, "nothing to settle at")
}

func TestLanesChecks(t *testing.T) {
	checks := LanesChecks(SummarizeLanes(lanesReport()))
	require.Len(t, checks, 4)
	for _, c := range checks {
		assert.True(t, c.Known, c.What)
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
	checks = LanesChecks(SummarizeLanes(&bench.Report{Samples: []bench.Sample{
		lanesRun("nethttp", bench.LanesOneLane, 0, 200, 0.24),
	}}))
	require.Len(t, checks, 4)
	for _, c := range checks[:3] {
		assert.False(t, c.Known, c.What)
		assert.Equal(t, "not measured", c.Value)
	}
}

func TestWriteLanes(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteLanesReport(&buf, lanesReport()))
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
	rep := lanesReport()
	rep.Samples = append(rep.Samples, run(bench.ScenarioSweep, "sluice", 0, 1000, 2, 900, 0, 1))
	buf.Reset()
	require.NoError(t, WriteLanesReport(&buf, rep))
	out = buf.String()
	sweep, lanes := strings.Index(out, "sweep, shape cpu"), strings.Index(out, "lanes: /interactive")
	assert.True(t, sweep > 0 && lanes > sweep, "sweep at %d, lanes at %d", sweep, lanes)
	assert.Empty(t, Summarize(lanesReport()), "the lanes samples have a table of their own")

	buf.Reset()
	require.NoError(t, WriteLanes(&buf, &bench.Report{}))
	assert.Empty(t, buf.String())
	assert.Error(t, WriteLanes(&buf, nil))
	assert.Error(t, WriteLanesReport(&buf, nil))
}

func TestLanesPlots(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plots")
	paths, err := LanesPlots(dir, lanesReport())
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, LanesPlotName)}, paths)
	assertPNG(t, paths[0])

	rep := lanesReport()
	rep.Samples = rep.Samples[:2] // no live run
	paths, err = LanesPlots(dir+"2", rep)
	require.NoError(t, err)
	assert.Empty(t, paths)
	assert.NoDirExists(t, dir+"2")

	s, ok := liveRun(lanesReport())
	require.True(t, ok)
	assert.Equal(t, 0, s.Repeat, "the first repeat")
}
