//go:build linux

package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
)

// longLivedDetail decodes s's detail, which a longlived sample must have.
func longLivedDetail(t *testing.T, s *bench.Sample) LongLivedDetail {
	t.Helper()
	d, err := bench.DetailOf[LongLivedDetail](s)
	require.NoError(t, err)
	require.NotNil(t, d, "%s: a longlived sample records its detail", s.Target)
	return *d
}

func TestLongLivedRunsOnEachTarget(t *testing.T) {
	cfg := tinySuite()
	// A few connections at a time: on a sluice target each event
	// stream's handler holds the worker until the hand-over to a spare.
	ll := &LongLived{N: []int{20}, Window: time.Second, TrivialRate: 100, TrivialConns: 4, Dials: 4}
	cfg.Scenarios = []bench.Scenario{ll}
	rep, err := bench.RunSuite(context.Background(), cfg)
	require.NoError(t, err)

	var targets []string
	for i := range rep.Samples {
		s := &rep.Samples[i]
		d := longLivedDetail(t, s)
		what := s.Target
		targets = append(targets, s.Target)
		assert.Equal(t, "longlived", s.Scenario, what)
		assert.Equal(t, 20, d.N, what)
		assert.Equal(t, time.Second, d.Window, what)
		assert.Equal(t, 100.0, d.Rate, what)
		assert.Equal(t, 20, d.Upgrades, "%s: every WebSocket upgraded (%s)", what, d.UpgradeError)
		assert.Zero(t, d.UpgradeFailures, what)
		assert.Equal(t, 20, d.Streams, "%s: every event stream opened (%s)", what, d.StreamError)
		assert.Zero(t, d.StreamFailures, what)
		assert.Equal(t, 20, d.Echoes, "%s: every WebSocket echoes (%s)", what, d.EchoError)
		assert.Positive(t, d.Events, "%s: events delivered during the window", what)
		assert.Positive(t, d.EventMax, what)
		assert.GreaterOrEqual(t, d.EventMax, d.EventP99, what)
		assert.Positive(t, s.Rates.Goodput, "%s: the trivial load is served", what)
		assert.Positive(t, s.Latency.P99, what)
		assert.Positive(t, d.RSSBefore, what)
		assert.Positive(t, d.RSSAfter, what)
		assert.Positive(t, d.ThreadsBefore, what)
		assert.Positive(t, d.ThreadsAfter, what)
		assert.InDelta(t, float64(d.RSSAfter-d.RSSBefore)/40, d.RSSPerConn, 1e-9, what)
	}
	assert.Equal(t, []string{"nethttp", "sluice"}, targets)

	rows, err := ll.Summarize(rep)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	for _, r := range rows {
		assert.Equal(t, 20, r.N, r.Target)
		assert.Equal(t, 20.0, r.Upgrades, r.Target)
		assert.Equal(t, 1, r.Runs, r.Target)
	}

	var buf bytes.Buffer
	require.NoError(t, WriteReport(&buf, rep, All()))
	out := buf.String()
	assert.Contains(t, out, "longlived: N idle WebSockets (/ws, an echo inside the handler) and N event streams (/events, an event every 1s) held open while /trivial is offered 100/s for 1s")
	assert.Contains(t, tableLine(out, "nethttp 20"), "nethttp 20 20/20 20/20 20/20 ")
	assert.Contains(t, tableLine(out, "sluice 20"), "sluice 20 20/20 20/20 20/20 ")

	buf.Reset()
	require.NoError(t, WriteJSON(&buf, rep, All()))
	var doc struct {
		Scenarios map[string][]LongLivedRow `json:"scenarios"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc))
	assert.Len(t, doc.Scenarios["longlived"], 2, "the rows in the JSON document")
}

func TestLongLivedFlagsAndChecks(t *testing.T) {
	ll := &LongLived{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	ll.Flags(fs)
	require.NoError(t, fs.Parse([]string{"-longlived-n", "10, 30", "-longlived-window", "2s", "-longlived-rate", "250"}))
	s := tinySuite()
	require.NoError(t, ll.Check(&s))
	assert.Equal(t, []int{10, 30}, ll.N)
	assert.Equal(t, 2*time.Second, ll.Window)
	assert.Equal(t, 250.0, ll.TrivialRate)
	ps := ll.Points(&s)
	require.Len(t, ps, 2)
	assert.Equal(t, 10, ps[0].Conns)
	assert.Equal(t, 30, ps[1].Conns)
	assert.Equal(t, 250.0, ps[1].Rate)
	assert.Equal(t, 2*time.Second+LongLivedEchoTimeout, ps[1].Window)

	d := &LongLived{}
	require.NoError(t, d.Check(&s))
	assert.Equal(t, &LongLived{N: []int{100, 1000}, Window: 5 * time.Second, TrivialRate: 500, TrivialConns: 32, Dials: 64}, d,
		"the defaults of the zero fields")

	for name, args := range map[string][]string{
		"-longlived-n: \"x\" is not a count":  {"-longlived-n", "10,x"},
		"-longlived-window must be in":        {"-longlived-window", "0s"},
		"-longlived-rate must be positive":    {"-longlived-rate", "-5"},
		"-longlived-rate must be positive ":   {"-longlived-rate", "+Inf"},
		"N must be in [1, 50000] (-longlived": {"-longlived-n", "0"},
	} {
		ll := &LongLived{}
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		ll.Flags(fs)
		require.NoError(t, fs.Parse(args))
		assert.ErrorContains(t, ll.Check(&s), name, "the error names the flag")
	}
	for name, bad := range map[string]*LongLived{
		"N must be":    {N: []int{-1}},
		"TrivialRate":  {TrivialRate: -2},
		"Window":       {Window: -time.Second},
		"TrivialConns": {TrivialConns: -3},
	} {
		assert.ErrorContains(t, bad.Check(&s), name, "the error names the field")
	}
	limit, err := bench.FileLimit()
	require.NoError(t, err)
	if need := uint64(2*50000 + 32 + LongLivedSpareFiles); limit < need {
		err := (&LongLived{N: []int{10, 50000}}).Check(&s)
		assert.ErrorContains(t, err, "N=50000 needs about 100288 open files", "the largest N")
		assert.ErrorContains(t, err, "ulimit -n 100288", "the error names the fix")
	}
	for name, set := range map[string]func(*bench.SuiteConfig){
		"-tls":      func(s *bench.SuiteConfig) { s.TLS = true },
		"-newconns": func(s *bench.SuiteConfig) { s.NewConns = true },
		"-clients":  func(s *bench.SuiteConfig) { s.Clients = 4 },
	} {
		s := tinySuite()
		set(&s)
		assert.ErrorContains(t, (&LongLived{}).Check(&s), name, "the error names the flag")
	}
}
