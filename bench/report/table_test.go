package report

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
)

// behindBaselineReport is a demo's sweep in which every net/http run at 5x
// fell behind: sluice and net/http at 2x and 5x, two repeats.
func behindBaselineReport() *bench.Report {
	sw := "sweep"
	return &bench.Report{
		Deadline: time.Second,
		Repeats:  2,
		Samples: []bench.Sample{
			run(sw, "sluice", 0, 1000, 2, 980, 1000, 2),
			run(sw, "nethttp", 0, 1000, 2, 600, 0, 800),
			run(sw, "sluice", 0, 1000, 5, 900, 4050, 2),
			behind(run(sw, "nethttp", 0, 1000, 5, 400, 0, 900)),
			run(sw, "sluice", 1, 1000, 2, 1000, 1000, 2),
			run(sw, "nethttp", 1, 1000, 2, 700, 0, 800),
			run(sw, "sluice", 1, 1000, 5, 920, 4060, 2),
			behind(run(sw, "nethttp", 1, 1000, 5, 500, 0, 900)),
		},
	}
}

func TestSummarizeIndicativeRatio(t *testing.T) {
	rows := Summarize(behindBaselineReport(), tabled)
	s := find(t, rows, "sweep", "sluice", 5, "")
	assert.Zero(t, s.BaselineGoodput, "net/http has no kept run at 5x")
	assert.Zero(t, s.Ratio, "no counted ratio")
	assert.InDelta(t, 910.0/450, s.IndicativeRatio, 1e-9, "against the behind runs' median")

	s2 := find(t, rows, "sweep", "sluice", 2, "")
	assert.InDelta(t, 990.0/650, s2.Ratio, 1e-9)
	assert.Zero(t, s2.IndicativeRatio, "a counted ratio is not indicative")

	// The other way round: the row is indicative, the baseline counted.
	rep := &bench.Report{Samples: []bench.Sample{
		behind(run("sweep", "sluice", 0, 1000, 5, 900, 4000, 2)),
		run("sweep", "nethttp", 0, 1000, 5, 300, 0, 900),
	}}
	r := find(t, Summarize(rep, tabled), "sweep", "sluice", 5, "")
	assert.True(t, r.Indicative)
	assert.Zero(t, r.Ratio)
	assert.InDelta(t, 3, r.IndicativeRatio, 1e-9)

	// A baseline that served nothing gives no ratio of either kind.
	rep = &bench.Report{Samples: []bench.Sample{
		run("sweep", "sluice", 0, 1000, 5, 900, 4000, 2),
		behind(run("sweep", "nethttp", 0, 1000, 5, 0, 0, 0)),
	}}
	r = find(t, Summarize(rep, tabled), "sweep", "sluice", 5, "")
	assert.Zero(t, r.Ratio)
	assert.Zero(t, r.IndicativeRatio)
}

func TestWriteTableComparesWithBehindBaselineMarked(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, behindBaselineReport(), tabled))
	out := buf.String()

	// target x C/s offered/s goodput/s goodput/C vs-nethttp ...
	assert.Equal(t, []string{"sluice", "5", "1000", "5000", "910", "0.91", "2.02*"}, lineOf(out, "sluice", "910")[:7])
	assert.Equal(t, []string{"nethttp*", "5", "1000", "5000", "450", "0.45", "1.00*"}, lineOf(out, "nethttp*", "450")[:7])
	assert.Equal(t, "1.52", lineOf(out, "sluice", "990")[6], "2x: a counted ratio, unmarked")
	assert.Contains(t, out, "* after a vs nethttp figure: nethttp's runs at that load all fell behind the generator's schedule")
	assert.Contains(t, out, "the ratio is against what those runs measured, indicative only")
	assert.NotContains(t, out, "- under vs nethttp", "no cell is blank")
	// The notes come right under their table, before the legend.
	assert.Less(t, strings.Index(out, "* after a vs nethttp figure"), strings.Index(out, "Columns ("))
}

func TestWriteTableSaysWhyARatioIsBlank(t *testing.T) {
	sw := "sweep"
	rep := &bench.Report{Samples: []bench.Sample{
		run(sw, "sluice", 0, 1000, 2, 950, 1000, 2),
		run(sw, "nethttp", 0, 1000, 2, 0, 0, 0), // served nothing in time
		run(sw, "sluice", 0, 1000, 5, 900, 4000, 2),
	}}
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, rep, tabled))
	out := buf.String()
	assert.Equal(t, "-", lineOf(out, "sluice", "950")[6])
	assert.Equal(t, "-", lineOf(out, "sluice", "900")[6])
	assert.Contains(t, out, "- under vs nethttp: nethttp completed no request in time at that load, so there is no ratio.")
	assert.Contains(t, out, "- under vs nethttp: nethttp was not run at that load.")
	assert.NotContains(t, out, "* after a ")
}

func TestWriteTableLeavesOutRatioWithoutBaseline(t *testing.T) {
	sw := "sweep"
	rep := &bench.Report{Samples: []bench.Sample{
		run(sw, "sluice", 0, 1000, 2, 950, 1000, 2),
		run(sw, "semaphore", 0, 1000, 2, 700, 0, 5),
	}}
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, rep, tabled))
	out := buf.String()
	assert.NotContains(t, out, "vs nethttp", "neither the column nor its legend")
	assert.Len(t, lineOf(out, "sluice", "950"), 14)

	// net/http alone: a column of 1.00 would say nothing.
	rep = &bench.Report{Samples: []bench.Sample{run(sw, "nethttp", 0, 1000, 2, 700, 0, 5)}}
	buf.Reset()
	require.NoError(t, WriteTable(&buf, rep, tabled))
	assert.NotContains(t, buf.String(), "vs nethttp")
}

