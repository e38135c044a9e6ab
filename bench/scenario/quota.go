package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/report"
)

// DefaultQuotas returns the quota scenario's CPU quotas when it names none:
// half a CPU and one and a half, each with the kernel's default period
// (100 ms, Kubernetes') and a 10 ms one (set by some clusters to shorten
// the throttled spells).
func DefaultQuotas() []bench.Quota {
	return []bench.Quota{
		{CPUs: 0.5, Period: 100 * time.Millisecond},
		{CPUs: 0.5, Period: 10 * time.Millisecond},
		{CPUs: 1.5, Period: 100 * time.Millisecond},
		{CPUs: 1.5, Period: 10 * time.Millisecond},
	}
}

// DefaultQuotaMultiples returns the quota scenario's offered loads when it
// names none, in multiples of the capacity measured in each quota.
func DefaultQuotaMultiples() []float64 { return []float64{1, 2, 5} }

// Quota serves the suite's weather shape in CPU quotas, as a container
// with a CPU limit runs it (a Kubernetes limits.cpu is such a quota): for
// each quota, each target's capacity C is measured in that quota, and the
// Multiples of it are offered for the suite's Duration, each point on a
// fresh target in a fresh quota. It reports goodput/C, refusals and the
// p99 of what was served per quota, against net/http, with how often the
// quota throttled the target and, for sluice, how often its watchdog took
// a handler for blocked (a throttled thread is not blocked: none should
// be, for a handler that only computes).
//
// A quota needs Linux and a cgroup the benchmark may make (root); the
// scenario fails at its first point, naming what is missing, where it
// cannot.
type Quota struct {
	// Quotas are the quotas, each a capacity measurement and its points;
	// default DefaultQuotas.
	Quotas []bench.Quota
	// Multiples are the offered loads; default DefaultQuotaMultiples.
	Multiples []float64

	quotas, multiples string // -quotas, -quota-x
}

// Name is "quota".
func (*Quota) Name() string { return "quota" }

// Describe says what the scenario does, for the command's help.
func (*Quota) Describe() string {
	return "the targets in CPU quotas, as containers with CPU limits: -quotas, -quota-x; needs root"
}

// Flags registers -quotas and -quota-x.
func (q *Quota) Flags(fs *flag.FlagSet) {
	fs.StringVar(&q.quotas, "quotas", "", "the quota scenario's CPU quotas, comma-separated CPUs[/period] (default "+formatQuotas(DefaultQuotas())+")")
	fs.StringVar(&q.multiples, "quota-x", "", "the quota scenario's offered loads, in multiples of the capacity in each quota (default "+formatMultiples(DefaultQuotaMultiples())+")")
}

// Check reads the flags and fills in the defaults. The scenario sets each
// point's quota, so a suite-wide one (SuiteConfig.Quota) does not apply.
func (q *Quota) Check(s *bench.SuiteConfig) error {
	if s.Quota != nil {
		return fmt.Errorf("bench: the quota scenario runs each point in its own quotas (-quotas), not in the suite's quota %v", s.Quota)
	}
	if q.quotas != "" {
		qs, err := bench.ParseQuotas(q.quotas)
		if err != nil {
			return fmt.Errorf("-quotas: %w", err)
		}
		q.Quotas = qs
	}
	if len(q.Quotas) == 0 {
		q.Quotas = DefaultQuotas()
	}
	for _, qq := range q.Quotas {
		if err := qq.Check(); err != nil {
			return err
		}
	}
	return readMultiples(&q.Multiples, "-quota-x", q.multiples, DefaultQuotaMultiples())
}

// Points are every multiple in every quota. Each quota is a shape of its
// own ("cpu in 0.5/100ms"), so that its capacity is measured in it.
func (q *Quota) Points(s *bench.SuiteConfig) []bench.Point {
	var ps []bench.Point
	for _, qq := range q.Quotas {
		sh := bench.Shape{Name: s.Shape.Name + " in " + qq.String(), Spec: s.Shape.Spec}
		for _, m := range q.Multiples {
			ps = append(ps, bench.Point{Shape: sh, Spec: sh.Spec, Multiple: m, Quota: &qq, Part: qq.String()})
		}
	}
	return ps
}

// Run offers the point's multiple of the capacity measured in its quota.
func (*Quota) Run(ctx context.Context, t *bench.Trial) (*bench.Sample, error) {
	return offer(ctx, t, nil)
}

