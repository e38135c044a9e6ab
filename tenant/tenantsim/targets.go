package tenantsim

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Thresholds of convergence (KindConverge).
const (
	convergeSuccess = 0.99
	convergeFair    = 0.9
)

// evaluate checks the scenario's targets against a run: the converge
// targets first, since the steady-state targets with the same From start
// at the convergence they find.
func evaluate(r *Result) []TargetResult {
	out := make([]TargetResult, len(r.Scenario.Targets))
	converged := map[Duration]int{}
	for pass := range 2 {
		for i, tg := range r.Scenario.Targets {
			if (tg.Kind == KindConverge) != (pass == 0) {
				continue
			}
			w := r.window(tg.From, tg.To)
			from := w.i0
			switch tg.Kind {
			case KindSuccess, KindFair, KindJain, KindShare:
				if k, ok := converged[tg.From]; ok {
					from = k
				}
			}
			out[i] = r.check(tg, w, span{from, w.i1}, converged)
			out[i].Measured = at(from)
		}
	}
	return out
}

// class is the tenants' shares in a window: each tenant's fair share of C
// by weighted max-min on its measured demand, and whether it is over its
// share by the scenario's figures.
type class struct {
	fair []float64 // in multiples of C, by tenant index
	over []bool
	// active marks the tenants that send during the window.
	active []bool
}

func (r *Result) classify(w span) class {
	n := len(r.Tenants)
	c := class{fair: make([]float64, n), over: make([]bool, n), active: make([]bool, n)}
	spec := make([]float64, n)
	measured := make([]float64, n)
	weights := make([]float64, n)
	from, to := at(w.i0), at(w.i1)
	for i, t := range r.Tenants {
		c.active[i] = t.Start < to && t.End > from && t.Rate > 0
		if c.active[i] {
			spec[i] = t.Rate
			measured[i] = r.figures(&r.Tenants[i], w).demand
		}
		weights[i] = t.Weight
	}
	specFair := waterFill(spec, weights, 1)
	c.fair = waterFill(measured, weights, 1)
	for i := range c.over {
		c.over[i] = c.active[i] && spec[i] > specFair[i]*(1+1e-9)
	}
	return c
}

// waterFill returns the weighted max-min fair shares of capacity among
// demands: min(demand, weight·L), with the level L at which they add up to
// the capacity (or every demand is met).
func waterFill(demand, weight []float64, capacity float64) []float64 {
	idx := make([]int, 0, len(demand))
	for i, d := range demand {
		if d > 0 {
			idx = append(idx, i)
		}
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(demand[a]/weight[a], demand[b]/weight[b]) })
	out := make([]float64, len(demand))
	left := capacity
	var wsum float64
	for _, i := range idx {
		wsum += weight[i]
	}
	for k, i := range idx {
		level := left / wsum
		if demand[i] <= weight[i]*level {
			out[i] = demand[i]
			left -= demand[i]
			wsum -= weight[i]
			continue
		}
		for _, j := range idx[k:] {
			out[j] = weight[j] * level
		}
		break
	}
	return out
}

// periods converts buckets to control periods.
func (r *Result) periods(buckets int) float64 {
	return float64(int64(buckets)*int64(bucketWidth)) / float64(r.Scenario.Period)
}

// names returns the names of the tenants for which pick is true, joined.
func (r *Result) names(pick func(i int) bool) string {
	var out []string
	for i, t := range r.Tenants {
		if pick(i) {
			out = append(out, t.Name)
		}
	}
	if len(out) > 4 {
		return fmt.Sprintf("%s ... (%d)", strings.Join(out[:3], ", "), len(out))
	}
	return strings.Join(out, ", ")
}

