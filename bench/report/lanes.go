package report

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/sluice-go/sluice/bench"
)

// The targets the lanes scenario is checked against (docs: the issue of
// the background lane).
const (
	// LanesMaxP99Ratio is the most the interactive p99 with the batch in
	// the background lane may be, as a multiple of its p99 alone.
	LanesMaxP99Ratio = 1.2
	// LanesMinBatchShare is the least CPU share the batch in the
	// background lane must get: its 10%, within 10%.
	LanesMinBatchShare = 0.10 * 0.9
	// LanesMaxSettle is how soon after the live change the new shares
	// must hold.
	LanesMaxSettle = time.Second
	// LanesSettleTolerance is how close to its final mean the batch share
	// must be for the shares to hold: within 10% of it.
	LanesSettleTolerance = 0.10
	// LanesHoldSpan is the span the share is averaged over to say whether
	// it holds: a 100 ms window is 50 batch slices, whose count the
	// interactive load's own bursts move by more than 10% now and then.
	LanesHoldSpan = time.Second
)

// LanesPart sums up the runs of one part of the lanes scenario for one
// target: medians over the kept runs (those whose generator kept the
// interactive load's schedule), or over all of them when none was kept.
type LanesPart struct {
	Runs   int `json:"runs"`
	Behind int `json:"behind"`
	// Offered is the interactive load per second; GoodputFrac the share
	// of it answered with a 2xx within the deadline; P50 and P99 its
	// latencies in milliseconds.
	Offered     float64 `json:"offered"`
	GoodputFrac float64 `json:"goodput_frac"`
	P50         float64 `json:"p50_ms"`
	P99         float64 `json:"p99_ms"`
	// BatchRate is the batch requests completed per second of the window.
	BatchRate float64 `json:"batch_rate"`
	// BatchShare and InteractiveShare are the CPU shares from the
	// generator's completions; the Target ones from the target's (see
	// bench.LanesInfo).
	BatchShare             float64 `json:"batch_share"`
	InteractiveShare       float64 `json:"interactive_share"`
	TargetBatchShare       float64 `json:"target_batch_share"`
	TargetInteractiveShare float64 `json:"target_interactive_share"`
	// OtherCPU is the CPU time neither the target nor the generator used
	// during the run, in CPU-seconds per second (bench.LanesInfo); 0 when
	// unknown.
	OtherCPU float64 `json:"other_cpu"`
	// Live only: when the change was made (from the start of the run),
	// the batch's share (the target's count) before it and once settled
	// (the final mean), how long after it the share first reached its
	// final mean (Reach) and settled there by the target's count
	// (Settle) and by the generator's (SettleRequests): medians over the
	// runs, a run that never settled counting as longer than any;
	// Settles are the target's per run, in report order; Settled and
	// SettledRequests count the runs that did, Changed the runs whose
	// change was made. See LanesSettle.
	// Windows, Above and Below are the sums over the runs of Settling's:
	// the windows from the first within the band on, and those of them
	// above and below it.
	Windows         int             `json:"windows,omitempty"`
	Above           int             `json:"above,omitempty"`
	Below           int             `json:"below,omitempty"`
	ChangeAt        time.Duration   `json:"change_at,omitempty"`
	BatchBefore     float64         `json:"batch_before,omitempty"`
	BatchAfter      float64         `json:"batch_after,omitempty"`
	Reach           time.Duration   `json:"reach,omitempty"`
	Settle          time.Duration   `json:"settle,omitempty"`
	Settles         []time.Duration `json:"settles,omitempty"`
	Settled         int             `json:"settled,omitempty"`
	SettleRequests  time.Duration   `json:"settle_requests,omitempty"`
	SettledRequests int             `json:"settled_requests,omitempty"`
	Changed         int             `json:"changed,omitempty"`
}

// Never is the settle time of a share that never settled.
const Never = time.Duration(math.MaxInt64)

