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
		d := detail[LongLivedDetail](t, s)
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
		assert.Positive(t, d.HeapBefore, what)
		assert.Positive(t, d.HeapPerSocket, "%s: a WebSocket holds memory", what)
		assert.Positive(t, d.HeapPerStream, "%s: an event stream holds memory", what)
		assert.InDelta(t, float64(d.HeapSockets-d.HeapBefore)/20, d.HeapPerSocket, 1e-9, what)
		assert.InDelta(t, float64(d.HeapAll-d.HeapSockets)/20, d.HeapPerStream, 1e-9, what)
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

// longLivedSample builds a longlived sample of one run.
func longLivedSample(t *testing.T, target string, n, repeat, echoes int, goodput float64, behind bool) bench.Sample {
	t.Helper()
	s := bench.Sample{
		Scenario: "longlived", Shape: "io", Target: target, Repeat: repeat, Clients: n, Behind: behind,
		Rates:   bench.Rates{Offered: 500, Goodput: goodput},
		Latency: bench.Percentiles{P50: 1, P99: 2 + float64(repeat)},
	}
	d := LongLivedDetail{
		N: n, Window: 5 * time.Second, Rate: 500, Upgrades: n, Streams: n - 1, StreamFailures: 1, Echoes: echoes,
		Refused: int64(repeat), Events: 5 * n, EventP99: 1.5, EventMax: 3 + float64(repeat), LateEvents: repeat,
		RSSBefore: 10 << 20, RSSAfter: 10<<20 + int64(2*n)*4096, ThreadsBefore: 5, ThreadsAfter: 5 + n,
		RSSPerConn: 4096, HeapPerSocket: 2048 * float64(1+repeat), HeapPerStream: 3072,
	}
	if n == 100 {
		d.HeapPerSocket, d.HeapPerStream = 0, 0 // a report from before the heap was measured
	}
	require.NoError(t, s.SetDetail(d))
	return s
}

func TestLongLivedSummarizeAndReport(t *testing.T) {
	var samples []bench.Sample
	for r := range 3 {
		samples = append(samples,
			longLivedSample(t, "sluice", 1000, r, 1000-r, 490+float64(r), r == 2),
			longLivedSample(t, "nethttp", 1000, r, 1000, 500, false),
			longLivedSample(t, "sluice", 100, r, 100, 495, false),
			longLivedSample(t, "nethttp", 100, r, 100, 500, false),
		)
	}
	rep := &bench.Report{Command: "sluice bench -scenarios longlived", Repeats: 3, Samples: samples}
	ll := &LongLived{}
	rows, err := ll.Summarize(rep)
	require.NoError(t, err)
	require.Len(t, rows, 4)
	assert.Equal(t, []longLivedKey{{"sluice", 100}, {"nethttp", 100}, {"sluice", 1000}, {"nethttp", 1000}},
		[]longLivedKey{{rows[0].Target, rows[0].N}, {rows[1].Target, rows[1].N}, {rows[2].Target, rows[2].N}, {rows[3].Target, rows[3].N}},
		"by N, then the targets in report order")
	s := rows[2]
	assert.Equal(t, 3, s.Runs)
	assert.Equal(t, 1, s.Behind)
	assert.Equal(t, 999.0, s.Echoes, "the median")
	assert.Equal(t, 491.0, s.Goodput)
	assert.Equal(t, 3.0, s.P99)
	assert.Equal(t, 1.0, s.Refused)
	assert.Equal(t, 4.0, s.EventMax)
	assert.Equal(t, 4096.0, s.RSSPerConn)
	assert.Equal(t, 4096.0, s.HeapPerSocket, "the median")
	assert.Equal(t, 3072.0, s.HeapPerStream)
	assert.Equal(t, 1005.0, s.ThreadsAfter)

	var buf bytes.Buffer
	require.NoError(t, ll.WriteReport(&buf, rep))
	out := buf.String()
	assert.Contains(t, out, "offered 500/s for 5s\n")
	assert.Equal(t, "target N upgrades SSE echoes goodput/s p99 ms refused event p99 ms event max ms late events RSS KiB/conn heap KiB/ws heap KiB/sse threads runs",
		tableLine(out, "target N"))
	assert.Equal(t, "sluice 1000 1000/1000 999/1000 999/1000 491 3.00 1 1.50 4.00 1 4.0 4.0 3.0 5 -> 1005 2/1", tableLine(out, "sluice 1000"))
	assert.Equal(t, "nethttp 100 100/100 99/100 100/100 500 3.00 1 1.50 4.00 1 4.0 - - 5 -> 105 3/0", tableLine(out, "nethttp 100"))

	buf.Reset()
	require.NoError(t, ll.WriteReport(&buf, &bench.Report{}))
	assert.Empty(t, buf.String(), "nothing without longlived samples")
	bad := &bench.Report{Samples: []bench.Sample{{Scenario: "longlived", Target: "sluice", Detail: json.RawMessage(`{"n":"x"}`)}}}
	_, err = ll.Summarize(bad)
	assert.ErrorContains(t, err, "sluice", "a detail that does not decode names its sample")
	assert.Nil(t, ll.Rows(bad))
}
