package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
)

// shedRun builds a shed sample over 1 s buckets: 2 s low, 4 s high, 3 s
// low, 100 requests a second low and 300 high (C = 100/s). The target
// starts refusing refuseFrom seconds into the overload, refusing half of
// each bucket from then on, and the requests it admits in the overload
// before that fail; after the step down it refuses 20 of each bucket for
// refuseAfter seconds.
func shedRun(target string, repeat, refuseFrom, refuseAfter int, reasons string) bench.Sample {
	s := bench.Sample{
		Scenario: bench.ScenarioShed, Shape: "io", Handler: bench.HandlerSpec{CPU: time.Millisecond, DB: 10 * time.Millisecond},
		Target: target, Repeat: repeat, Capacity: 100, Multiple: 3,
		Latency: bench.Percentiles{P99: float64(10 * (repeat + 1))},
		Step:    &bench.StepInfo{Low: 1, High: 3, Up: 2 * time.Second, Down: 6 * time.Second, End: 9 * time.Second},
		Server:  json.RawMessage(reasons),
	}
	for i := range 9 {
		b := bench.Bucket{Start: time.Duration(i) * time.Second, Offered: 100}
		switch {
		case i >= 2 && i < 6:
			b.Offered = 300
			if i-2 >= refuseFrom {
				b.Rejected, b.OK = 150, 150
			} else {
				b.Failed, b.OK = 250, 50
			}
		case i >= 6 && i-6 < refuseAfter:
			b.Rejected, b.OK = 20, 80
		default:
			b.OK = 100
		}
		s.Series = append(s.Series, b)
	}
	s.Rates = bench.Rates{Offered: 1, Goodput: 1}
	return s
}

func TestShedMetrics(t *testing.T) {
	m, ok := ShedMetrics(shedRun("sluice-cpu", 0, 2, 2, ""))
	require.True(t, ok)
	assert.Equal(t, Shed{
		FirstRefusal: 3 * time.Second, Refused: true,
		Goodput:       (50 + 50 + 150 + 150) / 4.0 / 100,
		Late:          500.0 / 1200,
		RefusedDuring: 300.0 / 1200,
		RefusedAfter:  40.0 / 300,
		RefusingFor:   2 * time.Second,
	}, m)

	m, ok = ShedMetrics(shedRun("sluice-busy", 0, 0, 0, ""))
	require.True(t, ok)
	assert.Equal(t, time.Second, m.FirstRefusal, "the first bucket of the overload")
	assert.Zero(t, m.Late)
	assert.Zero(t, m.RefusingFor)

	m, ok = ShedMetrics(shedRun("nethttp", 0, 9, 0, ""))
	require.True(t, ok)
	assert.False(t, m.Refused)
	assert.Zero(t, m.FirstRefusal)

	// A target that refuses a fifth of the light load refuses as much
	// after the step down: that is not refusing on, and its first refusal
	// is the first bucket above 20% + 10 points.
	r := shedRun("sluice-busy", 0, 1, 0, "")
	for i := range r.Series {
		if b := &r.Series[i]; b.Start < 2*time.Second || b.Start >= 6*time.Second {
			b.Rejected, b.OK = 20, 80
		} else if i == 2 {
			b.Rejected, b.OK, b.Failed = 80, 50, 170 // 27%: below the margin
		}
	}
	m, ok = ShedMetrics(r)
	require.True(t, ok)
	assert.InDelta(t, 0.2, m.RefusedBefore, 1e-12)
	assert.InDelta(t, 0.2, m.RefusedAfter, 1e-12)
	assert.Equal(t, 2*time.Second, m.FirstRefusal, "the second bucket of the overload, at 50%")
	assert.Zero(t, m.RefusingFor)

	_, ok = ShedMetrics(bench.Sample{Scenario: bench.ScenarioShed})
	assert.False(t, ok, "no step, no series")
}

