package report

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sluice-go/sluice/bench"
)

// StrayPart sums up the runs of one part of the stray scenario for one
// target: medians over the kept runs (those whose generator kept the
// main load's schedule), or over all of them when none was kept.
type StrayPart struct {
	Runs   int `json:"runs"`
	Behind int `json:"behind"`
	// Offered and Goodput are the measured endpoint's, per second; the
	// fractions are of its offered load; latencies in milliseconds.
	Offered      float64 `json:"offered"`
	Goodput      float64 `json:"goodput"`
	RejectedFrac float64 `json:"rejected_frac"`
	FailedFrac   float64 `json:"failed_frac"`
	P50          float64 `json:"p50_ms"`
	P99          float64 `json:"p99_ms"`
	// CallsOffered and CallsDone are the stray calls sent and answered
	// in time, per second (0 in the part without them).
	CallsOffered float64 `json:"calls_offered"`
	CallsDone    float64 `json:"calls_done"`
}

// StrayRow sums up the stray scenario for one target.
type StrayRow struct {
	Target string `json:"target"`
	// Placement says where a sluice target's workers ran ("pinned 0-1",
	// "floating"); "" for other targets.
	Placement string `json:"placement,omitempty"`
	// Trivial is the trivial endpoint beside the stray calls; CPU the
	// CPU-bound handler alone, CPUWith the same beside the stray calls.
	Trivial StrayPart `json:"trivial"`
	CPU     StrayPart `json:"cpu"`
	CPUWith StrayPart `json:"cpu_with"`
	// Capacity is the median C of the CPU-bound handler and Multiple the
	// load it was offered, in multiples of C.
	Capacity float64 `json:"capacity"`
	Multiple float64 `json:"multiple"`
	// WithOverAlone is the median, over the repeats where both CPU parts
	// were kept, of the goodput with the stray calls over the goodput
	// without them in the same repeat; 0 when there is no such repeat.
	WithOverAlone float64 `json:"with_over_alone"`
}

// SummarizeStray returns one StrayRow per target of rep's stray samples,
// in the order the targets first appear; nil when there are none.
func SummarizeStray(rep *bench.Report) []StrayRow {
	if rep == nil {
		return nil
	}
	targets, byTarget := groupSamples(rep, func(s bench.Sample) (string, bool) {
		return s.Target, s.Scenario == bench.ScenarioStray && s.Stray != nil
	})
	var rows []StrayRow
	for _, t := range targets {
		rows = append(rows, strayRow(t, byTarget[t]))
	}
	return rows
}

// strayRow computes the row of one target.
func strayRow(target string, samples []bench.Sample) StrayRow {
	r := StrayRow{Target: target, Placement: PlacementOf(samples)}
	of := func(part string) []bench.Sample {
		return slices.DeleteFunc(slices.Clone(samples), func(s bench.Sample) bool { return s.Stray.Part != part })
	}
	r.Trivial = strayPart(of(bench.StrayTrivial))
	alone, with := of(bench.StrayCPU), of(bench.StrayCPUWith)
	r.CPU, r.CPUWith = strayPart(alone), strayPart(with)
	var capacity, multiple, ratios []float64
	for _, a := range alone {
		capacity = append(capacity, a.Capacity)
		multiple = append(multiple, a.Multiple)
		if a.Behind || a.Rates.Goodput <= 0 {
			continue
		}
		for _, w := range with {
			if w.Repeat == a.Repeat && !w.Behind {
				ratios = append(ratios, w.Rates.Goodput/a.Rates.Goodput)
			}
		}
	}
	r.Capacity, r.Multiple, r.WithOverAlone = Median(capacity), Median(multiple), Median(ratios)
	return r
}

// strayPart computes one part's medians.
func strayPart(samples []bench.Sample) StrayPart {
	var p StrayPart
	kept := slices.DeleteFunc(slices.Clone(samples), func(s bench.Sample) bool { return s.Behind })
	p.Runs, p.Behind = len(kept), len(samples)-len(kept)
	if len(kept) == 0 {
		kept = samples
	}
	var offered, goodput, rejFrac, failFrac, p50, p99, callsOffered, callsDone []float64
	for _, s := range kept {
		rt := s.Rates
		offered = append(offered, rt.Offered)
		goodput = append(goodput, rt.Goodput)
		if rt.Offered > 0 {
			rejFrac = append(rejFrac, rt.Rejected/rt.Offered)
			failFrac = append(failFrac, rt.Failed/rt.Offered)
		}
		if rt.Goodput > 0 {
			p50 = append(p50, s.Latency.P50)
			p99 = append(p99, s.Latency.P99)
		}
		callsOffered = append(callsOffered, s.Stray.Calls.Offered)
		callsDone = append(callsDone, s.Stray.Calls.Goodput)
	}
	p.Offered, p.Goodput = Median(offered), Median(goodput)
	p.RejectedFrac, p.FailedFrac = Median(rejFrac), Median(failFrac)
	p.P50, p.P99 = Median(p50), Median(p99)
	p.CallsOffered, p.CallsDone = Median(callsOffered), Median(callsDone)
	return p
}