// LanesRow sums up the lanes scenario for one target.
type LanesRow struct {
	Target string `json:"target"`
	// Placement says where a sluice target's workers ran; Workers how
	// many there were (GOMAXPROCS for net/http).
	Placement string `json:"placement,omitempty"`
	Workers   int    `json:"workers"`
	// Capacity is the median C of the interactive handler.
	Capacity float64 `json:"capacity"`
	// Parts holds the parts the target ran, by name (bench.LanesParts).
	Parts map[string]LanesPart `json:"parts"`
	// P99Ratio is the interactive p99 under the batch flood (in the
	// background lane for a target with lanes, one-lane for the others)
	// over its p99 alone, from the parts' medians; 0 when either is
	// missing. Pairs are the same per repeat, for the repeats where both
	// runs were kept.
	P99Ratio float64     `json:"p99_ratio"`
	Pairs    []LanesPair `json:"pairs,omitempty"`
}

// LanesPair is one repeat's interactive p99 under the flood and alone, and
// the CPU time others used in each run (bench.LanesInfo.OtherCPU, -1 when
// unknown).
type LanesPair struct {
	Repeat       int     `json:"repeat"`
	Flooded      float64 `json:"flooded_p99_ms"`
	Alone        float64 `json:"alone_p99_ms"`
	FloodedOther float64 `json:"flooded_other_cpu"`
	AloneOther   float64 `json:"alone_other_cpu"`
}

// Ratio is the pair's p99 under the flood over alone.
func (p LanesPair) Ratio() float64 { return p.Flooded / p.Alone }

// flooded returns the part a target's interactive p99 under the flood is
// read from: background when it ran it, else one-lane.
func (r LanesRow) flooded() string {
	if _, ok := r.Parts[bench.LanesInBackground]; ok {
		return bench.LanesInBackground
	}
	return bench.LanesOneLane
}

// SummarizeLanes returns one LanesRow per target of rep's lanes samples,
// in the order the targets first appear; nil when there are none.
func SummarizeLanes(rep *bench.Report) []LanesRow {
	if rep == nil {
		return nil
	}
	targets, byTarget := groupSamples(rep, func(s bench.Sample) (string, bool) {
		return s.Target, s.Scenario == bench.ScenarioLanes && s.Lanes != nil
	})
	var rows []LanesRow
	for _, t := range targets {
		rows = append(rows, lanesRow(t, byTarget[t]))
	}
	return rows
}

// lanesRow computes the row of one target.
func lanesRow(target string, samples []bench.Sample) LanesRow {
	r := LanesRow{Target: target, Placement: PlacementOf(samples), Parts: map[string]LanesPart{}}
	var capacity, workers []float64
	byPart := map[string][]bench.Sample{}
	for _, s := range samples {
		capacity = append(capacity, s.Capacity)
		workers = append(workers, float64(s.Lanes.Workers))
		byPart[s.Lanes.Part] = append(byPart[s.Lanes.Part], s)
	}
	r.Capacity, r.Workers = Median(capacity), int(Median(workers))
	for part, ss := range byPart {
		r.Parts[part] = lanesPart(ss)
	}
	flood, alone := r.Parts[r.flooded()], r.Parts[bench.LanesAlone]
	if flood.P99 > 0 && alone.P99 > 0 {
		r.P99Ratio = flood.P99 / alone.P99
	}
	for _, a := range byPart[bench.LanesAlone] {
		for _, f := range byPart[r.flooded()] {
			if f.Repeat == a.Repeat && !f.Behind && !a.Behind && a.Latency.P99 > 0 && f.Latency.P99 > 0 {
				r.Pairs = append(r.Pairs, LanesPair{
					Repeat: a.Repeat, Flooded: f.Latency.P99, Alone: a.Latency.P99,
					FloodedOther: otherCPU(f), AloneOther: otherCPU(a),
				})
			}
		}
	}
	return r
}

// otherCPU returns the CPU time others used during a lanes run, or -1.
func otherCPU(s bench.Sample) float64 {
	if s.Lanes.HostCPU < 0 {
		return -1
	}
	return s.Lanes.OtherCPU
}

