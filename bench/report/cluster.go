package report

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sluice-go/sluice/bench"
)

// ClusterRow sums up the runs of one client of the cluster scenario (or
// its kill part) for one target: medians over the kept runs (those whose
// generator kept its schedule), or over all of them when none was kept.
type ClusterRow struct {
	Target string `json:"target"`
	// Part is the client (bench.ClusterNone, ClusterNaive, ClusterSluice)
	// or bench.ClusterKill.
	Part   string `json:"part"`
	Runs   int    `json:"runs"`
	Behind int    `json:"behind"`
	// Capacity is the cluster's C, Multiple the load offered in multiples
	// of it.
	Capacity float64 `json:"capacity"`
	Multiple float64 `json:"multiple"`
	// Offered and Goodput are per second; GoodputFrac is the median of
	// each run's goodput over its C; the fractions are of the offered
	// load; latencies in milliseconds.
	Offered      float64 `json:"offered"`
	Goodput      float64 `json:"goodput"`
	GoodputFrac  float64 `json:"goodput_frac"`
	RejectedFrac float64 `json:"rejected_frac"`
	FailedFrac   float64 `json:"failed_frac"`
	P50          float64 `json:"p50_ms"`
	P99          float64 `json:"p99_ms"`
	// Amplification is the median of the attempts sent per request.
	Amplification float64 `json:"amplification"`
	// Served is, for each backend (the slow one last), the median of its
	// share of the answers the backends gave.
	Served []float64 `json:"served"`
	// Kill is the kill part's figures; nil for the clients.
	Kill *KillRow `json:"kill,omitempty"`
}

// KillRow is the kill part's figures: medians over the runs.
type KillRow struct {
	// ProbeInterval is the breakers' open time.
	ProbeInterval time.Duration `json:"probe_interval"`
	// Opened counts the runs where the killed backend's breaker opened,
	// OpenAfter the median time from the kill to its opening over them.
	Opened    int           `json:"opened"`
	OpenAfter time.Duration `json:"open_after"`
	// Closed counts the runs where it closed again after the backend's
	// return, ClosedAfter the median time from the return over them.
	Closed      int           `json:"closed"`
	ClosedAfter time.Duration `json:"closed_after"`
	// Phases are the requests by the breaker's state when they were sent
	// (bench.KillBefore, KillDead, KillOpen, KillAfter).
	Phases map[string]KillPhase `json:"phases"`
}