// check evaluates one target: w is its window, m the span it measures (the
// window from the convergence, for a steady-state target).
func (r *Result) check(tg Target, w, m span, converged map[Duration]int) TargetResult {
	res := TargetResult{Target: tg, Value: -1}
	c := r.classify(w)
	within := func(i int) bool { return c.active[i] && !c.over[i] }
	over := func(i int) bool { return c.over[i] }
	pctOf := func(v float64) string { return fmt.Sprintf("%.2f%%", 100*v) }
	from := time.Duration(tg.From)
	switch tg.Kind {
	case KindConverge:
		k, ok := r.converge(c, w)
		if !ok {
			res.Text = fmt.Sprintf("not converged after %v", from)
			return res
		}
		converged[tg.From] = k
		res.Value = r.periods(k - w.i0)
		res.Pass = res.Value <= tg.Max
		res.Text = fmt.Sprintf("converged %.1f periods after %v (<= %g)", res.Value, from, tg.Max)
	case KindSuccess:
		worst, who := 1.0, ""
		for i := range r.Tenants {
			if !within(i) {
				continue
			}
			f := r.figures(&r.Tenants[i], m)
			if s := ratio(f.succeeded, f.offered); s < worst || who == "" {
				worst, who = min(worst, s), r.Tenants[i].Name
			}
		}
		res.Value = worst
		res.Pass = who != "" && worst >= tg.Min
		res.Text = fmt.Sprintf("worst within share: %s %s (>= %s)", who, pctOf(worst), pctOf(tg.Min))
		if who == "" {
			res.Text = "no tenant within share"
		}
	case KindFair:
		worst, who, got, share := math.Inf(1), "", 0.0, 0.0
		mc := r.classify(m)
		for i := range r.Tenants {
			if !over(i) || mc.fair[i] <= 0 {
				continue
			}
			g := r.figures(&r.Tenants[i], m).goodput
			if x := g / mc.fair[i]; x < worst {
				worst, who, got, share = x, r.Tenants[i].Name, g, mc.fair[i]
			}
		}
		if who == "" {
			res.Text = "no tenant over share"
			return res
		}
		res.Value = worst
		res.Pass = worst >= tg.Min
		res.Text = fmt.Sprintf("worst over share: %s %.3f C = %.3f of its fair share %.3f C (>= %g)", who, got, worst, share, tg.Min)
	case KindJain:
		mc := r.classify(m)
		var sum, sq float64
		n := 0
		for i := range r.Tenants {
			if mc.fair[i] > 0 {
				x := r.figures(&r.Tenants[i], m).goodput / mc.fair[i]
				sum += x
				sq += x * x
				n++
			}
		}
		if n == 0 || sq == 0 {
			res.Text = "no tenant with a share"
			return res
		}
		res.Value = sum * sum / (float64(n) * sq)
		res.Pass = res.Value >= tg.Min
		res.Text = fmt.Sprintf("Jain's index %.4f over %d tenants (>= %g)", res.Value, n, tg.Min)
	case KindBlame:
		est := r.demandBlame(w)
		var on, all float64
		var raw, rawAll float64
		for i, t := range r.Tenants {
			all += est[t.Name]
			b := float64(r.figures(&r.Tenants[i], w).blame)
			rawAll += b
			if over(i) {
				on += est[t.Name]
				raw += b
			}
		}
		if all <= 0 {
			res.Text = "no blame"
			return res
		}
		res.Value = on / all
		res.Pass = res.Value >= tg.Min
		res.Text = fmt.Sprintf("%s of the blame of the demand on %s (>= %s); of the blame itself, %s",
			pctOf(res.Value), r.names(over), pctOf(tg.Min), pctOf(raw/max(rawAll, 1)))
	case KindShare:
		var mine, all float64
		for i, t := range r.Tenants {
			g := r.figures(&r.Tenants[i], m).goodput
			all += g
			if t.Name == tg.Tenant || t.Group == tg.Tenant {
				mine += g
			}
		}
		if all <= 0 {
			res.Text = "no goodput"
			return res
		}
		res.Value = mine / all
		res.Pass = res.Value >= tg.Min && res.Value <= tg.Max
		res.Text = fmt.Sprintf("%s got %s of the goodput (%.3f C; want %s to %s)", tg.Tenant, pctOf(res.Value), mine, pctOf(tg.Min), pctOf(tg.Max))
	case KindDropsOnlyOver:
		var wrong int64
		var missing []string
		for i := range r.Tenants {
			f := r.figures(&r.Tenants[i], w)
			if within(i) {
				wrong += f.dropped
			}
			if over(i) && f.dropped == 0 {
				missing = append(missing, r.Tenants[i].Name)
			}
		}
		res.Value = float64(wrong)
		res.Pass = wrong == 0 && len(missing) == 0
		res.Text = fmt.Sprintf("%d requests of tenants within share dropped; dropped: %s", wrong, r.droppedText(w, over))
		if len(missing) > 0 {
			res.Text += "; never dropped though over share: " + strings.Join(missing, ", ")
		}
	case KindNoDrops:
		var n int64
		for i := range r.Tenants {
			n += r.figures(&r.Tenants[i], w).dropped
		}
		res.Value = float64(n)
		res.Pass = n == 0
		res.Text = fmt.Sprintf("%d requests dropped", n)
	case KindDropsAppear:
		for k := w.i0; k < w.i1; k++ {
			first, who := int64(math.MaxInt64), ""
			for i := range r.Tenants {
				if b := &r.Tenants[i].b[k]; over(i) && b.dropped > 0 && b.firstDrop < first {
					first, who = b.firstDrop, r.Tenants[i].Name
				}
			}
			if who != "" {
				res.Value = float64(first-int64(tg.From)) / float64(r.Scenario.Period)
				res.Pass = res.Value <= tg.Max
				res.Text = fmt.Sprintf("%s dropped %.2f periods after %v (<= %g)", who, res.Value, from, tg.Max)
				return res
			}
		}
		res.Text = fmt.Sprintf("no drop after %v", from)
	case KindHurt:
		var succ, off int64
		for i := range r.Tenants {
			if within(i) {
				f := r.figures(&r.Tenants[i], w)
				succ += f.succeeded
				off += f.offered
			}
		}
		res.Value = ratio(succ, off)
		res.Pass = off > 0 && res.Value <= tg.Max
		res.Text = fmt.Sprintf("tenants within share succeeded on %s (the harm shown: <= %s)", pctOf(res.Value), pctOf(tg.Max))
	case KindThroughput:
		per := int(time.Second / bucketWidth)
		worst, when := math.Inf(1), 0
		for k := w.i0; k+per <= w.i1; k += per {
			var g float64
			for i := range r.Tenants {
				g += r.figures(&r.Tenants[i], span{k, k + per}).goodput
			}
			if g < worst {
				worst, when = g, k
			}
		}
		if math.IsInf(worst, 1) {
			res.Text = "no whole second in the window"
			return res
		}
		res.Value = worst
		res.Pass = worst >= tg.Min
		res.Text = fmt.Sprintf("worst second %.3f C, at %v (>= %g)", worst, time.Duration(at(when)), tg.Min)
	case KindResume:
		for k := w.i0; k < w.i1; k++ {
			all, any := true, false
			for i := range r.Tenants {
				if over(i) && r.Tenants[i].End > at(k) {
					any = true
					all = all && r.Tenants[i].b[k].dropMin > 0
				}
			}
			if any && all {
				res.Value = r.periods(k + 1 - w.i0)
				res.Pass = res.Value <= tg.Max
				res.Text = fmt.Sprintf("every server drops %s again %.1f periods after %v (<= %g)", r.names(over), res.Value, from, tg.Max)
				return res
			}
		}
		res.Text = fmt.Sprintf("enforcement did not resume after %v", from)
	case KindDecay:
		k := w.i1
		for k > w.i0 && r.noDrops(k-1) {
			k--
		}
		if k == w.i1 {
			res.Text = fmt.Sprintf("drops still in force at the end (after %v)", from)
			return res
		}
		res.Value = r.periods(k + 1 - w.i0)
		if k == w.i0 && w.i0 > 0 && r.noDrops(w.i0-1) {
			res.Value = 0
		}
		res.Pass = res.Value <= tg.Max
		res.Text = fmt.Sprintf("no drop in force %.1f periods after %v (<= %g)", res.Value, from, tg.Max)
	}
	return res
}

