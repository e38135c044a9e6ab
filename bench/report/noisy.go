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

// NoisyRow sums up the noisy-scenario runs of one target at one offered
// rate: medians over the kept runs (those whose generator kept its
// schedule), or over the others, marked Indicative, when none was kept.
type NoisyRow struct {
	Target string `json:"target"`
	// Rate is the offered load asked for, in requests per second.
	Rate   float64 `json:"rate"`
	Runs   int     `json:"runs"`
	Behind int     `json:"behind"`
	// Offered, Goodput, Rejected and Failed are per second; the
	// fractions are of the offered load.
	Offered      float64 `json:"offered"`
	Goodput      float64 `json:"goodput"`
	Rejected     float64 `json:"rejected"`
	Failed       float64 `json:"failed"`
	RejectedFrac float64 `json:"rejected_frac"`
	FailedFrac   float64 `json:"failed_frac"`
	P50          float64 `json:"p50_ms"`
	P99          float64 `json:"p99_ms"`
	// Ratio is Goodput over BaselineTarget's at the same rate; 0 without
	// a baseline row with goodput. RatioIndicative marks a ratio that
	// rests on runs whose generator fell behind (this row's or the
	// baseline's).
	Ratio           float64 `json:"ratio"`
	RatioIndicative bool    `json:"ratio_indicative,omitempty"`
	// TargetCPU is the target's CPU-seconds per second, NeighbourUse the
	// busy loop's.
	TargetCPU    float64 `json:"target_cpu"`
	NeighbourUse float64 `json:"neighbour_use"`
	// RunQueueWait and MaxThreadWait are the target's threads' wait for a
	// CPU, all of them together and the one that waited most, in seconds
	// per second.
	RunQueueWait  float64 `json:"run_queue_wait"`
	MaxThreadWait float64 `json:"max_thread_wait"`
	// Placement says where a sluice target's workers ran: "pinned 0-1"
	// or "floating"; "" for other targets.
	Placement  string `json:"placement,omitempty"`
	Indicative bool   `json:"indicative,omitempty"`
}

// SummarizeNoisy returns one NoisyRow per target and rate of rep's noisy
// samples, by ascending rate, then target in the order it first appears;
// nil when there are none.
func SummarizeNoisy(rep *bench.Report) []NoisyRow {
	if rep == nil {
		return nil
	}
	type key struct {
		target string
		rate   float64
	}
	order, byKey := groupSamples(rep, func(s bench.Sample) (key, bool) {
		if s.Scenario != bench.ScenarioNoisy || s.Noisy == nil {
			return key{}, false
		}
		return key{s.Target, multipleKey(s.Noisy.Rate)}, true
	})
	var rows []NoisyRow
	for _, k := range order {
		rows = append(rows, noisyRow(k.target, k.rate, byKey[k]))
	}
	ranks := targetRanks(rep)
	slices.SortStableFunc(rows, func(a, b NoisyRow) int {
		if a.Rate != b.Rate {
			if a.Rate < b.Rate {
				return -1
			}
			return 1
		}
		return ranks[a.Target] - ranks[b.Target]
	})
	base := make(map[float64]NoisyRow)
	for _, r := range rows {
		if r.Target == BaselineTarget {
			base[r.Rate] = r
		}
	}
	for i := range rows {
		r := &rows[i]
		if b, ok := base[r.Rate]; ok && b.Goodput > 0 {
			r.Ratio = r.Goodput / b.Goodput
			r.RatioIndicative = r.Indicative || b.Indicative
		}
	}
	return rows
}

// noisyRow computes the row of one target and rate.
func noisyRow(target string, rate float64, samples []bench.Sample) NoisyRow {
	r := NoisyRow{Target: target, Rate: rate, Placement: placementOf(samples)}
	kept := slices.DeleteFunc(slices.Clone(samples), func(s bench.Sample) bool { return s.Behind })
	r.Runs, r.Behind = len(kept), len(samples)-len(kept)
	if len(kept) == 0 {
		kept, r.Indicative = samples, true
	}
	var offered, goodput, rejected, failed, rejFrac, failFrac, p50, p99, tcpu, nuse, rq, rqMax []float64
	for _, s := range kept {
		rt := s.Rates
		offered = append(offered, rt.Offered)
		goodput = append(goodput, rt.Goodput)
		rejected = append(rejected, rt.Rejected)
		failed = append(failed, rt.Failed)
		if rt.Offered > 0 {
			rejFrac = append(rejFrac, rt.Rejected/rt.Offered)
			failFrac = append(failFrac, rt.Failed/rt.Offered)
		}
		if rt.Goodput > 0 {
			p50 = append(p50, s.Latency.P50)
			p99 = append(p99, s.Latency.P99)
		}
		tcpu = append(tcpu, s.TargetCPU)
		nuse = append(nuse, s.Noisy.NeighbourUse)
		rq = append(rq, s.Noisy.RunQueue.Wait)
		rqMax = append(rqMax, s.Noisy.RunQueue.MaxThread)
	}
	r.Offered, r.Goodput, r.Rejected, r.Failed = Median(offered), Median(goodput), Median(rejected), Median(failed)
	r.RejectedFrac, r.FailedFrac = Median(rejFrac), Median(failFrac)
	r.P50, r.P99 = Median(p50), Median(p99)
	r.TargetCPU, r.NeighbourUse = Median(tcpu), Median(nuse)
	r.RunQueueWait, r.MaxThreadWait = Median(rq), Median(rqMax)
	return r
}

