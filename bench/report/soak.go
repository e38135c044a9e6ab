package report

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/sluice-go/sluice/bench"
)

// SoakRow sums up one soak run of one target: its goodput per bucket as a
// fraction of C, its resources at the settling time and at the end, and
// the outcome of its checks.
type SoakRow struct {
	Target   string  `json:"target"`
	Repeat   int     `json:"repeat"`
	Capacity float64 `json:"capacity"`
	Multiple float64 `json:"multiple"`
	// Behind reports that the load generator fell behind its schedule.
	Behind bool `json:"behind"`
	// MinGoodput and MedianGoodput are the least and the median goodput
	// of the buckets, as fractions of C.
	MinGoodput    float64 `json:"min_goodput_frac"`
	MedianGoodput float64 `json:"median_goodput_frac"`
	// Settle is when the flatness rules start; AtSettle and AtEnd are
	// the readings then and at the end of the sending window.
	Settle   time.Duration   `json:"settle"`
	AtSettle bench.Resources `json:"at_settle"`
	AtEnd    bench.Resources `json:"at_end"`
	// Enforced reports that the run's checks are enforced (the target
	// is in SoakRules.Enforce); otherwise they are reported only.
	Enforced bool `json:"enforced"`
	// Pass is true when every check passed; Failed names those that did
	// not.
	Pass   bool     `json:"pass"`
	Failed []string `json:"failed,omitempty"`
}

// SummarizeSoak returns one SoakRow per soak sample of rep, in target
// order (first appearance), then by repeat; nil when there is none.
func SummarizeSoak(rep *bench.Report) []SoakRow {
	if rep == nil {
		return nil
	}
	ranks := TargetRanks(rep)
	var rows []SoakRow
	for i := range rep.Samples {
		s := &rep.Samples[i]
		if s.Soak == nil {
			continue
		}
		si := s.Soak
		r := SoakRow{
			Target: s.Target, Repeat: s.Repeat, Capacity: s.Capacity, Multiple: s.Multiple,
			Behind: s.Behind, Settle: si.Settle, Pass: true,
		}
		if fr := bench.GoodputFractions(s); len(fr) > 0 {
			r.MinGoodput = slices.Min(fr)
			r.MedianGoodput = medianOf(fr)
		}
		r.AtSettle, _ = si.ResourceAt(si.Settle)
		if n := len(si.Resources); n > 0 {
			r.AtEnd = si.Resources[n-1]
		}
		r.Enforced = len(si.Checks) > 0
		for _, c := range si.Checks {
			r.Enforced = r.Enforced && c.Enforced
			if !c.Pass {
				r.Pass = false
				r.Failed = append(r.Failed, c.Name)
			}
		}
		rows = append(rows, r)
	}
	slices.SortStableFunc(rows, func(a, b SoakRow) int {
		if ra, rb := ranks[a.Target], ranks[b.Target]; ra != rb {
			return ra - rb
		}
		return a.Repeat - b.Repeat
	})
	return rows
}

