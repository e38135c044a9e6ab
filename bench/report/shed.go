package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluice-go/sluice/bench"
)

// ShedMargin is how far above the share of requests refused before the
// step a bucket's share must be to count as refusing: a target may refuse
// some of a light load (the busy gate alone, when the other worker happens
// to be busy), and that is not a reaction to the overload.
const ShedMargin = 0.10

// Shed is what one run of the shed scenario shows, read from its Series
// and StepInfo. Shares are of the requests offered in a phase: the low
// load before the step up, the high load, the low load after the step
// down. A bucket is refusing when the share it refused is more than
// ShedMargin above RefusedBefore.
type Shed struct {
	// FirstRefusal is the time from the step up to the end of the first
	// refusing bucket of the high phase: how long the target took to
	// protect itself. Refused is false when no bucket of the high phase
	// was refusing (FirstRefusal is then zero).
	FirstRefusal time.Duration `json:"first_refusal"`
	Refused      bool          `json:"refused"`
	// Goodput is the high phase's goodput (2xx within the deadline, by
	// send time) per second, over C: what the target served in time
	// while overloaded.
	Goodput float64 `json:"goodput"`
	// Late is the share of the high phase's requests that failed (late
	// or in error): admitted when they could not be served in time.
	Late float64 `json:"late"`
	// RefusedBefore, RefusedDuring and RefusedAfter are the shares
	// refused in each phase; before and after, the load was well under
	// capacity, so every refusal there was needless.
	RefusedBefore float64 `json:"refused_before"`
	RefusedDuring float64 `json:"refused_during"`
	RefusedAfter  float64 `json:"refused_after"`
	// RefusingFor is the time from the step down to the end of the last
	// refusing bucket (zero when none was after it): how long the target
	// went on refusing once the overload had ended.
	RefusingFor time.Duration `json:"refusing_for"`
}

// ShedMetrics computes what a shed sample shows (see Shed). It returns
// false for a sample without StepInfo or without a usable Series.
func ShedMetrics(s bench.Sample) (Shed, bool) {
	info := s.Step
	if info == nil || len(s.Series) == 0 || info.Down <= info.Up {
		return Shed{}, false
	}
	w := bucketWidth(s.Series, info.End)
	if w <= 0 {
		return Shed{}, false
	}
	phaseOf := func(b bench.Bucket) int {
		switch {
		case b.Start >= info.Down:
			return 2
		case b.Start >= info.Up:
			return 1
		}
		return 0
	}
	var phase [3]struct{ offered, ok, rejected, failed int64 }
	for _, b := range s.Series {
		p := &phase[phaseOf(b)]
		p.offered += b.Offered
		p.ok += b.OK
		p.rejected += b.Rejected
		p.failed += b.Failed
	}
	share := func(n, of int64) float64 {
		if of <= 0 {
			return 0
		}
		return float64(n) / float64(of)
	}
	var m Shed
	m.RefusedBefore = share(phase[0].rejected, phase[0].offered)
	m.RefusedDuring = share(phase[1].rejected, phase[1].offered)
	m.RefusedAfter = share(phase[2].rejected, phase[2].offered)
	m.Late = share(phase[1].failed, phase[1].offered)
	if d := (info.Down - info.Up).Seconds(); d > 0 && s.Capacity > 0 {
		m.Goodput = float64(phase[1].ok) / d / s.Capacity
	}
	for _, b := range s.Series {
		if b.Rejected == 0 || share(b.Rejected, b.Offered) <= m.RefusedBefore+ShedMargin {
			continue
		}
		end := min(b.Start+w, info.End)
		switch phaseOf(b) {
		case 1:
			if !m.Refused {
				m.Refused, m.FirstRefusal = true, end-info.Up
			}
		case 2:
			m.RefusingFor = end - info.Down
		}
	}
	return m, true
}