// lanesPart computes one part's medians.
func lanesPart(samples []bench.Sample) LanesPart {
	var p LanesPart
	kept := slices.DeleteFunc(slices.Clone(samples), func(s bench.Sample) bool { return s.Behind })
	p.Runs, p.Behind = len(kept), len(samples)-len(kept)
	if len(kept) == 0 {
		kept = samples
	}
	var offered, good, p50, p99, batchRate, bs, is, tbs, tis, other []float64
	var at, before, after []float64
	var reach, settleReq []time.Duration
	for _, s := range kept {
		li := s.Lanes
		offered = append(offered, s.Rates.Offered)
		if s.Rates.Offered > 0 {
			good = append(good, s.Rates.Goodput/s.Rates.Offered)
		}
		if s.Rates.Goodput > 0 {
			p50 = append(p50, s.Latency.P50)
			p99 = append(p99, s.Latency.P99)
		}
		if sec := windowOf(s).Seconds(); sec > 0 {
			batchRate = append(batchRate, float64(li.BatchDone)/sec)
		}
		if o := otherCPU(s); o >= 0 {
			other = append(other, o)
		}
		bs, is = append(bs, li.BatchShare), append(is, li.InteractiveShare)
		tbs, tis = append(tbs, li.TargetBatchShare), append(tis, li.TargetInteractiveShare)
		if c := li.Change; c != nil && c.OK {
			p.Changed++
			at = append(at, float64(c.At))
			st := LanesSettle(li.Series, li.Window, c.At, func(w bench.LanesWindow) float64 { return w.TargetBatch })
			before, after = append(before, st.Before), append(after, st.Final)
			reach = append(reach, st.Reach)
			p.Windows, p.Above, p.Below = p.Windows+st.Windows, p.Above+st.Above, p.Below+st.Below
			p.Settles = append(p.Settles, st.Settle)
			if st.Settle != Never {
				p.Settled++
			}
			sr := LanesSettle(li.Series, li.Window, c.At, func(w bench.LanesWindow) float64 { return w.Batch })
			settleReq = append(settleReq, sr.Settle)
			if sr.Settle != Never {
				p.SettledRequests++
			}
		}
	}
	p.Offered, p.GoodputFrac, p.P50, p.P99 = Median(offered), Median(good), Median(p50), Median(p99)
	p.BatchRate = Median(batchRate)
	p.BatchShare, p.InteractiveShare = Median(bs), Median(is)
	p.TargetBatchShare, p.TargetInteractiveShare = Median(tbs), Median(tis)
	p.OtherCPU = Median(other)
	if len(at) > 0 {
		p.ChangeAt = time.Duration(Median(at))
		p.BatchBefore, p.BatchAfter = Median(before), Median(after)
		p.Reach, p.Settle, p.SettleRequests = durationMedian(reach), durationMedian(p.Settles), durationMedian(settleReq)
	}
	return p
}

// durationMedian is median for settle times, which may be Never: the
// middle two of an even count are averaged unless one is Never, which is
// then the median.
func durationMedian(xs []time.Duration) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	lo, hi := s[(n-1)/2], s[n/2]
	if hi == Never {
		return Never
	}
	return lo + (hi-lo)/2
}

// windowOf returns the sending window of a lanes sample: its series'
// extent.
func windowOf(s bench.Sample) time.Duration {
	li := s.Lanes
	return time.Duration(len(li.Series)) * li.Window
}

// Settling is when a share settles after a change, by LanesSettle.
type Settling struct {
	// Before is the mean share over the windows wholly before the change;
	// Final the mean over the last half of those wholly after it.
	Before, Final float64
	// Reach is the time from the change to the start of the first window
	// whose share is within LanesSettleTolerance of Final; Never when none
	// is. Settle is the time from the change from which on the share
	// holds: Reach, or later if the share's mean over a LanesHoldSpan
	// (sliding by a window) strays out of that band afterwards; Never when
	// the last span's mean does (or the run has less than a span after
	// the change).
	Settle, Reach time.Duration
	// Windows counts the windows from the first within the band on;
	// Above and Below those of them above and below it.
	Windows, Above, Below int
}