// noDrops reports whether no server held a drop for any tenant at the end
// of bucket k.
func (r *Result) noDrops(k int) bool {
	for _, t := range r.Tenants {
		if t.b[k].dropMax > 0 {
			return false
		}
	}
	return true
}

// droppedText lists the share of their requests dropped for the tenants
// that pick selects.
func (r *Result) droppedText(w span, pick func(i int) bool) string {
	var parts []string
	for i, t := range r.Tenants {
		if pick(i) {
			f := r.figures(&r.Tenants[i], w)
			parts = append(parts, fmt.Sprintf("%s %.1f%%", t.Name, 100*float64(f.dropped)/float64(max(f.offered, 1))))
		}
	}
	if len(parts) == 0 {
		return "none over share"
	}
	return strings.Join(parts, ", ")
}

// converge returns the first bucket k of w at which the loop has
// converged (see KindConverge): the period-long window from k is steady,
// and so is every longer span from k up to w's end.
func (r *Result) converge(c class, w span) (int, bool) {
	per := max(int(int64(r.Scenario.Period)/int64(bucketWidth)), 1)
	if w.i1-w.i0 < per {
		return 0, false
	}
	for k := w.i0; k+per <= w.i1; k++ {
		ok := true
		for t := k + per; t <= w.i1 && ok; t++ {
			ok = r.steady(c, span{k, t})
		}
		if ok {
			return k, true
		}
	}
	return 0, false
}

// steady reports whether, over s, the tenants within share succeed on
// convergeSuccess of their requests together; when every tenant is over
// share, whether each receives convergeFair of its fair share.
func (r *Result) steady(c class, s span) bool {
	var succ, off int64
	within := false
	for i := range r.Tenants {
		if c.active[i] && !c.over[i] {
			within = true
			f := r.figures(&r.Tenants[i], s)
			succ += f.succeeded
			off += f.offered
		}
	}
	if within {
		return ratio(succ, off) >= convergeSuccess
	}
	for i := range r.Tenants {
		if c.over[i] && r.figures(&r.Tenants[i], s).goodput < convergeFair*c.fair[i] {
			return false
		}
	}
	return true
}
