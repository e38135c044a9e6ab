package report

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"io"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/sluice-go/sluice/bench"
)

// TenantsRow sums up the runs of one part of the tenants scenario (the
// flood with enforcement on, or off) for one target: medians over the kept
// runs (those whose generator kept its schedule), or over all of them when
// none was kept. Shares are in multiples of C.
type TenantsRow struct {
	Target string `json:"target"`
	// Part is bench.TenantsOn or bench.TenantsOff.
	Part   string `json:"part"`
	Runs   int    `json:"runs"`
	Behind int    `json:"behind"`
	// Capacity is C of the servers together; Offered the whole load per
	// second.
	Capacity float64 `json:"capacity"`
	Offered  float64 `json:"offered"`
	// Converged counts the runs that converged; ConvergePeriods is the
	// median convergence time over them, in control periods.
	Converged       int     `json:"converged"`
	ConvergePeriods float64 `json:"converge_periods"`
	// The medians of bench.TenantsFigures.
	LightSuccess     float64 `json:"light_success"`
	WorstLight       float64 `json:"worst_light"`
	LightSuccessAll  float64 `json:"light_success_all"`
	HeavyGoodput     float64 `json:"heavy_goodput"`
	HeavyFair        float64 `json:"heavy_fair"`
	Jain             float64 `json:"jain"`
	BlameHeavy       float64 `json:"blame_heavy"`
	DemandBlameHeavy float64 `json:"demand_blame_heavy"`
	HeavyDropped     float64 `json:"heavy_dropped"`
	LightDropped     float64 `json:"light_dropped"`
	// Met counts, per flood target (bench.TenantsFigures.Met), the
	// runs counted that met it.
	Met map[string]int `json:"met"`
}

// SummarizeTenants returns one TenantsRow per target and part of rep's
// tenants samples, in the order they first appear; nil when there are
// none.
func SummarizeTenants(rep *bench.Report) []TenantsRow {
	if rep == nil {
		return nil
	}
	type key struct{ target, part string }
	keys, byKey := groupSamples(rep, func(s bench.Sample) (key, bool) {
		if s.Scenario != bench.ScenarioTenants || s.Tenants == nil {
			return key{}, false
		}
		return key{s.Target, s.Tenants.Part}, true
	})
	var rows []TenantsRow
	for _, k := range keys {
		rows = append(rows, tenantsRow(k.target, k.part, byKey[k]))
	}
	return rows
}

// tenantsRow computes the row of one target and part.
func tenantsRow(target, part string, samples []bench.Sample) TenantsRow {
	r := TenantsRow{Target: target, Part: part, Met: map[string]int{}}
	kept := slices.DeleteFunc(slices.Clone(samples), func(s bench.Sample) bool { return s.Behind })
	r.Runs, r.Behind = len(kept), len(samples)-len(kept)
	if len(kept) == 0 {
		kept = samples
	}
	var capacity, offered, conv, light, worst, all, heavy, fair, jain, blame, dblame, hdrop, ldrop []float64
	for _, s := range kept {
		f := s.Tenants.TenantsFigures
		capacity = append(capacity, s.Capacity)
		offered = append(offered, s.Rates.Offered)
		if f.Converged {
			r.Converged++
			conv = append(conv, f.ConvergePeriods)
		}
		light = append(light, f.LightSuccess)
		worst = append(worst, f.WorstLight)
		all = append(all, f.LightSuccessAll)
		heavy = append(heavy, f.HeavyGoodput)
		fair = append(fair, f.HeavyFair)
		jain = append(jain, f.Jain)
		blame = append(blame, f.BlameHeavy)
		dblame = append(dblame, f.DemandBlameHeavy)
		hdrop = append(hdrop, f.HeavyDropped)
		ldrop = append(ldrop, float64(f.LightDropped))
		for name, ok := range f.Met() {
			if ok {
				r.Met[name]++
			}
		}
	}
	r.Capacity, r.Offered, r.ConvergePeriods = Median(capacity), Median(offered), Median(conv)
	r.LightSuccess, r.WorstLight, r.LightSuccessAll = Median(light), Median(worst), Median(all)
	r.HeavyGoodput, r.HeavyFair, r.Jain = Median(heavy), Median(fair), Median(jain)
	r.BlameHeavy, r.DemandBlameHeavy = Median(blame), Median(dblame)
	r.HeavyDropped, r.LightDropped = Median(hdrop), Median(ldrop)
	return r
}

