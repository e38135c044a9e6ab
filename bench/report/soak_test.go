package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
)

// soakRun builds a soak sample of target: 6 buckets of 1 s at C 100,
// settling at 2 s, with ok[i] OK answers in bucket i, descriptors growing
// by grow a second, and its checks evaluated.
func soakRun(target string, ok []int64, grow int) bench.Sample {
	si := &bench.SoakInfo{
		Duration: 6 * time.Second, Bucket: time.Second, Settle: 2 * time.Second, PanicEvery: 100,
		ChaosMix: bench.ChaosMix{Slowloris: 2, Flood: 1},
		Chaos: bench.ChaosStats{
			"slowloris": {Conns: 4, ServerClosed: 2, CutMin: 10 * time.Second, CutMax: 10100 * time.Millisecond},
			"flood":     {Conns: 3, Requests: 30, Status: map[int]int64{200: 20, 503: 10}},
		},
		Rules: bench.DefaultSoakRules,
		Stop:  bench.StopInfo{Took: time.Millisecond, Child: &bench.ChildExit{GoroutinesBefore: 1, GoroutinesAfter: 1, FDsBefore: 9, FDsAfter: 9}},
	}
	s := bench.Sample{Scenario: bench.ScenarioSoak, Shape: "io", Handler: bench.HandlerSpec{CPU: time.Millisecond, DB: 10 * time.Millisecond},
		Target: target, Capacity: 100, Multiple: 5, Soak: si}
	for i, n := range ok {
		s.Series = append(s.Series, bench.Bucket{Start: time.Duration(i) * time.Second, OK: n})
	}
	for k := 0; k <= 6; k++ {
		r := bench.Resources{At: time.Duration(k) * time.Second, Up: true, FDs: 300 + grow*k, Goroutines: 20, RSS: 24 << 20}
		if k == 0 {
			r.FDs, r.Goroutines, r.RSS = 12, 4, 12<<20
		}
		si.Resources = append(si.Resources, r)
	}
	si.Drained = bench.Resources{At: 200 * time.Millisecond, Up: true, FDs: 12, Goroutines: 20}
	si.Checks = bench.EvaluateSoak(&s)
	return s
}

func soakReport() *bench.Report {
	return &bench.Report{Samples: []bench.Sample{
		soakRun("sluice", []int64{90, 80, 95, 91, 88, 92}, 0),
		soakRun("nethttp", []int64{50, 0, 10, 0, 0, 30}, 300),
	}}
}

func TestSummarizeSoak(t *testing.T) {
	rows := SummarizeSoak(soakReport())
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
	assert.Equal(t, []string{bench.CheckGoodput, bench.CheckFDs}, n.Failed)

	assert.Nil(t, SummarizeSoak(nil))
	assert.Nil(t, SummarizeSoak(sweepReport()), "no soak sample")
}

func TestWriteSoak(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteSoak(&buf, soakReport()))
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

	rep := soakReport()
	rep.Samples[0].Behind = true
	buf.Reset()
	require.NoError(t, WriteSoak(&buf, rep))
	assert.Contains(t, buf.String(), "sluice *")
	assert.Contains(t, buf.String(), "fell behind its schedule")

	buf.Reset()
	require.NoError(t, WriteSoak(&buf, sweepReport()))
	assert.Empty(t, buf.String(), "nothing without soak samples")
	assert.Error(t, WriteSoak(&buf, nil))
}

func TestDescribePanicsAndMix(t *testing.T) {
	assert.Equal(t, "a handler that never panics", describePanics(0))
	assert.Equal(t, "a handler that panics on every 2nd request (50%)", describePanics(2))
	assert.Equal(t, "a handler that panics on every 11th request (9.09%)", describePanics(11))
	assert.Equal(t, "a handler that panics on every 21st request (4.76%)", describePanics(21))
	assert.Equal(t, "no chaos clients", describeMix(bench.ChaosMix{}))
	assert.True(t, strings.HasPrefix(describeMix(bench.DefaultChaosMix), "32 chaos clients (16 slowloris, 4 noread"))
}

func TestSoakPlot(t *testing.T) {
	dir := t.TempDir()
	rep := soakReport()
	rep.Samples[1].Behind = true
	paths, err := Plots(dir, rep)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "soak-io.png")}, paths)
	info, err := os.Stat(paths[0])
	require.NoError(t, err)
	assert.Positive(t, info.Size())
}