// LanesSettle reads, from a run's series of windows of width, how the share
// that get reads settles after a change at at.
func LanesSettle(series []bench.LanesWindow, width, at time.Duration, get func(bench.LanesWindow) float64) Settling {
	st := Settling{Settle: Never, Reach: Never}
	var pre, post []bench.LanesWindow
	for _, w := range series {
		switch {
		case w.Start+width <= at:
			pre = append(pre, w)
		case w.Start >= at:
			post = append(post, w)
		}
	}
	mean := func(ws []bench.LanesWindow) float64 {
		if len(ws) == 0 {
			return 0
		}
		sum := 0.0
		for _, w := range ws {
			sum += get(w)
		}
		return sum / float64(len(ws))
	}
	st.Before = mean(pre)
	if len(post) == 0 {
		return st
	}
	st.Final = mean(post[len(post)/2:])
	if st.Final <= 0 {
		return st
	}
	inBand := func(v float64) bool { return math.Abs(v-st.Final) <= LanesSettleTolerance*st.Final }
	within := func(w bench.LanesWindow) bool { return inBand(get(w)) }
	var holds time.Duration = Never
	if n := max(int(LanesHoldSpan/width), 1); len(post) >= n {
		k := len(post) - n + 1 // spans post[j:j+n] in band for every j >= k
		for k > 0 && inBand(mean(post[k-1:k-1+n])) {
			k--
		}
		if k < len(post)-n+1 {
			holds = post[k].Start - at
		}
	}
	if i := slices.IndexFunc(post, within); i >= 0 {
		st.Reach = post[i].Start - at
		if holds != Never {
			st.Settle = max(holds, st.Reach)
		}
		for _, w := range post[i:] {
			st.Windows++
			switch v := get(w); {
			case v > (1+LanesSettleTolerance)*st.Final:
				st.Above++
			case v < (1-LanesSettleTolerance)*st.Final:
				st.Below++
			}
		}
	}
	return st
}

// LanesCheck is one of the targets the lanes scenario is checked against.
type LanesCheck struct {
	// What the check is, in words; Value what was measured.
	What  string `json:"what"`
	Value string `json:"value"`
	// Pass, when Known, says whether the target was met; a check without
	// a threshold (shown beside the others) is Info.
	Pass  bool `json:"pass"`
	Known bool `json:"known"`
	Info  bool `json:"info,omitempty"`
}