// ShedRow sums up the shed scenario for one target: medians over the kept
// runs (those whose generator kept its schedule and that other programs
// did not disturb, bench.ShedInfo.Disturbed), or over all of them when
// none was kept.
type ShedRow struct {
	Target string `json:"target"`
	// Runs counts the kept runs, Behind those whose generator fell
	// behind, Disturbed the others left out: other programs used more
	// than bench.ShedDisturbed of the CPU.
	Runs      int `json:"runs"`
	Behind    int `json:"behind"`
	Disturbed int `json:"disturbed"`
	// Capacity is the median C the loads were multiples of, Low and High
	// the multiples, Up and Down when the load stepped up and down.
	Capacity float64       `json:"capacity"`
	Low      float64       `json:"low"`
	High     float64       `json:"high"`
	Up       time.Duration `json:"up"`
	Down     time.Duration `json:"down"`
	// Shed holds the medians of each quantity of Shed; FirstRefusal over
	// the runs that refused in the high phase, NeverRefused counting the
	// others.
	Shed         Shed `json:"shed"`
	NeverRefused int  `json:"never_refused"`
	// P99 is the median p99 latency of the 2xx answers, in milliseconds.
	P99 float64 `json:"p99_ms"`
	// RefusedBy is the median count of refusals by reason, as the
	// target's admission counted them.
	RefusedBy map[string]float64 `json:"refused_by,omitempty"`
}

// SummarizeShed returns one ShedRow per target of rep's shed samples, in
// the order the targets first appear; nil when there are none.
func SummarizeShed(rep *bench.Report) []ShedRow {
	if rep == nil {
		return nil
	}
	targets, byTarget := groupSamples(rep, func(s bench.Sample) (string, bool) {
		return s.Target, s.Scenario == bench.ScenarioShed && s.Step != nil
	})
	var rows []ShedRow
	for _, t := range targets {
		rows = append(rows, shedRow(t, byTarget[t]))
	}
	return rows
}

// shedRow computes the row of one target.
func shedRow(target string, samples []bench.Sample) ShedRow {
	r := ShedRow{Target: target}
	kept := slices.DeleteFunc(slices.Clone(samples), func(s bench.Sample) bool {
		switch {
		case s.Behind:
			r.Behind++
		case s.Shed.Disturbed():
			r.Disturbed++
		default:
			return false
		}
		return true
	})
	r.Runs = len(kept)
	if len(kept) == 0 {
		kept = samples
	}
	var capacity, first, goodput, late, before, during, after, refusing, p99 []float64
	var runsBy []map[string]int64
	for _, s := range kept {
		r.Low, r.High, r.Up, r.Down = s.Step.Low, s.Step.High, s.Step.Up, s.Step.Down
		capacity = append(capacity, s.Capacity)
		if s.Rates.Goodput > 0 {
			p99 = append(p99, s.Latency.P99)
		}
		runsBy = append(runsBy, refusedBy(s))
		m, ok := ShedMetrics(s)
		if !ok {
			continue
		}
		if m.Refused {
			first = append(first, float64(m.FirstRefusal))
		} else {
			r.NeverRefused++
		}
		goodput = append(goodput, m.Goodput)
		late = append(late, m.Late)
		before = append(before, m.RefusedBefore)
		during = append(during, m.RefusedDuring)
		after = append(after, m.RefusedAfter)
		refusing = append(refusing, float64(m.RefusingFor))
	}
	r.Capacity, r.P99 = Median(capacity), Median(p99)
	r.Shed = Shed{
		FirstRefusal: time.Duration(Median(first)), Refused: len(first) > 0,
		Goodput: Median(goodput), Late: Median(late),
		RefusedBefore: Median(before), RefusedDuring: Median(during), RefusedAfter: Median(after),
		RefusingFor: time.Duration(Median(refusing)),
	}
	for _, by := range runsBy {
		for reason := range by {
			if _, done := r.RefusedBy[reason]; done {
				continue
			}
			if r.RefusedBy == nil {
				r.RefusedBy = make(map[string]float64)
			}
			var ns []float64
			for _, other := range runsBy {
				ns = append(ns, float64(other[reason])) // 0 for a run without it
			}
			r.RefusedBy[reason] = Median(ns)
		}
	}
	return r
}

