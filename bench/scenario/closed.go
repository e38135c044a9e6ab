package scenario

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
	"github.com/sluice-go/sluice/bench/report"
)

// DefaultClosedConns returns the closed loop's connection counts when Closed
// names none.
func DefaultClosedConns() []int { return []int{1, 4, 16, 64, 256} }

// Closed is the load test most people run first (wrk, hey, k6 with virtual
// users): Conns connections, each sending the suite's weather request,
// reading its answer and sending the next at once, a rejection or a
// failure included, for the suite's Duration after a warm-up. It reports
// 2xx answers a second within the deadline, the share of answers that were
// not 2xx, and the 2xx answers' p50 and p99, against net/http.
//
// A closed loop of n connections keeps n requests at the server: a line of
// n less the workers. While that line waits less than the age limit there
// is nothing to refuse; past it, the right answer is to refuse the excess.
type Closed struct {
	// Conns are the loop's connection counts, each a point; default
	// DefaultClosedConns.
	Conns []int

	conns string // -closed-conns
}

// Name is "closed".
func (*Closed) Name() string { return "closed" }

// Describe says what the scenario does, for the command's help.
func (*Closed) Describe() string {
	return "closed loops of 1 to 256 connections resending at once, as wrk does: -closed-conns"
}

// Flags registers -closed-conns.
func (c *Closed) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.conns, "closed-conns", "", "the closed scenario's connection counts, comma-separated (default "+formatInts(DefaultClosedConns())+")")
}

// Check reads -closed-conns and fills in the default counts; the loop
// keeps a connection per client, so NewConns and Clients do not apply.
func (c *Closed) Check(s *bench.SuiteConfig) error {
	if s.NewConns || s.Clients != 0 {
		return errors.New("bench: the closed scenario keeps a connection per client: NewConns and Clients do not apply")
	}
	if c.conns != "" {
		c.Conns = nil
		for _, f := range strings.Split(c.conns, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return fmt.Errorf("-closed-conns: %q is not a count", f)
			}
			c.Conns = append(c.Conns, n)
		}
	}
	if len(c.Conns) == 0 {
		c.Conns = DefaultClosedConns()
	}
	for _, n := range c.Conns {
		if n < 1 || n > 65536 {
			return fmt.Errorf("bench: the closed scenario's connections must be in [1, 65536], got %d", n)
		}
	}
	return nil
}

// Points are one per connection count.
func (c *Closed) Points(s *bench.SuiteConfig) []bench.Point {
	var ps []bench.Point
	for _, n := range c.Conns {
		ps = append(ps, bench.Point{Shape: s.Shape, Spec: s.Shape.Spec, Conns: n, Window: s.Calibrate.Warmup + s.Duration})
	}
	return ps
}

// Run runs the loop on a fresh target for the suite's warm-up and Duration
// and counts the answers that ended within the Duration.
func (*Closed) Run(ctx context.Context, t *bench.Trial) (*bench.Sample, error) {
	proc, err := t.Start(ctx, t.Child())
	if err != nil {
		return nil, err
	}
	s := t.Sample()
	m := bench.MeterCPU(proc)
	cal, err := load.Calibrate(ctx, load.CalibrateConfig{
		URL:      proc.URL + bench.WeatherPath,
		Conns:    t.Point.Conns,
		Warmup:   t.Suite.Calibrate.Warmup,
		Duration: t.Suite.Duration,
		Deadline: t.Suite.Deadline,
		Resend:   true,
	})
	m.Stop(s)
	err = errors.Join(err, proc.Stop())
	if cal.Duration <= 0 {
		return nil, err
	}
	n := cal.OK + cal.Rejected + cal.Failed
	s.Requests = n
	s.Rates = bench.RatesOf(n, cal.OK, cal.Rejected, cal.Failed, cal.Duration)
	s.Latency = bench.PercentilesOf(cal.Latency)
	s.Server = proc.Stats
	s.Placement = proc.Placement
	return s, err
}