func TestWriteTableLegendExplainsEveryColumn(t *testing.T) {
	for _, cols := range []columns{{}, {classes: true}, {ratio: true}, {classes: true, ratio: true}, {ratio: true, client: true}} {
		entries := legend(time.Second, cols)
		for _, h := range tableHead(cols) {
			found := slices.ContainsFunc(entries, func(e legendEntry) bool {
				return e.column == h || slices.Contains(strings.Split(e.column, "/"), strings.TrimSuffix(h, " ms"))
			})
			assert.True(t, found, "column %q has no legend entry (%+v)", h, cols)
		}
		assert.Equal(t, cols.classes, slices.ContainsFunc(entries, func(e legendEntry) bool { return e.column == "class" }))
		assert.Equal(t, cols.ratio, slices.ContainsFunc(entries, func(e legendEntry) bool { return e.column == "vs nethttp" }))
		assert.Equal(t, cols.client, slices.ContainsFunc(entries, func(e legendEntry) bool { return e.column == "client" }))
	}

	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, sweepReport(), tabled))
	out := buf.String()
	legendText := out[strings.Index(out, "Columns ("):]
	for _, want := range []string{
		"  eff ", "  goodput/C ", "  runs ", "  CPU tgt/gen ",
		"within the 1s deadline",                               // the report's deadline
		"closed-loop run just before",                          // where C comes from
		"It can exceed 1: C comes from short closed-loop runs", // why goodput/C may exceed 1
	} {
		assert.Contains(t, legendText, want)
	}
	for l := range strings.Lines(legendText) {
		assert.LessOrEqual(t, len(strings.TrimRight(l, "\n")), legendWidth, l)
	}
	assert.NotContains(t, legendText, "  class ", "no class column in this report")
}

func TestWrap(t *testing.T) {
	assert.Equal(t, []string{"one two", "three", "fourteen"}, wrap("one two three fourteen", 8))
	assert.Equal(t, []string{"toolongword", "a"}, wrap("toolongword a", 4))
	assert.Nil(t, wrap("  ", 10))
}

func TestWriteTableClientModes(t *testing.T) {
	sw := "sweep"
	mode := func(s bench.Sample, client string, conns float64) bench.Sample {
		s.Client, s.NewConns = client, conns
		return s
	}
	rep := &bench.Report{Deadline: time.Second, Samples: []bench.Sample{
		mode(run(sw, "nethttp", 0, 1000, 5, 900, 0, 900), "keep", 1),
		mode(run(sw, "nethttp", 0, 1000, 5, 0, 0, 900), "reconnect", 3000),
		mode(run(sw, "sluice", 0, 1000, 5, 950, 4000, 5), "keep", 2),
		mode(run(sw, "sluice", 0, 1000, 5, 940, 4000, 5), "reconnect", 4),
	}}
	rows := Summarize(rep, tabled)
	require.Len(t, rows, 4, "one row per target and mode: the modes are not pooled")
	assert.Equal(t, []string{"keep", "keep", "reconnect", "reconnect"}, []string{rows[0].Client, rows[1].Client, rows[2].Client, rows[3].Client})
	assert.Equal(t, 3000.0, rows[2].NewConns)
	// sluice against net/http in the same mode; the reconnecting
	// net/http served nothing, so there is no ratio.
	assert.InDelta(t, 950.0/900, rows[1].Ratio, 1e-9)
	assert.Zero(t, rows[3].Ratio)

	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, rep, tabled))
	out := buf.String()
	assert.Contains(t, out, "conns/s")
	assert.NotNil(t, lineOf(out, "nethttp", "reconnect", "3000"), out)
	assert.NotNil(t, lineOf(out, "sluice", "keep", "2"), out)
	assert.Contains(t, out, "client ")

	// Without modes, no client column.
	buf.Reset()
	require.NoError(t, WriteTable(&buf, sweepReport(), tabled))
	assert.NotContains(t, buf.String(), "conns/s")
}

func TestWriteTableFairness(t *testing.T) {
	sw := "sweep"
	fair := func(s bench.Sample, jain, starved float64) bench.Sample {
		s.Clients, s.Jain, s.Starved = 64, jain, starved
		return s
	}
	rep := &bench.Report{Deadline: time.Second, Samples: []bench.Sample{
		fair(run(sw, "sluice", 0, 1000, 5, 950, 4000, 5), 0.5, 0.25),
		fair(run(sw, "sluice", 1, 1000, 5, 940, 4000, 5), 0.7, 0.125),
		fair(run(sw, "sluice", 2, 1000, 5, 960, 4000, 5), 0.9, 0),
		fair(run(sw, "nethttp", 0, 1000, 5, 600, 0, 4000), 0.99, 0),
	}}
	rows := Summarize(rep, tabled)
	require.Len(t, rows, 2)
	for _, r := range rows {
		if r.Target == "sluice" {
			assert.Equal(t, 0.7, r.Jain, "the median over the runs")
			assert.Equal(t, 0.125, r.Starved)
		}
	}
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, rep, tabled))
	out := buf.String()
	assert.Contains(t, out, "Jain")
	assert.NotNil(t, lineOf(out, "sluice", "0.70", "12.5"), out)
	assert.NotNil(t, lineOf(out, "nethttp", "0.99", "0.0"), out)

	buf.Reset()
	require.NoError(t, WriteTable(&buf, sweepReport(), tabled))
	assert.NotContains(t, buf.String(), "Jain", "no fairness columns without clients")
}