func shedReport() *bench.Report {
	var samples []bench.Sample
	for r := range 3 {
		samples = append(samples,
			shedRun("sluice-busy", r, 0, 0, fmt.Sprintf(`{"Admitted":9,"RejectedBy":{"busy":%d}}`, 600+r)),
			shedRun("sluice-cpu", r, 1+r, 2, `{"Admitted":9,"RejectedBy":{"cpu":300}}`),
		)
	}
	samples[5] = behind(samples[5])
	samples[0].Shed = &bench.ShedInfo{HostCPU: 1.9, OtherCPU: 0.5} // left out
	samples[2].Shed = &bench.ShedInfo{HostCPU: 1.5, OtherCPU: 0.05}
	samples = append(samples, shedRun("sluice-busy", 3, 0, 0, `{"RejectedBy":{"busy":599}}`))
	samples[3].Server = json.RawMessage(`{"RejectedBy":{"cpu":500,"queue-closed":3}}`)
	return &bench.Report{Command: "sluice bench -scenarios shed", Deadline: time.Second, Repeats: 3, Samples: samples}
}

func TestSummarizeShed(t *testing.T) {
	rows := SummarizeShed(shedReport())
	require.Len(t, rows, 2)
	b, c := rows[0], rows[1]
	assert.Equal(t, "sluice-busy", b.Target)
	assert.Equal(t, 3, b.Runs)
	assert.Equal(t, 1, b.Disturbed)
	assert.Equal(t, time.Second, b.Shed.FirstRefusal)
	assert.Equal(t, 30.0, b.P99, "repeats 1 to 3; 0 was disturbed")
	assert.Equal(t, map[string]float64{"busy": 601}, b.RefusedBy, "599, 601, 602")
	assert.Equal(t, 100.0, b.Capacity)
	assert.Equal(t, 3.0, b.High)
	assert.Equal(t, 4*time.Second, b.Down-b.Up)

	assert.Equal(t, "sluice-cpu", c.Target)
	assert.Equal(t, 2, c.Runs)
	assert.Equal(t, 1, c.Behind)
	assert.Equal(t, 2500*time.Millisecond, c.Shed.FirstRefusal, "median of 2 s and 3 s; the behind run left out")
	assert.Equal(t, 2*time.Second, c.Shed.RefusingFor)
	assert.Equal(t, map[string]float64{"cpu": 400, "queue-closed": 1.5}, c.RefusedBy, "a run without a reason counts 0 for it")
	assert.Nil(t, SummarizeShed(sweepReport()))
	assert.Nil(t, SummarizeShed(nil))
}

func TestWriteShed(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteShed(&buf, shedReport()))
	out := buf.String()
	t.Log(out)
	assert.Contains(t, out, "shed: one signal alone against a step of overload, shape io (cpu 1ms, db 10ms): 1x of C for 2s, 3x for 4s, 1x for 3s (C = 100/s, sluice's capacity)")
	assert.Regexp(t, `sluice-busy +1\.00 s +1\.50 +0\.0 +50\.0 .* busy 601 +3/0/1`, out)
	assert.Regexp(t, `sluice-cpu +2\.50 s .* cpu 400, queue-closed 2 +2/1/0`, out)
	buf.Reset()
	require.NoError(t, WriteShed(&buf, sweepReport()))
	assert.Empty(t, buf.String())

	buf.Reset()
	require.NoError(t, WriteTable(&buf, shedReport()))
	assert.Contains(t, buf.String(), "shed: one signal alone")
	assert.NotContains(t, buf.String(), "no samples", "the shed table is the report's")
	assert.NotContains(t, buf.String(), "shed, shape", "not in the main table")

	buf.Reset()
	require.NoError(t, WriteJSON(&buf, shedReport()))
	var doc Document
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc))
	assert.Len(t, doc.Shed, 2)
	assert.Empty(t, doc.Summary)
}

func TestShedPlot(t *testing.T) {
	dir := t.TempDir()
	paths, err := Plots(dir, shedReport())
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "shed-io.png")}, paths)
}
