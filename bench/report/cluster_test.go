package report

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
)

// clusterRun builds a cluster sample of one part: served are the answers
// of the three backends, attempts the attempts per request (of 1000).
func clusterRun(part string, repeat int, good, p99, attempts float64, served ...int64) bench.Sample {
	s := bench.Sample{
		Scenario: bench.ScenarioCluster, Shape: bench.ClusterShape, Handler: bench.HandlerSpec{CPU: time.Millisecond},
		Target: "sluice", Repeat: repeat, Capacity: 1000, Multiple: 1.5, Requests: 1500 * 3,
		Rates:   bench.Rates{Offered: 1500, Goodput: good, Rejected: 1500 - good},
		Latency: bench.Percentiles{P50: p99 / 4, P99: p99},
		Cluster: &bench.ClusterInfo{Part: part, Requests: 1000, Attempts: int64(1000 * attempts), Amplification: attempts},
	}
	for i, n := range served {
		cpu := time.Millisecond
		if i == 2 {
			cpu *= 3
		}
		s.Cluster.Backends = append(s.Cluster.Backends, bench.ClusterBackend{Handler: bench.HandlerSpec{CPU: cpu}, Slow: i == 2, Sent: n, Served: n})
	}
	if part == bench.ClusterKill {
		s.Multiple = 0.4
		s.Rates = bench.Rates{Offered: 400, Goodput: 398, Failed: 2}
		s.Requests = 400 * 17
		s.Cluster.Kill = &bench.ClusterKillInfo{
			KilledAt: 10 * time.Second, ReturnedAt: 12 * time.Second, ProbeInterval: 5 * time.Second,
			Opened: true, OpenAfter: time.Duration(repeat+1) * 10 * time.Millisecond,
			Closed: repeat != 1, ClosedAfter: 3 * time.Second,
		}
		s.Classes = map[string]bench.ClassSample{
			bench.KillBefore: {Rates: bench.Rates{Offered: 200, Goodput: 200}, Latency: bench.Percentiles{P50: 3, P99: 20}},
			bench.KillDead:   {Rates: bench.Rates{Offered: 1, Goodput: 0.5, Failed: 0.5}, Latency: bench.Percentiles{P50: 3, P99: 4}},
			bench.KillOpen:   {Rates: bench.Rates{Offered: 150, Goodput: 150}, Latency: bench.Percentiles{P50: 4, P99: 30}},
		}
	}
	return s
}

func clusterReport() *bench.Report {
	var samples []bench.Sample
	for r := range 3 {
		naive := clusterRun(bench.ClusterNaive, r, 900, 990, 5, 1400, 1400, 700)
		if r == 0 {
			naive = behind(naive)
		}
		samples = append(samples,
			clusterRun(bench.ClusterNone, r, 950+float64(r), 80, 1, 1300, 1300, 700),
			naive,
			clusterRun(bench.ClusterSluice, r, 970, 60, 1.1, 1400, 1300, 600),
			clusterRun(bench.ClusterKill, r, 0, 0, 1.05, 1000, 3000, 1000),
		)
	}
	return &bench.Report{Command: "sluice bench -scenarios cluster", Deadline: time.Second, Repeats: 3, Samples: samples}
}

func TestSummarizeCluster(t *testing.T) {
	rows := SummarizeCluster(clusterReport())
	require.Len(t, rows, 4)
	var parts []string
	for _, r := range rows {
		parts = append(parts, r.Part)
		assert.Equal(t, "sluice", r.Target)
	}
	assert.Equal(t, bench.ClusterParts, parts)

	none, naive, sl, kill := rows[0], rows[1], rows[2], rows[3]
	assert.Equal(t, 3, none.Runs)
	assert.Equal(t, 1000.0, none.Capacity)
	assert.Equal(t, 951.0, none.Goodput)
	assert.InDelta(t, 0.951, none.GoodputFrac, 1e-9)
	assert.Equal(t, 1.0, none.Amplification)
	assert.InDeltaSlice(t, []float64{1300.0 / 3300, 1300.0 / 3300, 700.0 / 3300}, none.Served, 1e-9)
	assert.Nil(t, none.Kill)

	assert.Equal(t, 2, naive.Runs, "the behind run is left out")
	assert.Equal(t, 1, naive.Behind)
	assert.Equal(t, 5.0, naive.Amplification)
	assert.Equal(t, 990.0, naive.P99)
	assert.InDelta(t, 0.4, naive.RejectedFrac, 1e-9)

	assert.Equal(t, 1.1, sl.Amplification)
	assert.InDelta(t, 0.97, sl.GoodputFrac, 1e-9)

	require.NotNil(t, kill.Kill)
	k := kill.Kill
	assert.Equal(t, 0.4, kill.Multiple)
	assert.Equal(t, 3, k.Opened)
	assert.Equal(t, 20*time.Millisecond, k.OpenAfter, "the median of 10, 20 and 30 ms")
	assert.Equal(t, 2, k.Closed, "one run never closed")
	assert.Equal(t, 3*time.Second, k.ClosedAfter)
	assert.Equal(t, 5*time.Second, k.ProbeInterval)
	assert.InDelta(t, 200*17, k.Phases[bench.KillBefore].Requests, 1e-6)
	assert.Equal(t, 0.5, k.Phases[bench.KillDead].FailedFrac)
	assert.Equal(t, 30.0, k.Phases[bench.KillOpen].P99)
	assert.NotContains(t, k.Phases, bench.KillAfter)

	assert.Nil(t, SummarizeCluster(nil))
	assert.Empty(t, SummarizeCluster(sweepReport()))
}

func TestWriteCluster(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteCluster(&buf, clusterReport()))
	out := buf.String()
	assert.Contains(t, out, "busy 1ms a request, the last 3ms")
	assert.Contains(t, out, "1.5x of C offered open loop")
	for _, want := range [][]string{
		{"sluice", "none", "1000", "1500", "951", "0.951", "1.000"},
		{"sluice", "naive", "5.000", "990", "40/40/20", "2/1"},
		{"sluice", "sluice", "1.100", "0.970", "42/39/18", "3/0"},
	} {
		assert.NotNil(t, lineOf(out, want[0], want[1:]...), "a line with %q in:\n%s", want, out)
	}
	assert.Contains(t, out, "sluice: the breaker opened 20.0 ms after the kill (3 of 3 runs), closed 3000 ms after the return, 0.60 probe intervals (2 of 3 runs); runs 3/0")
	assert.NotNil(t, lineOf(out, "dead", "17", "50.0"), out)
	assert.NotNil(t, lineOf(out, "after", "0", "-"), out)

	// In the whole table, after the other scenarios' (none here).
	buf.Reset()
	require.NoError(t, WriteTable(&buf, clusterReport()))
	assert.Contains(t, buf.String(), "sent/offered")
	assert.NotContains(t, buf.String(), "no samples")

	buf.Reset()
	require.NoError(t, WriteCluster(&buf, sweepReport()))
	assert.Empty(t, buf.String())
	assert.Error(t, WriteCluster(&buf, nil))
}