// LanesChecks checks rows against the targets: the first target with
// lanes (sluice) for the first three, the targets without lanes (net/http)
// for the last, which has no threshold.
func LanesChecks(rows []LanesRow) []LanesCheck {
	var lane *LanesRow
	for i := range rows {
		if _, ok := rows[i].Parts[bench.LanesInBackground]; ok {
			lane = &rows[i]
			break
		}
	}
	p99 := LanesCheck{What: fmt.Sprintf("interactive p99 with the batch in the background lane within %.0f%% of alone", 100*(LanesMaxP99Ratio-1))}
	share := LanesCheck{What: fmt.Sprintf("the batch in the background lane gets at least %.0f%% of the CPU (its 10%%, within 10%%)", 100*LanesMinBatchShare)}
	settle := LanesCheck{What: fmt.Sprintf("after the live change the batch's new share holds within %v (its mean over every later %v within %.0f%% of its final mean)", LanesMaxSettle, LanesHoldSpan, 100*LanesSettleTolerance)}
	for _, c := range []*LanesCheck{&p99, &share, &settle} {
		c.Value = "not measured"
	}
	if lane != nil {
		bg, alone := lane.Parts[bench.LanesInBackground], lane.Parts[bench.LanesAlone]
		if lane.P99Ratio > 0 {
			p99.Known, p99.Pass = true, lane.P99Ratio <= LanesMaxP99Ratio
			p99.Value = fmt.Sprintf("%s: %.2fx (p99 %s ms against %s ms alone)", lane.Target, lane.P99Ratio, FormatMS(bg.P99), FormatMS(alone.P99))
		}
		if bg.Runs+bg.Behind > 0 {
			share.Known, share.Pass = true, bg.BatchShare >= LanesMinBatchShare
			share.Value = fmt.Sprintf("%s: %.1f%% (the target's count: %.1f%%; interactive %.1f%%)",
				lane.Target, 100*bg.BatchShare, 100*bg.TargetBatchShare, 100*bg.InteractiveShare)
		}
		if live, ok := lane.Parts[bench.LanesLive]; ok && live.Changed > 0 {
			settle.Known, settle.Pass = true, live.Settle <= LanesMaxSettle
			settle.Value = fmt.Sprintf("%s: %s (per run: %s; first reached after %s; batch %.1f%% -> %.1f%%)",
				lane.Target, formatSettle(live.Settle), formatSettles(live.Settles), formatSettle(live.Reach), 100*live.BatchBefore, 100*live.BatchAfter)
		}
	}
	checks := []LanesCheck{p99, share, settle}
	for _, r := range rows {
		if _, ok := r.Parts[bench.LanesInBackground]; ok {
			continue
		}
		one, alone := r.Parts[bench.LanesOneLane], r.Parts[bench.LanesAlone]
		if one.Runs+one.Behind == 0 {
			continue
		}
		c := LanesCheck{What: r.Target + "'s interactive p99 under the same flood", Info: true, Known: true}
		c.Value = fmt.Sprintf("%s ms (alone %s ms", FormatMS(one.P99), FormatMS(alone.P99))
		if r.P99Ratio > 0 {
			c.Value += fmt.Sprintf(", %.2fx", r.P99Ratio)
		}
		if lane != nil {
			c.Value += fmt.Sprintf("; %s with the batch in the background lane: %s ms", lane.Target, FormatMS(lane.Parts[bench.LanesInBackground].P99))
		}
		c.Value += ")"
		checks = append(checks, c)
	}
	return checks
}

// formatOther prints the CPU time others used, or "?" when unknown.
func formatOther(x float64) string {
	if x < 0 {
		return "?"
	}
	return fmt.Sprintf("%.2f", x)
}

// formatSettles prints settle times, comma-separated.
func formatSettles(ds []time.Duration) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = formatSettle(d)
	}
	return strings.Join(out, ", ")
}

// formatSettle prints a settle time, or "never".
func formatSettle(d time.Duration) string {
	if d == Never {
		return "never"
	}
	return d.Round(time.Millisecond).String()
}

// WriteLanesReport writes rep as WriteTable does, then its lanes samples
// (WriteLanes).
func WriteLanesReport(w io.Writer, rep *bench.Report) error {
	if rep == nil {
		return errors.New("report: nil report")
	}
	if err := WriteTable(w, rep); err != nil {
		return err
	}
	return WriteLanes(w, rep)
}