// ClosedRow is the closed scenario's summary of one target at one
// connection count: medians over the repeats.
type ClosedRow struct {
	Shape  string `json:"shape"`
	Conns  int    `json:"conns"`
	Target string `json:"target"`
	// OK is 2xx answers a second within the deadline; NotOK the share of
	// all answers that were not (rejections, errors, late answers).
	OK    float64 `json:"ok"`
	NotOK float64 `json:"not_ok"`
	// P50 and P99 are the 2xx answers' latencies, in milliseconds.
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	// Ratio is OK over net/http's at the same count, 0 without it.
	Ratio float64 `json:"ratio"`
	Runs  int     `json:"runs"`
}

// Summarize returns the rows of rep's closed samples, by shape, connection
// count and target in report order.
func (*Closed) Summarize(rep *bench.Report) []ClosedRow {
	type key struct {
		shape, target string
		conns         int
	}
	var order []key
	by := make(map[key][]bench.Sample)
	for _, s := range rep.Samples {
		if s.Scenario != "closed" {
			continue
		}
		k := key{s.Shape, s.Target, s.Clients}
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], s)
	}
	var rows []ClosedRow
	for _, k := range order {
		var ok, notOK, p50, p99 []float64
		for _, s := range by[k] {
			r := s.Rates
			ok = append(ok, r.Goodput)
			if all := r.Goodput + r.Rejected + r.Failed; all > 0 {
				notOK = append(notOK, (r.Rejected+r.Failed)/all)
			}
			p50 = append(p50, s.Latency.P50)
			p99 = append(p99, s.Latency.P99)
		}
		rows = append(rows, ClosedRow{Shape: k.shape, Conns: k.conns, Target: k.target,
			OK: report.Median(ok), NotOK: report.Median(notOK), P50: report.Median(p50), P99: report.Median(p99), Runs: len(by[k])})
	}
	base := make(map[key]float64)
	for _, r := range rows {
		if r.Target == report.BaselineTarget {
			base[key{r.Shape, "", r.Conns}] = r.OK
		}
	}
	for i := range rows {
		if b := base[key{rows[i].Shape, "", rows[i].Conns}]; b > 0 {
			rows[i].Ratio = rows[i].OK / b
		}
	}
	slices.SortStableFunc(rows, func(a, b ClosedRow) int {
		if a.Shape != b.Shape {
			return strings.Compare(a.Shape, b.Shape)
		}
		return a.Conns - b.Conns
	})
	return rows
}

// Rows are Summarize's, nil without closed samples.
func (c *Closed) Rows(rep *bench.Report) any {
	if rows := c.Summarize(rep); len(rows) > 0 {
		return rows
	}
	return nil
}

// WriteReport writes a table of the closed samples per handler shape.
func (c *Closed) WriteReport(w io.Writer, rep *bench.Report) error {
	rows := c.Summarize(rep)
	if len(rows) == 0 {
		return nil
	}
	var buf bytes.Buffer
	for start := 0; start < len(rows); {
		end := start + 1
		for end < len(rows) && rows[end].Shape == rows[start].Shape {
			end++
		}
		fmt.Fprintf(&buf, "\nclosed, shape %s: each connection resends at once, answered or refused\n", rows[start].Shape)
		tw := report.NewTab(&buf)
		report.Line(tw, "conns", "target", "2xx/s", "vs "+report.BaselineTarget, "not 2xx", "p50 ms", "p99 ms", "runs")
		for _, r := range rows[start:end] {
			ratio := "-"
			if r.Ratio > 0 {
				ratio = fmt.Sprintf("%.2f", r.Ratio)
			}
			report.Line(tw, strconv.Itoa(r.Conns), r.Target, fmt.Sprintf("%.0f", r.OK), ratio,
				fmt.Sprintf("%.1f%%", 100*r.NotOK), report.FormatMS(r.P50), report.FormatMS(r.P99), strconv.Itoa(r.Runs))
		}
		_ = tw.Flush() // into a bytes.Buffer
		start = end
	}
	buf.WriteString("2xx/s: answers a second that were 2xx within the deadline; not 2xx: the share of all answers that were anything else (rejections, errors, late); latencies of the 2xx answers.\n")
	_, err := w.Write(buf.Bytes())
	return err
}

func formatInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