// KillPhase is the outcome of the requests sent during one phase of the
// kill part: medians over the runs that had some.
type KillPhase struct {
	Requests   float64 `json:"requests"`
	FailedFrac float64 `json:"failed_frac"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
}

// SummarizeCluster returns one ClusterRow per target and part of rep's
// cluster samples, in the order they first appear (the suite runs the
// parts of a target in bench.ClusterParts' order); nil when there are
// none.
func SummarizeCluster(rep *bench.Report) []ClusterRow {
	if rep == nil {
		return nil
	}
	type key struct{ target, part string }
	keys, byKey := groupSamples(rep, func(s bench.Sample) (key, bool) {
		if s.Scenario != bench.ScenarioCluster || s.Cluster == nil {
			return key{}, false
		}
		return key{s.Target, s.Cluster.Part}, true
	})
	var rows []ClusterRow
	for _, k := range keys {
		rows = append(rows, clusterRow(k.target, k.part, byKey[k]))
	}
	return rows
}

// clusterRow computes the row of one target and part.
func clusterRow(target, part string, samples []bench.Sample) ClusterRow {
	r := ClusterRow{Target: target, Part: part}
	kept := slices.DeleteFunc(slices.Clone(samples), func(s bench.Sample) bool { return s.Behind })
	r.Runs, r.Behind = len(kept), len(samples)-len(kept)
	if len(kept) == 0 {
		kept = samples
	}
	var capacity, multiple, offered, goodput, frac, rej, fail, p50, p99, amp []float64
	var served [][]float64
	for _, s := range kept {
		rt, ci := s.Rates, s.Cluster
		capacity = append(capacity, s.Capacity)
		multiple = append(multiple, s.Multiple)
		offered = append(offered, rt.Offered)
		goodput = append(goodput, rt.Goodput)
		if s.Capacity > 0 {
			frac = append(frac, rt.Goodput/s.Capacity)
		}
		if rt.Offered > 0 {
			rej = append(rej, rt.Rejected/rt.Offered)
			fail = append(fail, rt.Failed/rt.Offered)
		}
		if rt.Goodput > 0 {
			p50 = append(p50, s.Latency.P50)
			p99 = append(p99, s.Latency.P99)
		}
		amp = append(amp, ci.Amplification)
		var total int64
		for _, b := range ci.Backends {
			total += b.Served
		}
		for i, b := range ci.Backends {
			if i == len(served) {
				served = append(served, nil)
			}
			if total > 0 {
				served[i] = append(served[i], float64(b.Served)/float64(total))
			}
		}
	}
	r.Capacity, r.Multiple, r.Offered, r.Goodput = Median(capacity), Median(multiple), Median(offered), Median(goodput)
	r.GoodputFrac, r.RejectedFrac, r.FailedFrac = Median(frac), Median(rej), Median(fail)
	r.P50, r.P99, r.Amplification = Median(p50), Median(p99), Median(amp)
	for _, sh := range served {
		r.Served = append(r.Served, Median(sh))
	}
	if part == bench.ClusterKill {
		r.Kill = killRow(kept)
	}
	return r
}

// killRow computes the kill part's figures.
func killRow(samples []bench.Sample) *KillRow {
	k := &KillRow{Phases: make(map[string]KillPhase)}
	var openAfter, closedAfter []float64
	phases := make(map[string][][]float64) // requests, failed, p50, p99
	for _, s := range samples {
		ki := s.Cluster.Kill
		if ki == nil {
			continue
		}
		k.ProbeInterval = ki.ProbeInterval
		if ki.Opened {
			k.Opened++
			openAfter = append(openAfter, float64(ki.OpenAfter))
		}
		if ki.Closed {
			k.Closed++
			closedAfter = append(closedAfter, float64(ki.ClosedAfter))
		}
		var sec float64 // the sending window: class rates are per second of it
		if s.Rates.Offered > 0 {
			sec = float64(s.Requests) / s.Rates.Offered
		}
		for name, c := range s.Classes {
			p := phases[name]
			if p == nil {
				p = make([][]float64, 4)
			}
			if n := c.Rates.Offered * sec; n > 0 {
				p[0] = append(p[0], n)
				p[1] = append(p[1], c.Rates.Failed/c.Rates.Offered)
			}
			if c.Rates.Goodput > 0 {
				p[2] = append(p[2], c.Latency.P50)
				p[3] = append(p[3], c.Latency.P99)
			}
			phases[name] = p
		}
	}
	k.OpenAfter = time.Duration(Median(openAfter))
	k.ClosedAfter = time.Duration(Median(closedAfter))
	for name, p := range phases {
		k.Phases[name] = KillPhase{Requests: Median(p[0]), FailedFrac: Median(p[1]), P50: Median(p[2]), P99: Median(p[3])}
	}
	return k
}

// WriteCluster writes the cluster samples of rep to w: a line on the
// setup and a table of the clients at the offered multiple, one row per
// target and client; then the kill part's table, one row per target. It
// writes nothing for a report without cluster samples.
func WriteCluster(w io.Writer, rep *bench.Report) error {
	if rep == nil {
		return errors.New("report: nil report")
	}
	rows := SummarizeCluster(rep)
	if len(rows) == 0 {
		return nil
	}
	var fast, slow bench.HandlerSpec
	for _, s := range rep.Samples {
		if s.Cluster != nil && len(s.Cluster.Backends) > 0 {
			bs := s.Cluster.Backends
			fast, slow = bs[0].Handler, bs[len(bs)-1].Handler
			break
		}
	}
	var buf bytes.Buffer
	clients := slices.DeleteFunc(slices.Clone(rows), func(r ClusterRow) bool { return r.Kill != nil })
	kills := slices.DeleteFunc(slices.Clone(rows), func(r ClusterRow) bool { return r.Kill == nil })
	if len(clients) > 0 {
		fmt.Fprintf(&buf, "\ncluster: 3 backends, each a child process of the target, busy %v a request, the last %v; C their capacities measured together;\n", fast.CPU, slow.CPU)
		fmt.Fprintf(&buf, "%sx of C offered open loop through each client:\n", formatMultiple(clients[0].Multiple))
		tw := NewTab(&buf)
		Line(tw, "target", "client", "C/s", "offered/s", "goodput/s", "goodput/C", "sent/offered", "503 %", "failed %", "p50 ms", "p99 ms", "served % (slow last)", "runs")
		for _, r := range clients {
			Line(tw, r.Target, r.Part, fmt.Sprintf("%.0f", r.Capacity), fmt.Sprintf("%.0f", r.Offered), fmt.Sprintf("%.0f", r.Goodput),
				fmt.Sprintf("%.3f", r.GoodputFrac), fmt.Sprintf("%.3f", r.Amplification),
				fmt.Sprintf("%.1f", 100*r.RejectedFrac), fmt.Sprintf("%.1f", 100*r.FailedFrac),
				FormatMS(r.P50), FormatMS(r.P99), formatShares(r.Served), fmt.Sprintf("%d/%d", r.Runs, r.Behind))
		}
		_ = tw.Flush()
	}
	for i, r := range kills {
		if i == 0 {
			fmt.Fprintf(&buf, "\none fast backend killed (SIGKILL) and started again on its address, sluice's client at %sx of C, probe interval %v:\n",
				formatMultiple(r.Multiple), r.Kill.ProbeInterval)
		}
		writeKill(&buf, r)
	}
	buf.WriteString("\n" + strings.Join([]string{
		"clients: none (round robin, no retry), naive (round robin, every failure retried at once, anywhere, no budget),",
		"sluice (package client: retry elsewhere within the budget, power of two choices, breakers);",
		"sent/offered: attempts sent to the backends per request; served %: each backend's share of the answers;",
		"503 %: the last answer was a rejection (Sluice-Not-Started); failed %: late, errors, other statuses;",
		"opened: the killed backend's breaker opened, after the kill; closed: it closed again, after the return",
		"(in probe intervals too); by phase: the requests sent before the kill, while the backend was dead with",
		"its breaker closed, while the breaker was open or half-open, after it closed; runs: kept/behind.",
	}, "\n") + "\n")
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("report: write cluster: %w", err)
	}
	return nil
}

// writeKill writes the kill part of one target.
func writeKill(buf *bytes.Buffer, r ClusterRow) {
	k := r.Kill
	runs := r.Runs + r.Behind
	opened, closed := "never opened", "never closed"
	if k.Opened > 0 {
		opened = fmt.Sprintf("opened %s ms after the kill (%d of %d runs)", FormatMS(ms(k.OpenAfter)), k.Opened, runs)
	}
	if k.Closed > 0 {
		closed = fmt.Sprintf("closed %s ms after the return, %.2f probe intervals (%d of %d runs)",
			FormatMS(ms(k.ClosedAfter)), float64(k.ClosedAfter)/float64(k.ProbeInterval), k.Closed, runs)
	}
	fmt.Fprintf(buf, "%s: the breaker %s, %s; runs %d/%d\n", r.Target, opened, closed, r.Runs, r.Behind)
	tw := NewTab(buf)
	Line(tw, "phase", "requests", "failed %", "p50 ms", "p99 ms")
	for _, name := range []string{bench.KillBefore, bench.KillDead, bench.KillOpen, bench.KillAfter} {
		p, ok := k.Phases[name]
		if !ok {
			Line(tw, name, "0", "-", "-", "-")
			continue
		}
		Line(tw, name, fmt.Sprintf("%.0f", p.Requests), fmt.Sprintf("%.1f", 100*p.FailedFrac), FormatMS(p.P50), FormatMS(p.P99))
	}
	_ = tw.Flush()
}

// ms converts d to milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// formatShares prints shares as percentages, "43/41/16".
func formatShares(shares []float64) string {
	if len(shares) == 0 {
		return "-"
	}
	parts := make([]string, len(shares))
	for i, s := range shares {
		parts[i] = fmt.Sprintf("%.0f", 100*s)
	}
	return strings.Join(parts, "/")
}