// WriteLanes writes the lanes samples of rep to w: the load, a table of
// every part per target, the live change, and the targets checked
// (LanesChecks). It writes nothing for a report without lanes samples.
func WriteLanes(w io.Writer, rep *bench.Report) error {
	if rep == nil {
		return errors.New("report: nil report")
	}
	rows := SummarizeLanes(rep)
	if len(rows) == 0 {
		return nil
	}
	// The setup, from the samples that show each part of it.
	var (
		first, batch, lane, live bench.LanesInfo
		multiple                 float64
	)
	for _, s := range rep.Samples {
		li := s.Lanes
		if s.Scenario != bench.ScenarioLanes || li == nil {
			continue
		}
		if first.Part == "" {
			first, multiple = *li, s.Multiple
		}
		if batch.BatchRate == 0 && li.BatchRate > 0 {
			batch = *li
		}
		if lane.Shares == 0 && li.Shares > 0 {
			lane = *li
		}
		if live.LiveShares == 0 && li.LiveShares > 0 {
			live = *li
		}
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "\nlanes: %s computes %v at %sx of C, beside %s computing %v in slices of %v (sluice.Yield between; a no-op on net/http)\n",
		bench.LanesInteractivePath, first.Interactive, formatMultiple(multiple), bench.LanesBatchPath, first.Batch, first.Slice)
	if batch.BatchRate > 0 {
		fmt.Fprintf(&buf, "batch offered at %.4g/s (C_b = workers / %v = %.4g/s) on %d connections of its own\n",
			batch.BatchRate, batch.Batch, float64(batch.Workers)/batch.Batch.Seconds(), batch.BatchConns)
	}
	if lane.Shares > 0 {
		fmt.Fprintf(&buf, "background lane: priority %d, %d shares", lane.Priority, lane.Shares)
		if live.LiveShares > 0 {
			fmt.Fprintf(&buf, "; live: %d -> %d shares through laneadmin at the middle of the run", lane.Shares, live.LiveShares)
		}
		buf.WriteString("\n")
	}
	tw := NewTab(&buf)
	Line(tw, "target", "part", "workers", "C/s", "offered/s", "goodput", "p50 ms", "p99 ms", "batch/s", "batch CPU", "interactive CPU", "in target: batch", "interactive", "others' CPU", "runs")
	for _, r := range rows {
		for _, part := range bench.LanesParts {
			p, ok := r.Parts[part]
			if !ok {
				continue
			}
			Line(tw, r.Target, part, workersOf(r), fmt.Sprintf("%.0f", r.Capacity), fmt.Sprintf("%.0f", p.Offered),
				fmt.Sprintf("%.3f", p.GoodputFrac), FormatMS(p.P50), FormatMS(p.P99),
				fmt.Sprintf("%.1f", p.BatchRate), percentCell(p.BatchShare), percentCell(p.InteractiveShare),
				percentCell(p.TargetBatchShare), percentCell(p.TargetInteractiveShare), fmt.Sprintf("%.2f", p.OtherCPU), fmt.Sprintf("%d/%d", p.Runs, p.Behind))
		}
	}
	_ = tw.Flush()
	for _, r := range rows {
		live, ok := r.Parts[bench.LanesLive]
		if !ok {
			continue
		}
		if live.Changed == 0 {
			fmt.Fprintf(&buf, "\n%s live: the change was not made\n", r.Target)
			continue
		}
		if n := max(live.Runs, live.Behind); live.Changed < n {
			fmt.Fprintf(&buf, "\n%s live: the change was made in %d of %d runs; the others are left out below", r.Target, live.Changed, n)
		}
		fmt.Fprintf(&buf, "\n%s live: change at %.2f s; batch share (in target) %.1f%% before, %.1f%% after (final mean), first reached after %s;\n"+
			"  from then on, %d of %d windows strayed out of the band (10%% of the final mean): %d above, %d below;\n"+
			"  settled after %s by the target's count (per run: %s; %d of %d runs settled), %s by the requests' completions (%d of %d runs)\n",
			r.Target, live.ChangeAt.Seconds(), 100*live.BatchBefore, 100*live.BatchAfter, formatSettle(live.Reach),
			live.Above+live.Below, live.Windows, live.Above, live.Below,
			formatSettle(live.Settle), formatSettles(live.Settles), live.Settled, live.Changed,
			formatSettle(live.SettleRequests), live.SettledRequests, live.Changed)
	}
	buf.WriteString("\np99 under the flood over p99 alone (background part for a target with lanes, one-lane otherwise):\n")
	for _, r := range rows {
		ratio := "-"
		if r.P99Ratio > 0 {
			ratio = fmt.Sprintf("%.2fx", r.P99Ratio)
		}
		fmt.Fprintf(&buf, "  %s %s: %s; per repeat:", r.Target, r.flooded(), ratio)
		if len(r.Pairs) == 0 {
			buf.WriteString(" -")
		}
		for _, pr := range r.Pairs {
			fmt.Fprintf(&buf, "\n    #%d %.2fx (%s ms against %s ms; others' CPU %s, %s)", pr.Repeat, pr.Ratio(),
				FormatMS(pr.Flooded), FormatMS(pr.Alone), formatOther(pr.FloodedOther), formatOther(pr.AloneOther))
		}
		buf.WriteString("\n")
	}
	buf.WriteString("\ntargets:\n")
	for _, c := range LanesChecks(rows) {
		mark := "INFO"
		switch {
		case c.Info:
		case !c.Known:
			mark = "----"
		case c.Pass:
			mark = "PASS"
		default:
			mark = "FAIL"
		}
		fmt.Fprintf(&buf, "  %s  %s: %s\n", mark, c.What, c.Value)
	}
	buf.WriteString("\n" + strings.Join([]string{
		"goodput: interactive answers with a 2xx within the deadline over those offered; p50, p99: of those answers;",
		"batch/s: batch requests completed per second of the window; batch CPU, interactive CPU: completions within the window",
		"times their work, over the window times the workers (from the generator's completion times); in target: the same",
		"counted in the target, each batch slice and interactive request where it ended (answered in time or not);",
		"settled: the first 100 ms window from which on the batch share's mean over every 1 s span is within 10% of the mean",
		"of the last half of the windows after the change; first reached: the first single window within it; strayed: single",
		"windows out of that band after it (a batch request is 20 ms of a 100 ms window times the workers: the requests'",
		"completions cannot settle within 10% at that resolution, and the check reads the target's count);",
		"the work is a busy-wait of wall time, as the weather handler's: a thread descheduled in it counts the time it waited;",
		"others' CPU: CPU-seconds per second of the machine that neither the target nor the generator used (other programs,",
		"the kernel's work for neither, the hypervisor's steal): a shared machine's disturbance;",
		"runs: kept/behind (the generator fell behind the interactive schedule).",
	}, "\n") + "\n")
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("report: write lanes: %w", err)
	}
	return nil
}

