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

// strayRun builds a stray sample of one part.
func strayRun(target, part string, repeat int, offered, good, rej, p99 float64) bench.Sample {
	s := bench.Sample{
		Scenario: bench.ScenarioStray, Shape: "cpu", Handler: bench.HandlerSpec{CPU: time.Millisecond},
		Target: target, Repeat: repeat,
		Rates:   bench.Rates{Offered: offered, Goodput: good, Rejected: rej, Failed: offered - good - rej},
		Latency: bench.Percentiles{P50: p99 / 4, P99: p99},
		Stray:   &bench.StrayInfo{Part: part, Delay: time.Second},
	}
	if part != bench.StrayTrivial {
		s.Capacity, s.Multiple = 900, 2
	}
	if part != bench.StrayCPU {
		s.Stray.Rate = 2
		s.Stray.Calls = bench.Rates{Offered: 2, Goodput: 1.5}
	}
	if strings.HasPrefix(target, "sluice") {
		s.Placement = &bench.Placement{Workers: 2}
	}
	return s
}

func strayReport() *bench.Report {
	var samples []bench.Sample
	for r := range 3 {
		samples = append(samples,
			strayRun("sluice", bench.StrayTrivial, r, 500, 200+float64(r), 0, 990),
			strayRun("sluice", bench.StrayCPU, r, 1800, 900, 900, 80),
			strayRun("sluice", bench.StrayCPUWith, r, 1800, 300*float64(r+1), 1500-300*float64(r+1), 400),
			strayRun("nethttp", bench.StrayTrivial, r, 500, 500, 0, 3),
			strayRun("nethttp", bench.StrayCPU, r, 1800, 800, 0, 900),
		)
		with := strayRun("nethttp", bench.StrayCPUWith, r, 1800, 800, 0, 900)
		if r == 2 {
			with = behind(with)
		}
		samples = append(samples, with)
	}
	return &bench.Report{Command: "sluice bench -scenarios stray", Deadline: time.Second, Repeats: 3, Samples: samples}
}

func TestSummarizeStray(t *testing.T) {
	rows := SummarizeStray(strayReport())
	require.Len(t, rows, 2)
	s, n := rows[0], rows[1]
	assert.Equal(t, "sluice", s.Target)
	assert.Equal(t, "floating", s.Placement)
	assert.Equal(t, 3, s.Trivial.Runs)
	assert.Equal(t, 201.0, s.Trivial.Goodput)
	assert.Equal(t, 990.0, s.Trivial.P99)
	assert.Equal(t, 2.0, s.Trivial.CallsOffered)
	assert.Equal(t, 1.5, s.Trivial.CallsDone)
	assert.Equal(t, 900.0, s.Capacity)
	assert.Equal(t, 2.0, s.Multiple)
	assert.Equal(t, 900.0, s.CPU.Goodput)
	assert.Equal(t, 0.5, s.CPU.RejectedFrac)
	assert.Zero(t, s.CPU.CallsOffered)
	assert.Equal(t, 600.0, s.CPUWith.Goodput)
	assert.InDelta(t, 600.0/900, s.WithOverAlone, 1e-12, "the median of the repeats' ratios 1/3, 2/3, 1")

	assert.Equal(t, "nethttp", n.Target)
	assert.Equal(t, "", n.Placement)
	assert.Equal(t, 2, n.CPUWith.Runs)
	assert.Equal(t, 1, n.CPUWith.Behind)
	assert.Equal(t, 1.0, n.WithOverAlone, "the behind repeat is left out")

	assert.Nil(t, SummarizeStray(nil))
	assert.Nil(t, SummarizeStray(sweepReport()))
	assert.Empty(t, Summarize(strayReport()), "the stray scenario has tables of its own")
}

func TestWriteStray(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, strayReport()))
	out := buf.String()
	t.Log("\n" + out)
	assert.NotContains(t, out, "no samples")
	assert.Contains(t, out, "stray blocking: /stray calls a service that answers after 1s through a plain net/http client (holding its thread), 2 a second")
	assert.Contains(t, out, "/trivial beside the stray calls:")
	assert.Contains(t, out, "CPU-bound handler, shape cpu (cpu 1ms, db 0s), at 2x of C, alone and beside the stray calls:")
	fields := func(prefix string, nth int) string {
		seen := 0
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), prefix) {
				if seen == nth {
					return strings.Join(strings.Fields(l), " ")
				}
				seen++
			}
		}
		return ""
	}
	assert.Equal(t, "sluice floating 500 201 248 990 0.0 59.8 2 1.5 3/0", fields("sluice", 0))
	assert.Equal(t, "sluice 900 900 600 0.67 80.0 400 50.0 50.0 3/0, 3/0", fields("sluice", 1))
	assert.Equal(t, "nethttp 900 800 800 1.00 900 900 0.0 0.0 3/0, 2/1", fields("nethttp", 1))

	buf.Reset()
	require.NoError(t, WriteStray(&buf, sweepReport()))
	assert.Empty(t, buf.String())
	assert.Error(t, WriteStray(&buf, nil))
	assert.Len(t, NewDocument(strayReport()).Stray, 2)
}