// tenantsTargets are the flood targets in the order WriteTenants
// checks them, with how it names them.
var tenantsTargets = []struct{ key, text string }{
	{"converge", fmt.Sprintf("converges within %g periods", bench.TenantsConvergeMax)},
	{"light", fmt.Sprintf("each light tenant >= %g%% success after", 100*bench.TenantsLightMin)},
	{"heavy", fmt.Sprintf("heavy >= %g of what is left", bench.TenantsHeavyMin)},
	{"jain", fmt.Sprintf("Jain's index >= %g", bench.TenantsJainMin)},
	{"blame", fmt.Sprintf(">= %g%% of the blame (of the demand) on heavy", 100*bench.TenantsBlameMin)},
}

// WriteTenants writes the tenants samples of rep to w: a line on the setup,
// a table with one row per target and part, and, for the enforcing part,
// the flood targets with the runs that met them. It writes nothing for a
// report without tenants samples.
func WriteTenants(w io.Writer, rep *bench.Report) error {
	if rep == nil {
		return errors.New("report: nil report")
	}
	rows := SummarizeTenants(rep)
	if len(rows) == 0 {
		return nil
	}
	var info *bench.TenantsInfo
	var spec bench.HandlerSpec
	for _, s := range rep.Samples {
		if s.Tenants != nil {
			info, spec = s.Tenants, s.Handler
			break
		}
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "\ntenants: %s of the target in child processes, protected by %s, each with a tenant tracker and an agent over one redis-server,\n",
		tenantsServers(info), tenantsProtection(info))
	fmt.Fprintf(&buf, "busy %v a request, control period %v; heavy at %sx of C, %d light tenants at %sx each, open loop, round robin:\n",
		spec.CPU, info.Period, formatMultiple(info.Heavy), info.Lights, formatMultiple(info.Light))
	tw := NewTab(&buf)
	Line(tw, "target", "enforce", "C/s", "offered/s", "converged", "lights %", "worst light %", "lights % all", "heavy xC", "heavy/left", "Jain", "blame heavy %", "of demand %", "heavy dropped %", "runs")
	for _, r := range rows {
		conv := "-"
		if r.Converged > 0 {
			conv = fmt.Sprintf("%.1f (%d)", r.ConvergePeriods, r.Converged)
		}
		Line(tw, r.Target, r.Part, fmt.Sprintf("%.0f", r.Capacity), fmt.Sprintf("%.0f", r.Offered), conv,
			pct2(r.LightSuccess), pct2(r.WorstLight), pct2(r.LightSuccessAll),
			fmt.Sprintf("%.3f", r.HeavyGoodput), fmt.Sprintf("%.3f", r.HeavyFair), fmt.Sprintf("%.3f", r.Jain),
			fmt.Sprintf("%.1f", 100*r.BlameHeavy), fmt.Sprintf("%.1f", 100*r.DemandBlameHeavy), fmt.Sprintf("%.1f", 100*r.HeavyDropped),
			fmt.Sprintf("%d/%d", r.Runs, r.Behind))
	}
	_ = tw.Flush()
	for _, r := range rows {
		if r.Part != bench.TenantsOn {
			continue
		}
		fmt.Fprintf(&buf, "%s, enforcing, against the flood targets (kept runs that met each):\n", r.Target)
		n := r.Runs
		if n == 0 {
			n = r.Behind // every run behind: they are the ones counted
		}
		for _, t := range tenantsTargets {
			verdict := "FAIL"
			if n > 0 && r.Met[t.key] == n {
				verdict = "PASS"
			}
			fmt.Fprintf(&buf, "  %-4s %s: %d/%d\n", verdict, t.text, r.Met[t.key], n)
		}
	}
	buf.WriteString("\n" + strings.Join([]string{
		"converged: the first time from which the light tenants together succeed on >= 99% of their requests over every span",
		"that starts there and lasts at least a period, in control periods from the start of the load (runs that converged);",
		"lights %, worst light %, heavy xC, heavy/left (the heavy tenant's goodput over C less the lights' load) and Jain",
		"(over each tenant's goodput / its max-min fair share) are measured from there, or over the whole window when it did",
		"not converge; lights % all: over the whole window; blame heavy %: the heavy tenant's share of the blame the servers",
		"counted, of demand %: once each tenant's blame per request is scaled to its requests offered (the simulation's",
		"measure); success: a 2xx within the deadline; runs: kept/behind.",
	}, "\n") + "\n")
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("report: write tenants: %w", err)
	}
	return nil
}

// pct2 prints a fraction as a percentage with two decimals.
func pct2(f float64) string { return fmt.Sprintf("%.2f", 100*f) }

// tenantsPlotBucket is the width of the plot's buckets: the series' are
// summed to it, so that a light tenant's few requests a bucket do not make
// its line noise.
const tenantsPlotBucket = 500 * time.Millisecond