// workersOf prints a row's workers and placement: "1", "2 floating".
func workersOf(r LanesRow) string {
	return strings.TrimSpace(fmt.Sprintf("%d %s", r.Workers, r.Placement))
}

// percentCell prints a share as a percentage.
func percentCell(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// LanesPlotName is the file LanesPlots writes.
const LanesPlotName = "lanes-live.png"

// LanesPlots draws the live part of the lanes scenario in dir, which it
// creates if missing, and returns the path: LanesPlotName, the batch's and
// the interactive route's CPU shares per window against time, for the
// first kept run (lowest repeat) of the first target with one, counted in
// the target (solid) and from the generator's completions (thin), with the
// change and the settle time marked. It returns nothing without such a
// run.
func LanesPlots(dir string, rep *bench.Report) ([]string, error) {
	if rep == nil {
		return nil, errors.New("report: nil report")
	}
	p, err := lanesPlot(rep)
	if err != nil || p == nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: plot directory: %w", err)
	}
	path := filepath.Join(dir, LanesPlotName)
	if err := p.Save(plotWidth, plotHeight, path); err != nil {
		return nil, fmt.Errorf("report: save %s: %w", LanesPlotName, err)
	}
	return []string{path}, nil
}

// liveRun picks the live run LanesPlots draws.
func liveRun(rep *bench.Report) (bench.Sample, bool) {
	var pick bench.Sample
	found := false
	for _, s := range rep.Samples {
		li := s.Lanes
		if s.Scenario != bench.ScenarioLanes || li == nil || li.Part != bench.LanesLive || li.Change == nil || !li.Change.OK || len(li.Series) == 0 {
			continue
		}
		switch {
		case !found:
		case pick.Target != s.Target:
			continue
		case pick.Behind && !s.Behind, pick.Behind == s.Behind && s.Repeat < pick.Repeat:
		default:
			continue
		}
		pick, found = s, true
	}
	return pick, found
}

