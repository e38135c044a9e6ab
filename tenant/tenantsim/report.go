package tenantsim

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// group is the tenants of one TenantSpec, for the table and the plots.
type group struct {
	name    string
	members []int // indices into Result.Tenants
}

// groups returns the tenants grouped by TenantSpec, in the scenario's
// order.
func (r *Result) groups() []group {
	var out []group
	for i, t := range r.Tenants {
		if n := len(out); n > 0 && out[n-1].name == t.Group {
			out[n-1].members = append(out[n-1].members, i)
			continue
		}
		out = append(out, group{name: t.Group, members: []int{i}})
	}
	return out
}

// label names a group, with its size when it has more than one tenant.
func (g group) label() string {
	if len(g.members) > 1 {
		return fmt.Sprintf("%s (%d)", g.name, len(g.members))
	}
	return g.name
}

// WriteTable writes r as text: the scenario, one row per group of tenants
// over the whole run (offered and received work in multiples of C, the
// share of its requests that succeeded, were dropped for the tenant's
// share and were rejected by the gates and queue, the mean drop fraction
// in force, its share of the blame and of the blame of the demand), the
// controller's states, and the targets with PASS or FAIL.
func WriteTable(w io.Writer, r *Result) error {
	sc := r.Scenario
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", sc.Name, sc.Description)
	fmt.Fprintf(&b, "  %d servers x %d workers, C = %.0f requests/s at %v; period %v, store delay %v; seed %d\n",
		sc.Servers, sc.Workers, r.Capacity, sc.Cost, sc.Period, sc.StoreDelay, sc.Seed)
	fmt.Fprintf(&b, "  %v virtual in %v real (%d events)\n", sc.Duration, time.Duration(r.Elapsed).Round(time.Millisecond), r.Events)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  tenant\toffered xC\tgoodput xC\tsuccess\tworst\tdropped\trejected\tdrop\tblame\tdemand blame\t")
	whole := r.span(0, len(r.Tenants[0].b))
	for _, g := range r.groups() {
		var off, good, offered, succ, drop, rej, dropF, blame, demand float64
		worst := 1.0
		for _, i := range g.members {
			t := &r.Tenants[i]
			f := r.figures(t, whole)
			off += f.demand
			good += f.goodput
			offered += float64(f.offered)
			succ += float64(f.succeeded)
			drop += float64(f.dropped)
			rej += float64(f.rejected)
			worst = min(worst, t.Total.Success)
			blame += t.Total.BlameShare
			demand += t.Total.DemandShare
			for _, s := range t.Seconds {
				dropF += s.Drop / float64(len(t.Seconds)*len(g.members))
			}
		}
		pct := func(a float64) string { return fmt.Sprintf("%.2f%%", 100*a/max(offered, 1)) }
		worstText := "-"
		if len(g.members) > 1 {
			worstText = fmt.Sprintf("%.2f%%", 100*worst)
		}
		fmt.Fprintf(tw, "  %s\t%.3f\t%.3f\t%s\t%s\t%s\t%s\t%.3f\t%.1f%%\t%.1f%%\t\n",
			g.label(), off, good, pct(succ), worstText, pct(drop), pct(rej), dropF, 100*blame, 100*demand)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString(tableLegend)
	states := map[string]int{}
	leaders := map[string]bool{}
	var predErr float64
	var predN int
	for _, c := range r.Control {
		states[c.State]++
		leaders[c.Leader] = true
		if c.PredictionError != nil {
			predErr += *c.PredictionError
			predN++
		}
	}
	var parts []string
	for _, s := range []string{"overloaded", "full", "decaying", "idle"} {
		if states[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, states[s]))
		}
	}
	names := make([]string, 0, len(leaders))
	for l := range leaders {
		names = append(names, l)
	}
	slices.Sort(names)
	fmt.Fprintf(&b, "  controller: %d periods (%s), led by %s", len(r.Control), strings.Join(parts, ", "), strings.Join(names, ", "))
	if predN > 0 {
		fmt.Fprintf(&b, "; mean prediction error %.1f%%", 100*predErr/float64(predN))
	}
	if r.StoreFailures > 0 {
		fmt.Fprintf(&b, "; store calls failed: %d of %d", r.StoreFailures, r.StoreCalls)
	}
	b.WriteString("\n")
	for _, t := range r.Targets {
		verdict := "PASS"
		if !t.Pass {
			verdict = "FAIL"
		}
		fmt.Fprintf(&b, "  %s %-15s %s", verdict, t.Kind, t.Text)
		if t.Measured > t.From+Duration(bucketWidth) {
			fmt.Fprintf(&b, " [measured from %v]", t.Measured)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// tableLegend says what WriteTable's columns hold.
const tableLegend = `  offered, goodput xC: work offered, and answered 2xx in time, in multiples of the capacity C;
  success: the group's requests answered 2xx in time (worst: its worst tenant's); dropped: refused for
  the tenant's share (429); rejected: refused by the gates and the queue (503); drop: the mean drop
  fraction in force; blame: the group's share of the blame the servers counted (the time their gates
  were closed, shared among the requests running then); demand blame: the same once each tenant's
  blame per request is scaled to all the requests it offered, admitted or not.
`

// WriteJSON writes results as one indented JSON array.
func WriteJSON(w io.Writer, results []*Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(results)
}