// tenantsPlot draws, for the first kept run of each part of the first
// target, the heavy tenant's goodput and the light tenants' together
// against time, in multiples of C, with their fair shares; nil when there
// is no tenants run.
func tenantsPlot(rep *bench.Report) (*plot.Plot, string, error) {
	const name = "tenants.png"
	target := ""
	for _, s := range rep.Samples {
		if s.Tenants != nil {
			target = s.Target
			break
		}
	}
	var runs []bench.Sample
	for _, part := range bench.TenantsParts {
		var pick *bench.Sample
		for i := range rep.Samples {
			s := &rep.Samples[i]
			if s.Tenants == nil || s.Target != target || s.Tenants.Part != part {
				continue
			}
			if pick == nil || (pick.Behind && !s.Behind) || (s.Behind == pick.Behind && s.Repeat < pick.Repeat) {
				pick = s
			}
		}
		if pick != nil {
			runs = append(runs, *pick)
		}
	}
	if len(runs) == 0 {
		return nil, name, nil
	}
	info := runs[0].Tenants
	p := newPlot(fmt.Sprintf("Tenants: heavy at %sx of C, %d light at %sx each, over %s and Redis\ngoodput per %s ms in multiples of C; first kept run of each part (%s)",
		formatMultiple(info.Heavy), info.Lights, formatMultiple(info.Light), tenantsServers(info), formatDurationMS(tenantsPlotBucket), runs[0].Target),
		"time since start of the load (s)", "goodput (x C)")
	p.Legend.Left, p.Legend.XOffs = false, -legendInset
	ymax := 1.0
	colors := map[string]color.Color{"heavy": color.RGBA{R: 200, G: 40, B: 40, A: 255}, "lights": color.RGBA{R: 30, G: 90, B: 200, A: 255}}
	for _, s := range runs {
		heavy, lights := tenantsLines(s)
		dashes := []vg.Length(nil)
		if s.Tenants.Part == bench.TenantsOff {
			dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		for _, ln := range []struct {
			who string
			xys plotter.XYs
		}{{"heavy", heavy}, {"lights", lights}} {
			if len(ln.xys) == 0 {
				continue
			}
			for _, xy := range ln.xys {
				ymax = max(ymax, xy.Y)
			}
			l, err := plotter.NewLine(ln.xys)
			if err != nil {
				return nil, name, fmt.Errorf("report: tenants %s: %w", ln.who, err)
			}
			l.Color, l.Width, l.Dashes = colors[ln.who], vg.Points(1.5), dashes
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("%s, enforcement %s", ln.who, s.Tenants.Part), l)
		}
	}
	end := runs[0].Tenants.Bucket * time.Duration(len(runs[0].Series))
	left := 1 - float64(info.Lights)*info.Light
	l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: left}, {X: end.Seconds(), Y: left}})
	if err != nil {
		return nil, name, fmt.Errorf("report: tenants share: %w", err)
	}
	l.Color, l.Dashes = color.Gray{Y: 128}, []vg.Length{vg.Points(2), vg.Points(2)}
	p.Add(l)
	p.Legend.Add(fmt.Sprintf("fair shares: heavy %.2f, lights %.2f", left, 1-left), l)
	p.Y.Min, p.Y.Max = 0, ymax*1.05
	return p, name, nil
}

// tenantsLines returns the heavy tenant's goodput and the light tenants'
// together per tenantsPlotBucket of s, in multiples of C.
func tenantsLines(s bench.Sample) (heavy, lights plotter.XYs) {
	width := s.Tenants.Bucket
	if width <= 0 || s.Capacity <= 0 {
		return nil, nil
	}
	per := max(int(tenantsPlotBucket/width), 1)
	sum := func(light bool) plotter.XYs {
		var ok []int64
		for name, c := range s.Classes {
			if (name != bench.TenantHeavy) != light {
				continue
			}
			for i, b := range c.Series {
				if i/per >= len(ok) {
					ok = append(ok, 0)
				}
				ok[i/per] += b.OK
			}
		}
		var xys plotter.XYs
		sec := (time.Duration(per) * width).Seconds()
		for i, n := range ok {
			xys = append(xys, plotter.XY{X: (float64(i) + 0.5) * sec, Y: float64(n) / sec / s.Capacity})
		}
		return xys
	}
	return sum(false), sum(true)
}

// tenantsServers says how many servers a tenants run had.
func tenantsServers(info *bench.TenantsInfo) string {
	if len(info.Servers) == 1 {
		return "1 server"
	}
	return fmt.Sprintf("%d servers", len(info.Servers))
}

// tenantsProtection says what protected a tenants run's servers besides
// their trackers.
func tenantsProtection(info *bench.TenantsInfo) string {
	switch info.Protection {
	case bench.TenantsDefault:
		return "the default configuration (the age limit alone)"
	case bench.TenantsBusy:
		return "the busy gate and the timed queue"
	case "", bench.TenantsConcurrency:
		// Runs saved before the setting had this one.
		return "a concurrency gate of a request per worker and the timed queue"
	}
	return info.Protection
}