func lanesPlot(rep *bench.Report) (*plot.Plot, error) {
	s, ok := liveRun(rep)
	if !ok {
		return nil, nil
	}
	li := s.Lanes
	st := LanesSettle(li.Series, li.Window, li.Change.At, func(w bench.LanesWindow) float64 { return w.TargetBatch })
	behind := ""
	if s.Behind {
		behind = ", generator behind schedule"
	}
	p := newPlot(fmt.Sprintf("Lanes, live change of the background lane's shares %d -> %d\n%s, repeat #%d%s; CPU share per %s ms window; settled (every later second within 10%%): %s",
		li.Shares, li.LiveShares, s.Target, s.Repeat, behind, formatDurationMS(li.Window), formatSettle(st.Settle)),
		"time since start of run (s)", "share of the workers' CPU")
	p.Legend.Left, p.Legend.XOffs = false, -legendInset
	ymax := 1.0
	for _, ln := range []struct {
		name  string
		get   func(bench.LanesWindow) float64
		color int
		width vg.Length
		dash  []vg.Length
	}{
		{"batch, in target", func(w bench.LanesWindow) float64 { return w.TargetBatch }, 0, vg.Points(1.5), nil},
		{"interactive, in target", func(w bench.LanesWindow) float64 { return w.TargetInteractive }, 1, vg.Points(1.5), nil},
		{"batch, by request completions", func(w bench.LanesWindow) float64 { return w.Batch }, 0, vg.Points(0.5), []vg.Length{vg.Points(1), vg.Points(2)}},
		{"interactive, by request completions", func(w bench.LanesWindow) float64 { return w.Interactive }, 1, vg.Points(0.5), []vg.Length{vg.Points(1), vg.Points(2)}},
	} {
		var xys plotter.XYs
		for _, w := range li.Series {
			v := ln.get(w)
			xys = append(xys, plotter.XY{X: (w.Start + li.Window/2).Seconds(), Y: v})
			ymax = math.Max(ymax, v)
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("report: lanes %s: %w", ln.name, err)
		}
		l.Color, l.Width, l.Dashes = plotutil.Color(ln.color), ln.width, ln.dash
		p.Add(l)
		p.Legend.Add(ln.name, l)
	}
	marks := []struct {
		name string
		at   time.Duration
		dash []vg.Length
	}{{fmt.Sprintf("change to %d shares", li.LiveShares), li.Change.At, []vg.Length{vg.Points(4), vg.Points(2)}}}
	if st.Settle != Never {
		marks = append(marks, struct {
			name string
			at   time.Duration
			dash []vg.Length
		}{"settled (in target)", li.Change.At + st.Settle, []vg.Length{vg.Points(1), vg.Points(2)}})
	}
	for _, m := range marks {
		l, err := plotter.NewLine(plotter.XYs{{X: m.at.Seconds(), Y: 0}, {X: m.at.Seconds(), Y: ymax * 1.05}})
		if err != nil {
			return nil, fmt.Errorf("report: lanes marker: %w", err)
		}
		l.Color, l.Dashes = color.Gray{Y: 96}, m.dash
		p.Add(l)
		p.Legend.Add(m.name, l)
	}
	if st.Final > 0 {
		end := (time.Duration(len(li.Series)) * li.Window).Seconds()
		for i, f := range []float64{1 - LanesSettleTolerance, 1 + LanesSettleTolerance} {
			l, err := plotter.NewLine(plotter.XYs{{X: li.Change.At.Seconds(), Y: f * st.Final}, {X: end, Y: f * st.Final}})
			if err != nil {
				return nil, fmt.Errorf("report: lanes band: %w", err)
			}
			l.Color, l.Width = color.Gray{Y: 160}, vg.Points(0.5)
			p.Add(l)
			if i == 0 {
				p.Legend.Add("batch's final mean, within 10%", l)
			}
		}
	}
	p.X.Tick.Marker = secondTicks{}
	p.Y.Min, p.Y.Max = 0, ymax*1.6 // room for the legend
	return p, nil
}

// secondTicks marks a time axis in seconds every second, or every few
// seconds on a long one.
type secondTicks struct{}

func (secondTicks) Ticks(lo, hi float64) []plot.Tick {
	step := math.Max(1, math.Ceil((hi-lo)/12))
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: formatTick(v)})
	}
	return ticks
}