// placementOf describes where the samples' sluice workers ran, from the
// first sample that reported it: "pinned 0-1", "floating", or "" for a
// target that reports nothing (net/http).
func placementOf(samples []bench.Sample) string {
	for _, s := range samples {
		if p := s.Placement; p != nil {
			if p.Pinned() {
				return "pinned " + bench.FormatCPUList(p.CPUs)
			}
			return "floating"
		}
	}
	return ""
}

// WriteNoisy writes the noisy samples of rep to w: a line on the setup,
// one table row per target and rate (SummarizeNoisy), and what the columns
// mean. It writes nothing for a report without noisy samples.
func WriteNoisy(w io.Writer, rep *bench.Report) error {
	if rep == nil {
		return errors.New("report: nil report")
	}
	rows := SummarizeNoisy(rep)
	if len(rows) == 0 {
		return nil
	}
	var first *bench.Sample
	for i := range rep.Samples {
		if rep.Samples[i].Noisy != nil {
			first = &rep.Samples[i]
			break
		}
	}
	ni := first.Noisy
	var buf bytes.Buffer
	if ni.NeighbourCPU >= 0 {
		fmt.Fprintf(&buf, "\nnoisy neighbour, shape %s%s: targets on CPUs %s, a busy loop in another process on CPU %d (nice %d, as the targets)\n",
			orDash(first.Shape), handlerOf(rep, bench.ScenarioNoisy, first.Shape), bench.FormatCPUList(ni.CPUs), ni.NeighbourCPU, ni.NeighbourNice)
	} else {
		fmt.Fprintf(&buf, "\nnoisy neighbour's control, shape %s%s: targets on CPUs %s, no neighbour\n",
			orDash(first.Shape), handlerOf(rep, bench.ScenarioNoisy, first.Shape), bench.FormatCPUList(ni.CPUs))
	}
	tw := NewTab(&buf)
	vs := "vs " + BaselineTarget
	Line(tw, "target", "workers", "offered/s", "goodput/s", vs, "503 %", "failed %", "p50 ms", "p99 ms",
		"CPU tgt", "CPU nbr", "rq wait", "rq max", "runs")
	indicative := false
	for _, r := range rows {
		name := r.Target
		if r.Indicative {
			name += "*"
			indicative = true
		}
		ratio := "-"
		if r.Ratio > 0 {
			ratio = fmt.Sprintf("%.2f", r.Ratio)
			if r.RatioIndicative {
				ratio += "*"
			}
		}
		Line(tw, name, orDash(r.Placement), fmt.Sprintf("%.0f", r.Offered), fmt.Sprintf("%.0f", r.Goodput), ratio,
			fmt.Sprintf("%.1f", 100*r.RejectedFrac), fmt.Sprintf("%.1f", 100*r.FailedFrac),
			FormatMS(r.P50), FormatMS(r.P99),
			fmt.Sprintf("%.2f", r.TargetCPU), fmt.Sprintf("%.2f", r.NeighbourUse),
			fmt.Sprintf("%.2f", r.RunQueueWait), fmt.Sprintf("%.2f", r.MaxThreadWait),
			fmt.Sprintf("%d/%d", r.Runs, r.Behind))
	}
	_ = tw.Flush()
	if indicative {
		buf.WriteString("* after a target: the load generator fell behind its schedule in every run of this row (indicative\n" +
			"  only); after a ratio: it rests on such runs, of this row or of " + BaselineTarget + "'s.\n")
	}
	buf.WriteString(strings.Join([]string{
		"workers: where a sluice target's workers ran (pinned to CPUs, or floating: placed by the kernel);",
		"503 %: refused unstarted (Sluice-Not-Started); failed %: late, errors, other statuses;",
		"CPU tgt / nbr: CPU-seconds per second of the target and of the busy neighbour;",
		"rq wait: seconds per second the target's threads, together, waited for a CPU while runnable;",
		"rq max: the same for the one thread that waited most (0.5: runnable half the time and not running).",
	}, "\n") + "\n")
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("report: write noisy: %w", err)
	}
	return nil
}