// QuotaRow is the quota scenario's summary of one target at one offered
// load in one quota: medians over the repeats.
type QuotaRow struct {
	Quota    string  `json:"quota"`
	Target   string  `json:"target"`
	Multiple float64 `json:"multiple"`
	// Capacity is C in the quota, requests a second; Goodput the 2xx
	// answers within the deadline over C; Rejected the share of requests
	// refused unstarted.
	Capacity float64 `json:"capacity"`
	Goodput  float64 `json:"goodput"`
	Rejected float64 `json:"rejected"`
	// P99 is the latency of the 2xx answers, in milliseconds.
	P99 float64 `json:"p99_ms"`
	// Throttled is the share of the run's quota periods in which the
	// target was throttled, from the kernel's counters over the target's
	// life (its start and stop included).
	Throttled float64 `json:"throttled"`
	// Blocked and Handovers are a sluice target's watchdog counts, summed
	// over the repeats: handlers found blocking their worker's thread, and
	// workers handed to a spare thread.
	Blocked   int64 `json:"blocked"`
	Handovers int64 `json:"handovers"`
	Runs      int   `json:"runs"`
}

// Summarize returns the rows of rep's quota samples, in report order.
func (*Quota) Summarize(rep *bench.Report) []QuotaRow {
	type key struct {
		quota, target string
		multiple      float64
	}
	var runs []bench.Sample
	for _, s := range rep.Samples {
		if s.Scenario == "quota" && s.Quota != nil {
			runs = append(runs, s)
		}
	}
	return grouped(runs, func(s bench.Sample) key { return key{s.Quota.String(), s.Target, s.Multiple} },
		func(k key, ss []bench.Sample) QuotaRow {
			r := QuotaRow{Quota: k.quota, Target: k.target, Multiple: k.multiple, Runs: len(ss)}
			var c, good, rej, p99, thr []float64
			for _, s := range ss {
				c = append(c, s.Capacity)
				if s.Capacity > 0 {
					good = append(good, s.Rates.Goodput/s.Capacity)
				}
				if s.Rates.Offered > 0 {
					rej = append(rej, s.Rates.Rejected/s.Rates.Offered)
				}
				p99 = append(p99, s.Latency.P99)
				if s.Throttled != nil {
					thr = append(thr, throttledShare(s))
				}
				var st bench.SluiceServer
				if len(s.Server) > 0 && json.Unmarshal(s.Server, &st) == nil {
					r.Blocked += st.Blocked
					r.Handovers += st.Handovers
				}
			}
			r.Capacity, r.Goodput, r.Rejected, r.P99, r.Throttled = report.Median(c), report.Median(good), report.Median(rej), report.Median(p99), report.Median(thr)
			return r
		})
}

// throttledShare is the share of s's quota periods in which its target was
// throttled: the throttled periods over the periods of the sending window
// (the target's start and stop, outside the window, are short and idle).
func throttledShare(s bench.Sample) float64 {
	period := s.Throttled.Quota.Period
	if period == 0 {
		period = bench.DefaultQuotaPeriod
	}
	window := time.Duration(float64(time.Second) * float64(s.Requests) / max(s.Rates.Offered, 1))
	if window <= 0 {
		return 0
	}
	return min(1, float64(s.Throttled.Periods)/(float64(window)/float64(period)))
}

// Rows are Summarize's, nil without quota samples.
func (q *Quota) Rows(rep *bench.Report) any { return rowsOf(q.Summarize(rep), nil) }

// WriteReport writes a table of the quota samples per quota.
func (q *Quota) WriteReport(w io.Writer, rep *bench.Report) error {
	rows := q.Summarize(rep)
	if len(rows) == 0 {
		return nil
	}
	var buf bytes.Buffer
	for start := 0; start < len(rows); {
		end := start + 1
		for end < len(rows) && rows[end].Quota == rows[start].Quota {
			end++
		}
		fmt.Fprintf(&buf, "\nquota %s: the target in a CPU quota of %s CPU per period\n", rows[start].Quota, rows[start].Quota)
		tw := report.NewTab(&buf)
		report.Line(tw, "target", "x", "C req/s", "goodput/C", "rejected", "p99 ms", "throttled", "blocked", "handovers", "runs")
		for _, r := range rows[start:end] {
			report.Line(tw, r.Target, formatMultiple(r.Multiple), fmt.Sprintf("%.0f", r.Capacity), fmt.Sprintf("%.2f", r.Goodput),
				fmt.Sprintf("%.1f%%", 100*r.Rejected), report.FormatMS(r.P99), fmt.Sprintf("%.0f%%", 100*r.Throttled),
				strconv.FormatInt(r.Blocked, 10), strconv.FormatInt(r.Handovers, 10), strconv.Itoa(r.Runs))
		}
		_ = tw.Flush() // into a bytes.Buffer
		start = end
	}
	buf.WriteString("goodput/C: 2xx answers within the deadline over the capacity measured in the same quota; throttled: the share of quota periods in which the kernel held the target; blocked and handovers: a sluice target's watchdog (summed over runs; a handler that only computes never blocks).\n")
	_, err := w.Write(buf.Bytes())
	return err
}

func formatQuotas(qs []bench.Quota) string {
	s := make([]string, len(qs))
	for i, q := range qs {
		s[i] = q.String()
	}
	return strings.Join(s, ",")
}

func formatMultiples(ms []float64) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = formatMultiple(m)
	}
	return strings.Join(s, ",")
}