// medianOf returns the median of xs.
func medianOf(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// WriteSoak writes the soak samples of rep to w: a table with one row per
// run (goodput per bucket over C, its least and median; resident memory,
// goroutines and descriptors at the settling time and at the end; the
// result), then, per run, one line per check ("PASS" or "FAIL", with
// "(not enforced)" for a check that is only reported, and the figures)
// and one line on what the chaos clients did. It writes nothing for a
// report without soak samples.
func WriteSoak(w io.Writer, rep *bench.Report) error {
	if rep == nil {
		return errors.New("report: nil report")
	}
	rows := SummarizeSoak(rep)
	if len(rows) == 0 {
		return nil
	}
	var buf bytes.Buffer
	first := firstSoak(rep)
	si := first.Soak
	fmt.Fprintf(&buf, "\nsoak, shape %s%s: %sx of C for %v, goodput per %v bucket; resources flat from %v\n",
		orDash(first.Shape), HandlerOf(rep, bench.ScenarioSoak, first.Shape), formatMultiple(first.Multiple),
		si.Duration, si.Bucket, si.Settle)
	fmt.Fprintf(&buf, "with %s, and %s\n\n", describeMix(si.ChaosMix), describePanics(si.PanicEvery))
	settle := "@" + strconv.FormatFloat(si.Settle.Seconds(), 'f', -1, 64) + "s"
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', tabwriter.AlignRight)
	reported := false
	Line(tw, "target", "run", "C/s", "goodput/C min", "median",
		"rss MiB "+settle, "end", "goroutines "+settle, "end", "fds "+settle, "end", "result")
	for _, r := range rows {
		target := r.Target
		if r.Behind {
			target += " *"
		}
		result := "PASS"
		if !r.Pass {
			result = "FAIL: " + strings.Join(r.Failed, ", ")
		}
		if !r.Enforced {
			result = "(" + strings.ToLower(result[:4]) + result[4:] + ")"
			reported = true
		}
		Line(tw, target, strconv.Itoa(r.Repeat), fmt.Sprintf("%.0f", r.Capacity),
			fmt.Sprintf("%.2f", r.MinGoodput), fmt.Sprintf("%.2f", r.MedianGoodput),
			mib(r.AtSettle), mib(r.AtEnd), goroutines(r.AtSettle), goroutines(r.AtEnd),
			fds(r.AtSettle), fds(r.AtEnd), result)
	}
	_ = tw.Flush()
	for _, s := range soakSamples(rep) {
		fmt.Fprintf(&buf, "\n%s, run %d:\n", s.Target, s.Repeat)
		for _, c := range s.Soak.Checks {
			verdict := "PASS"
			if !c.Pass {
				verdict = "FAIL"
			}
			if !c.Enforced {
				verdict += " (not enforced)"
			}
			fmt.Fprintf(&buf, "  %s %s: %s\n", verdict, c.Name, c.Detail)
		}
		if chaos := describeChaos(s.Soak.Chaos); chaos != "" {
			fmt.Fprintf(&buf, "  chaos: %s\n", chaos)
		}
	}
	if reported || slices.ContainsFunc(rows, func(r SoakRow) bool { return r.Behind }) {
		buf.WriteString("\n")
	}
	if reported {
		buf.WriteString("A result in parentheses is reported only: the checks are enforced on the sluice targets, and\n" +
			"net/http runs beside them to compare with.\n")
	}
	if slices.ContainsFunc(rows, func(r SoakRow) bool { return r.Behind }) {
		buf.WriteString("* the load generator fell behind its schedule in this run: the target was offered less than asked.\n")
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("report: write soak: %w", err)
	}
	return nil
}

// firstSoak returns the first soak sample of rep (there is one).
func firstSoak(rep *bench.Report) *bench.Sample {
	return soakSamples(rep)[0]
}

// soakSamples returns rep's soak samples in the order of SummarizeSoak.
func soakSamples(rep *bench.Report) []*bench.Sample {
	ranks := TargetRanks(rep)
	var out []*bench.Sample
	for i := range rep.Samples {
		if rep.Samples[i].Soak != nil {
			out = append(out, &rep.Samples[i])
		}
	}
	slices.SortStableFunc(out, func(a, b *bench.Sample) int {
		if ra, rb := ranks[a.Target], ranks[b.Target]; ra != rb {
			return ra - rb
		}
		return a.Repeat - b.Repeat
	})
	return out
}

func mib(r bench.Resources) string {
	if !r.Up {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(r.RSS)/(1<<20))
}

func goroutines(r bench.Resources) string {
	if !r.Up || r.Goroutines < 0 {
		return "-"
	}
	return strconv.Itoa(r.Goroutines)
}

func fds(r bench.Resources) string {
	if !r.Up {
		return "-"
	}
	return strconv.Itoa(r.FDs)
}

// describeMix says which chaos clients ran.
func describeMix(m bench.ChaosMix) string {
	if m.Total() == 0 {
		return "no chaos clients"
	}
	var parts []string
	for _, k := range bench.ChaosKinds {
		if n := m.Of(k); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	return fmt.Sprintf("%d chaos clients (%s)", m.Total(), strings.Join(parts, ", "))
}

// describePanics says how often the handler panicked.
func describePanics(every int) string {
	if every <= 0 {
		return "a handler that never panics"
	}
	return fmt.Sprintf("a handler that panics on every %d%s request (%.3g%%)", every, ordinalSuffix(every), 100/float64(every))
}

func ordinalSuffix(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return "th"
	case n%10 == 1:
		return "st"
	case n%10 == 2:
		return "nd"
	case n%10 == 3:
		return "rd"
	}
	return "th"
}

// describeChaos sums up what the chaos clients did, kind by kind.
func describeChaos(st bench.ChaosStats) string {
	var parts []string
	for _, k := range bench.ChaosKinds {
		c := st[k.String()]
		if c == nil {
			continue
		}
		p := fmt.Sprintf("%s %d conns", k, c.Conns)
		if c.DialErrors > 0 {
			p += fmt.Sprintf(", %d failed dials", c.DialErrors)
		}
		if c.Requests > 0 {
			p += fmt.Sprintf(", %d requests", c.Requests)
		}
		if len(c.Status) > 0 {
			codes := slices.Sorted(func(yield func(int) bool) {
				for code := range c.Status {
					if !yield(code) {
						return
					}
				}
			})
			var sc []string
			for _, code := range codes {
				sc = append(sc, fmt.Sprintf("%d×%d", c.Status[code], code))
			}
			p += ", answers " + strings.Join(sc, " ")
		}
		if c.Stalled > 0 {
			p += fmt.Sprintf(", %d stalled the server's writes", c.Stalled)
		}
		if c.ServerClosed > 0 {
			p += fmt.Sprintf(", %d closed by the server", c.ServerClosed)
		}
		if c.CutMax > 0 {
			p += fmt.Sprintf(" (cut after %v-%v)", c.CutMin.Round(10*time.Millisecond), c.CutMax.Round(10*time.Millisecond))
		}
		if c.Resets > 0 {
			p += fmt.Sprintf(", %d reset", c.Resets)
		}
		if c.GaveUp > 0 {
			p += fmt.Sprintf(", %d given up on", c.GaveUp)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

// soakPlot draws the goodput per bucket of the soak runs of shape, one
// per target (its lowest repeat), as fractions of C, and returns it with
// its file name, or a nil plot when there is none.
func soakPlot(rep *bench.Report, shape string, ranks map[string]int) (*plot.Plot, string, error) {
	name := fileName("soak", shape)
	picked := make(map[string]*bench.Sample)
	for i := range rep.Samples {
		s := &rep.Samples[i]
		if s.Scenario != bench.ScenarioSoak || s.Shape != shape || s.Soak == nil || len(bench.GoodputFractions(s)) == 0 {
			continue
		}
		if old, ok := picked[s.Target]; !ok || s.Repeat < old.Repeat {
			picked[s.Target] = s
		}
	}
	if len(picked) == 0 {
		return nil, name, nil
	}
	targets := byRank(picked, ranks)
	first := picked[targets[0]].Soak
	p := newPlot(fmt.Sprintf("Soak, shape %s: %sx of C with chaos clients, goodput per %v bucket",
		orDash(shape), formatMultiple(picked[targets[0]].Multiple), first.Bucket),
		"time since start of run (s)", "goodput / C")
	// The legend goes top right, above the lines: headroom is added.
	p.Legend.Left, p.Legend.XOffs = false, -legendInset
	ymax := 1.0
	for _, t := range targets {
		s := picked[t]
		var xys plotter.XYs
		for i, f := range bench.GoodputFractions(s) {
			xys = append(xys, plotter.XY{X: (s.Series[i].Start + s.Soak.Bucket/2).Seconds(), Y: f})
			ymax = max(ymax, f)
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, name, fmt.Errorf("report: soak goodput of %s: %w", t, err)
		}
		l.Color, l.Width = plotutil.Color(ranks[t]), vg.Points(1.5)
		p.Add(l)
		label := t
		if s.Behind {
			label += " (generator behind)"
		}
		p.Legend.Add(label, l)
	}
	end := first.Duration.Seconds()
	floor, err := plotter.NewLine(plotter.XYs{{X: 0, Y: first.Rules.MinGoodput}, {X: end, Y: first.Rules.MinGoodput}})
	if err != nil {
		return nil, name, fmt.Errorf("report: soak floor: %w", err)
	}
	floor.Color = color.Gray{Y: 128}
	floor.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(floor)
	p.Legend.Add(fmt.Sprintf("least allowed (%.2f)", first.Rules.MinGoodput), floor)
	p.X.Min, p.X.Max = 0, end
	p.Y.Min, p.Y.Max = 0, ymax*1.35
	return p, name, nil
}
