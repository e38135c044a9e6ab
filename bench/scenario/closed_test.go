//go:build linux

package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/report"
)

func TestClosedRunsEachCountOnEachTarget(t *testing.T) {
	cfg := tinySuite()
	closed := &Closed{Conns: []int{1, 4}}
	cfg.Scenarios = []bench.Scenario{closed}
	rep, err := bench.RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	require.Len(t, rep.Samples, 4, "two counts on two targets")
	for _, s := range rep.Samples {
		what := s.Target
		assert.Equal(t, "closed", s.Scenario, what)
		assert.Contains(t, []int{1, 4}, s.Clients, what)
		assert.Zero(t, s.Multiple, "%s: no capacity measured", what)
		assert.Zero(t, s.Capacity, what)
		assert.Positive(t, s.Rates.Goodput, what)
		assert.Positive(t, s.Latency.P50, what)
		assert.Equal(t, s.Rates.Offered, s.Rates.Goodput+s.Rates.Rejected+s.Rates.Failed, what)
		if s.Target == "sluice" {
			assert.NotNil(t, s.Server, "%s: the server's counters", what)
		}
	}

	rows := closed.Summarize(rep)
	require.Len(t, rows, 4)
	assert.Equal(t, 1, rows[0].Conns, "by count")
	assert.Equal(t, "nethttp", rows[0].Target, "then in report order")
	assert.InDelta(t, 1, rows[0].Ratio, 1e-9, "net/http against itself")
	assert.Positive(t, rows[1].Ratio, "sluice against net/http")

	var buf bytes.Buffer
	require.NoError(t, WriteReport(&buf, rep, All()))
	out := buf.String()
	assert.Contains(t, out, "closed, shape light")
	assert.Contains(t, out, "vs nethttp")
	assert.NotContains(t, out, "no samples")

	buf.Reset()
	require.NoError(t, WriteJSON(&buf, rep, All()))
	var doc report.Document
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc))
	require.NotNil(t, doc.Report)
	assert.Len(t, doc.Report.Samples, 4)
	assert.Len(t, doc.Scenarios["closed"], 4, "the closed rows in the document")
	assert.NotContains(t, doc.Scenarios, "sweep", "no rows for a scenario without samples")
}

func TestClosedFlagsAndChecks(t *testing.T) {
	c := &Closed{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.Flags(fs)
	require.NoError(t, fs.Parse([]string{"-closed-conns", "2, 8"}))
	s := tinySuite()
	require.NoError(t, c.Check(&s))
	assert.Equal(t, []int{2, 8}, c.Conns)

	d := &Closed{}
	require.NoError(t, d.Check(&s))
	assert.Equal(t, DefaultClosedConns(), d.Conns, "the default counts")

	for name, bad := range map[string]*Closed{
		"zero":      {Conns: []int{0}},
		"too many":  {Conns: []int{70000}},
		"not count": {conns: "4,x"},
	} {
		assert.Error(t, bad.Check(&s), name)
	}
	s.NewConns = true
	assert.ErrorContains(t, (&Closed{}).Check(&s), "NewConns")
}
