package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-go/sluice/bench"
)

// PlainSummary says in plain words what the table of rep's main scenario
// among those named shows: two heading lines, then one line per offered load with, for each
// target of the scenario, the requests it completed in time per second,
// as a fraction of its capacity, and the shares of requests it refused at
// once and let fail. A target whose runs at a load were all behind is
// given with its indicative figure, marked as such; one without a row at a
// load is said to be missing there.
//
// The main scenario is the first of scenarios that rep has samples of,
// leaving out those whose load is a step (their rows are not one load
// each). Rows of a request class are left out: the lines count all
// requests. PlainSummary returns nil for a nil report or one without such
// rows. The lines end without a newline; those of the loads are indented.
func PlainSummary(rep *bench.Report, scenarios []string) []string {
	if rep == nil {
		return nil
	}
	stepped := make(map[string]bool)
	for _, s := range rep.Samples {
		if s.Step != nil {
			stepped[s.Scenario] = true
		}
	}
	var rows []Row
	for _, r := range Summarize(rep, scenarios) {
		if r.Class == "" && !stepped[r.Scenario] {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	// Summarize puts the scenarios in the order named.
	scenario := rows[0].Scenario
	rows = slices.DeleteFunc(rows, func(r Row) bool { return r.Scenario != scenario })

	// The shapes, and the targets in their table order.
	var targets, shapes []string
	for _, r := range rows {
		if !slices.Contains(shapes, r.Shape) {
			shapes = append(shapes, r.Shape)
		}
		if !slices.Contains(targets, r.Target) {
			targets = append(targets, r.Target)
		}
	}
	ranks := TargetRanks(rep)
	slices.SortStableFunc(targets, func(a, b string) int { return ranks[a] - ranks[b] })

	inTime := "within the client's deadline"
	if rep.Deadline > 0 {
		inTime = "within the " + rep.Deadline.String() + " deadline"
	}
	what := scenario
	if len(shapes) == 1 {
		what += ", shape " + orDash(shapes[0])
	}
	lines := []string{
		fmt.Sprintf("In plain words (%s): each server was offered a multiple of its own capacity C;", what),
		fmt.Sprintf(`"in time" = a 2xx answer %s, "refused" = an immediate 503, "failed" = late or in error.`, inTime),
	}
	for start := 0; start < len(rows); {
		end := start + 1
		for end < len(rows) && rows[end].Shape == rows[start].Shape && rows[end].Multiple == rows[start].Multiple && rows[end].Client == rows[start].Client {
			end++
		}
		load := rows[start:end]
		head := "At " + formatMultiple(load[0].Multiple) + "x"
		if len(shapes) > 1 {
			head += " (shape " + orDash(load[0].Shape) + ")"
		}
		if load[0].Client != "" {
			head += ", client " + load[0].Client
		}
		var parts []string
		for i, t := range targets {
			parts = append(parts, plainTarget(load, t, i == 0))
		}
		lines = append(lines, "  "+head+": "+strings.Join(parts, "; ")+".")
		start = end
	}
	return lines
}

// plainTarget says what target did at one load, given the rows of that
// load; first spells the units out.
func plainTarget(load []Row, target string, first bool) string {
	name := plainName(target)
	i := slices.IndexFunc(load, func(r Row) bool { return r.Target == target })
	if i < 0 {
		return name + " was not run at this load"
	}
	r := load[i]
	if r.Runs == 0 && !r.Indicative {
		return name + " has no figures (the load generator fell behind its schedule in every run)"
	}
	rate := fmt.Sprintf("%.0f", r.Goodput)
	if first {
		rate += " requests a second"
	}
	if r.Indicative {
		return fmt.Sprintf("%s completed about %s in time (indicative only: the load generator fell behind "+
			"its schedule in every run)", name, rate)
	}
	s := fmt.Sprintf("%s completed %s in time (%.2f of its capacity)", name, rate, r.GoodputFrac)
	rejected, failed := 100*r.RejectedFrac, 100*r.FailedFrac
	switch {
	case rejected < 0.05 && failed < 0.05:
		return s + ", none refused or failed"
	case failed < 0.05:
		return s + ", with " + formatPct(rejected) + " refused"
	case rejected < 0.05:
		return s + ", with " + formatPct(failed) + " failed"
	default:
		return s + ", with " + formatPct(rejected) + " refused and " + formatPct(failed) + " failed"
	}
}

// plainName returns how a target is called in plain words: its name, or
// the server's for plain net/http.
func plainName(target string) string {
	if target == BaselineTarget {
		return "net/http"
	}
	return target
}

// formatPct prints a percentage with one decimal below 10, none above.
func formatPct(p float64) string {
	if p < 9.95 {
		return fmt.Sprintf("%.1f%%", p)
	}
	return fmt.Sprintf("%.0f%%", p)
}