// WriteStray writes the stray samples of rep to w: a line on the setup,
// then a table of the trivial endpoint beside the stray calls and a table
// of the CPU-bound handler without and with them, one row per target. It
// writes nothing for a report without stray samples.
func WriteStray(w io.Writer, rep *bench.Report) error {
	if rep == nil {
		return errors.New("report: nil report")
	}
	rows := SummarizeStray(rep)
	if len(rows) == 0 {
		return nil
	}
	var si *bench.StrayInfo
	var cpuShape string
	for i := range rep.Samples {
		s := &rep.Samples[i]
		if s.Stray == nil {
			continue
		}
		if si == nil || si.Rate == 0 {
			si = s.Stray
		}
		cpuShape = s.Shape
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "\nstray blocking: %s calls a service that answers after %v through a plain net/http client (holding its thread), %.3g a second\n",
		bench.StrayPath, si.Delay, si.Rate)
	fmt.Fprintf(&buf, "%s beside the stray calls:\n", bench.TrivialPath)
	tw := NewTab(&buf)
	Line(tw, "target", "workers", "offered/s", "goodput/s", "p50 ms", "p99 ms", "503 %", "failed %", "stray calls/s", "done/s", "runs")
	for _, r := range rows {
		p := r.Trivial
		Line(tw, r.Target, orDash(r.Placement), fmt.Sprintf("%.0f", p.Offered), fmt.Sprintf("%.0f", p.Goodput),
			FormatMS(p.P50), FormatMS(p.P99), fmt.Sprintf("%.1f", 100*p.RejectedFrac), fmt.Sprintf("%.1f", 100*p.FailedFrac),
			fmt.Sprintf("%.2g", p.CallsOffered), fmt.Sprintf("%.2g", p.CallsDone), fmt.Sprintf("%d/%d", p.Runs, p.Behind))
	}
	_ = tw.Flush()
	fmt.Fprintf(&buf, "\nCPU-bound handler, shape %s%s, at %sx of C, alone and beside the stray calls:\n",
		orDash(cpuShape), HandlerOf(rep, bench.ScenarioStray, cpuShape), formatMultiple(rows[0].Multiple))
	tw = NewTab(&buf)
	Line(tw, "target", "C/s", "goodput/s alone", "with stray", "with/alone", "p99 ms alone", "with stray", "503 % alone", "with stray", "runs")
	for _, r := range rows {
		ratio := "-"
		if r.WithOverAlone > 0 {
			ratio = fmt.Sprintf("%.2f", r.WithOverAlone)
		}
		Line(tw, r.Target, fmt.Sprintf("%.0f", r.Capacity), fmt.Sprintf("%.0f", r.CPU.Goodput), fmt.Sprintf("%.0f", r.CPUWith.Goodput),
			ratio, FormatMS(r.CPU.P99), FormatMS(r.CPUWith.P99),
			fmt.Sprintf("%.1f", 100*r.CPU.RejectedFrac), fmt.Sprintf("%.1f", 100*r.CPUWith.RejectedFrac),
			fmt.Sprintf("%d/%d, %d/%d", r.CPU.Runs, r.CPU.Behind, r.CPUWith.Runs, r.CPUWith.Behind))
	}
	_ = tw.Flush()
	buf.WriteString(strings.Join([]string{
		"503 %: refused unstarted (Sluice-Not-Started); failed %: late (past the deadline), errors, other statuses;",
		"stray calls/s, done/s: the blocking calls sent, and answered within their delay plus " + bench.StrayGrace.String() + ";",
		"with/alone: the CPU-bound goodput with the stray calls over without, per repeat, median;",
		"runs: kept/behind (the generator fell behind its schedule); for the CPU table alone, then with.",
	}, "\n") + "\n")
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("report: write stray: %w", err)
	}
	return nil
}