// refusedBy reads the rejections by reason from a sample's server counters
// (admit.Stats); nil when it has none.
func refusedBy(s bench.Sample) map[string]int64 {
	if len(s.Server) == 0 {
		return nil
	}
	var st struct{ RejectedBy map[string]int64 }
	if json.Unmarshal(s.Server, &st) != nil {
		return nil
	}
	return st.RejectedBy
}

// WriteShed writes the shed samples of rep to w: a line on the setup, a
// table with one row per target, and what its columns mean. It writes
// nothing for a report without shed samples.
func WriteShed(w io.Writer, rep *bench.Report) error {
	if rep == nil {
		return errors.New("report: nil report")
	}
	rows := SummarizeShed(rep)
	if len(rows) == 0 {
		return nil
	}
	var shape string
	for _, s := range rep.Samples {
		if s.Scenario == bench.ScenarioShed {
			shape = s.Shape
			break
		}
	}
	r0 := rows[0]
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "\nshed: one signal alone against a step of overload, shape %s%s: %sx of C for %v, %sx for %v, %sx for %v (C = %.0f/s, %s's capacity)\n",
		orDash(shape), HandlerOf(rep, bench.ScenarioShed, shape), formatMultiple(r0.Low), r0.Up, formatMultiple(r0.High), r0.Down-r0.Up,
		formatMultiple(r0.Low), shedAfter(rep), r0.Capacity, bench.ShedReference)
	tw := NewTab(&buf)
	Line(tw, "target", "first refusal", "goodput/C", "late %", "503 %", "503 % before", "503 % after", "refusing for", "p99 ms", "refused by", "runs")
	for _, r := range rows {
		first := "never"
		if r.Shed.Refused {
			first = formatSeconds(r.Shed.FirstRefusal)
			if r.NeverRefused > 0 {
				first += fmt.Sprintf(" (%d never)", r.NeverRefused)
			}
		}
		Line(tw, r.Target, first, fmt.Sprintf("%.2f", r.Shed.Goodput), fmt.Sprintf("%.1f", 100*r.Shed.Late),
			fmt.Sprintf("%.1f", 100*r.Shed.RefusedDuring), fmt.Sprintf("%.1f", 100*r.Shed.RefusedBefore),
			fmt.Sprintf("%.1f", 100*r.Shed.RefusedAfter), formatSeconds(r.Shed.RefusingFor), FormatMS(r.P99),
			formatReasons(r.RefusedBy), fmt.Sprintf("%d/%d/%d", r.Runs, r.Behind, r.Disturbed))
	}
	_ = tw.Flush()
	buf.WriteString(strings.Join([]string{
		fmt.Sprintf("first refusal: from the step up to the end of the first bucket that refused (503) %.0f points more of its requests", 100*ShedMargin),
		"than were refused before the step; goodput/C: 2xx within the deadline, per second of the overload, over C; late %: of the",
		"overload's requests, failed (past the deadline, errors); 503 %: refused unstarted, during the overload, before it and after",
		"it (where the load was light: needless); refusing for: from the step down to the end of the last bucket refusing as above;",
		"refused by: the target's rejections by reason (median count); runs: kept/behind/disturbed (other programs used more than",
		fmt.Sprintf("%.2g CPU during the run, which the CPU target, reading the whole machine, counts as load).", bench.ShedDisturbed),
	}, "\n") + "\n")
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("report: write shed: %w", err)
	}
	return nil
}

// shedAfter is the length of the shed samples' last phase.
func shedAfter(rep *bench.Report) time.Duration {
	for _, s := range rep.Samples {
		if s.Scenario == bench.ScenarioShed && s.Step != nil {
			return s.Step.End - s.Step.Down
		}
	}
	return 0
}

// formatSeconds writes a duration in seconds, two decimals.
func formatSeconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// formatReasons writes counts by reason, "busy 120, cpu 3"; "-" for none.
func formatReasons(by map[string]float64) string {
	if len(by) == 0 {
		return "-"
	}
	var parts []string
	for _, reason := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%s %.0f", reason, by[reason]))
	}
	return strings.Join(parts, ", ")
}
