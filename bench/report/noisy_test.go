package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
)

// noisyRun builds a noisy sample of target at rate, with good answered in
// time, rej refused and the rest failed.
func noisyRun(target string, repeat int, rate, good, rej, p99, rqMax float64, place *bench.Placement) bench.Sample {
	return bench.Sample{
		Scenario: bench.ScenarioNoisy, Shape: "io", Handler: bench.HandlerSpec{CPU: time.Millisecond, DB: 10 * time.Millisecond},
		Target: target, Repeat: repeat,
		Rates:     bench.Rates{Offered: rate, Goodput: good, Rejected: rej, Failed: rate - good - rej},
		Latency:   bench.Percentiles{P50: 15, P99: p99},
		TargetCPU: 0.7,
		Noisy: &bench.NoisyInfo{Rate: rate, CPUs: []int{0, 1}, NeighbourCPU: 1, NeighbourNice: 10, NeighbourUse: 0.5,
			RunQueue: bench.RunQueue{Wait: 1, MaxThread: rqMax}},
		Placement: place,
	}
}

func noisyReport() *bench.Report {
	pinned := &bench.Placement{Workers: 2, CPUs: []int{0, 1}}
	floating := &bench.Placement{Workers: 2, Reason: "root cpuset"}
	return &bench.Report{Command: "sluice bench -scenarios noisy", Deadline: time.Second, Repeats: 3, Samples: []bench.Sample{
		noisyRun("sluice", 0, 800, 800, 0, 50, 0.3, floating),
		noisyRun("sluice-pinned", 0, 800, 700, 100, 150, 0.9, pinned),
		noisyRun("nethttp", 0, 800, 800, 0, 300, 0.4, nil),
		noisyRun("sluice", 1, 800, 780, 20, 60, 0.3, floating),
		noisyRun("sluice-pinned", 1, 800, 740, 60, 140, 0.8, pinned),
		noisyRun("nethttp", 1, 800, 790, 0, 280, 0.4, nil),
		noisyRun("sluice", 2, 800, 790, 10, 70, 0.3, floating),
		noisyRun("sluice-pinned", 2, 800, 720, 80, 160, 0.7, pinned),
		behind(noisyRun("nethttp", 2, 800, 100, 0, 900, 0.4, nil)),
		behind(noisyRun("sluice", 0, 1200, 1000, 200, 90, 0.3, floating)),
		behind(noisyRun("nethttp", 0, 1200, 900, 0, 900, 0.4, nil)),
	}}
}

func TestSummarizeNoisy(t *testing.T) {
	rows := SummarizeNoisy(noisyReport())
	require.Len(t, rows, 5)
	byKey := map[string]NoisyRow{}
	for _, r := range rows {
		byKey[r.Target+" "+formatMultiple(r.Rate)] = r
	}
	s := byKey["sluice 800"]
	assert.Equal(t, 3, s.Runs)
	assert.Equal(t, 790.0, s.Goodput, "the median")
	assert.Equal(t, 10.0, s.Rejected)
	assert.InDelta(t, 10.0/800, s.RejectedFrac, 1e-12)
	assert.Equal(t, 60.0, s.P99)
	assert.Equal(t, "floating", s.Placement)
	n := byKey["nethttp 800"]
	assert.Equal(t, 2, n.Runs)
	assert.Equal(t, 1, n.Behind)
	assert.Equal(t, 795.0, n.Goodput, "the median of the two kept runs")
	assert.Equal(t, "", n.Placement)
	assert.InDelta(t, 790.0/795, s.Ratio, 1e-12)
	assert.False(t, s.RatioIndicative)
	p := byKey["sluice-pinned 800"]
	assert.Equal(t, "pinned 0-1", p.Placement)
	assert.Equal(t, 0.8, p.MaxThreadWait)
	assert.InDelta(t, 720.0/795, p.Ratio, 1e-12)

	s12 := byKey["sluice 1200"]
	assert.True(t, s12.Indicative)
	assert.Equal(t, 0, s12.Runs)
	assert.Equal(t, 1, s12.Behind)
	assert.InDelta(t, 1000.0/900, s12.Ratio, 1e-12)
	assert.True(t, s12.RatioIndicative)

	// By rate, then target in order of appearance.
	var order []string
	for _, r := range rows {
		order = append(order, r.Target+" "+formatMultiple(r.Rate))
	}
	assert.Equal(t, []string{"sluice 800", "sluice-pinned 800", "nethttp 800", "sluice 1200", "nethttp 1200"}, order)

	assert.Nil(t, SummarizeNoisy(nil))
	assert.Nil(t, SummarizeNoisy(sweepReport()))
	for _, r := range Summarize(noisyReport()) {
		assert.NotEqual(t, bench.ScenarioNoisy, r.Scenario, "the noisy scenario has a table of its own")
	}
}

func TestWriteNoisy(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, noisyReport()))
	out := buf.String()
	t.Log("\n" + out)
	assert.NotContains(t, out, "no samples")
	assert.Contains(t, out, "noisy neighbour, shape io (cpu 1ms, db 10ms): targets on CPUs 0-1, a busy loop in another process on CPU 1 (nice 10")
	line := func(prefix string) string {
		for _, l := range strings.Split(out, "\n") {
			if norm := strings.Join(strings.Fields(l), " "); strings.HasPrefix(norm, prefix) {
				return norm
			}
		}
		return ""
	}
	assert.Equal(t, "sluice floating 800 790 0.99 1.2 0.0 15.0 60.0 0.70 0.50 1.00 0.30 3/0", line("sluice floating"))
	assert.Equal(t, "sluice-pinned pinned 0-1 800 720 0.91 10.0 0.0 15.0 150 0.70 0.50 1.00 0.80 3/0", line("sluice-pinned"))
	assert.Equal(t, "sluice* floating 1200 1000 1.11* 16.7 0.0 15.0 90.0 0.70 0.50 1.00 0.30 0/1", line("sluice* floating"))
	assert.Contains(t, out, "* after a target: the load generator fell behind")

	buf.Reset()
	require.NoError(t, WriteNoisy(&buf, sweepReport()))
	assert.Empty(t, buf.String(), "nothing without noisy samples")
	assert.Error(t, WriteNoisy(&buf, nil))

	doc := NewDocument(noisyReport())
	assert.Len(t, doc.Noisy, 5)
	assert.Empty(t, doc.Summary)
}
