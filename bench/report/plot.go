package report

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/sluice-go/sluice/bench"
)

// Size of the PNG files Plots writes.
const (
	plotWidth  = 18 * vg.Centimeter
	plotHeight = 11 * vg.Centimeter
)

// OfferedPlots draws the charts of the named scenario's samples against
// the load offered them as PNG files in dir, which it creates if missing,
// and returns their paths:
//
//   - goodput-<shape>.png for each handler shape of the scenario: median
//     goodput as a fraction of capacity C against the offered multiple of
//     C (log scale), one line per target, and the ideal min(x, 1);
//   - latency-<shape>.png for the same shapes: median p50 (solid) and p99
//     (dashed) latency of the OK answers in ms (log scale) against the
//     offered multiple.
//
// The shape's part of a name is reduced to letters, digits, '-' and '_';
// a sample without a shape gives goodput.png and latency.png. A chart
// without data (no such scenario, or no kept run) is skipped without
// error. StepPlots draws the charts of a scenario whose load is a step.
func OfferedPlots(dir string, rep *bench.Report, scenario string) ([]string, error) {
	if rep == nil {
		return nil, errors.New("report: nil report")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: plot directory: %w", err)
	}
	ranks := TargetRanks(rep)
	rows := Summarize(rep, []string{scenario})
	// The lines of the targets' client modes, a colour each.
	for _, r := range rows {
		if _, ok := ranks[lineName(r)]; !ok {
			ranks[lineName(r)] = len(ranks)
		}
	}
	var paths []string
	used := make(map[string]bool)
	// save writes p, unless it is nil, under name, or under name with a
	// number added when two shapes reduce to the same name.
	save := func(p *plot.Plot, name string, err error) error {
		if err != nil || p == nil {
			return err
		}
		base := strings.TrimSuffix(name, ".png")
		for i := 2; used[name]; i++ {
			name = base + "-" + strconv.Itoa(i) + ".png"
		}
		used[name] = true
		path := filepath.Join(dir, name)
		if err := p.Save(plotWidth, plotHeight, path); err != nil {
			return fmt.Errorf("report: save %s: %w", name, err)
		}
		paths = append(paths, path)
		return nil
	}

	for _, shape := range shapes(rep, scenario) {
		lines := offeredLines(rows, shape)
		if err := save(goodputPlot(shape, lines, ranks)); err != nil {
			return paths, err
		}
		if err := save(latencyPlot(shape, lines, ranks)); err != nil {
			return paths, err
		}
	}
	return paths, nil
}

// shapes returns the handler shapes of a scenario's samples, sorted.
func shapes(rep *bench.Report, scenario string) []string {
	var out []string
	for _, s := range rep.Samples {
		if s.Scenario == scenario && !slices.Contains(out, s.Shape) {
			out = append(out, s.Shape)
		}
	}
	slices.Sort(out)
	return out
}

// fileName returns "<kind>-<shape>.png" with the shape reduced to safe
// characters, or "<kind>.png" without a shape.
func fileName(kind, shape string) string {
	safe := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		default:
			return '_'
		}
	}, shape)
	if safe == "" {
		return kind + ".png"
	}
	return kind + "-" + safe + ".png"
}

// offeredLines returns the whole-sample rows of shape with a kept run (or
// indicative ones, see titleNote) and a positive multiple, per target (per
// target and client mode, "nethttp keep", when the runs named modes), by
// ascending multiple.
func offeredLines(rows []Row, shape string) map[string][]Row {
	lines := make(map[string][]Row)
	for _, r := range rows {
		if r.Shape == shape && r.Class == "" && (r.Runs > 0 || r.Indicative) && r.Multiple > 0 {
			lines[lineName(r)] = append(lines[lineName(r)], r)
		}
	}
	return lines
}

// lineName names a row's line in an offered-load plot: its target, and its client
// mode when it has one.
func lineName(r Row) string {
	if r.Client == "" {
		return r.Target
	}
	return r.Target + " " + r.Client
}

// titleNote says what the points are medians of, and names the points
// from runs whose generator fell behind (indicative ones) if any.
func titleNote(lines map[string][]Row) string {
	var ind []string
	for _, rows := range lines {
		for _, r := range rows {
			if r.Indicative {
				ind = append(ind, r.Target+" "+formatTick(r.Multiple)+"x")
			}
		}
	}
	if len(ind) == 0 {
		return " (medians of kept runs)"
	}
	slices.Sort(ind)
	return " (medians of kept runs;\nbehind schedule, indicative: " + strings.Join(ind, ", ") + ")"
}

// byRank returns the keys of lines in the order of ranks.
func byRank[T any](lines map[string]T, ranks map[string]int) []string {
	targets := make([]string, 0, len(lines))
	for t := range lines {
		targets = append(targets, t)
	}
	slices.SortFunc(targets, func(a, b string) int { return ranks[a] - ranks[b] })
	return targets
}

// legendInset keeps the legend off the axes.
const legendInset = 3 * vg.Millimeter

// newPlot returns a plot with a title, axis labels and the legend at the
// top left.
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs, p.Legend.YOffs = legendInset, -legendInset
	p.Add(plotter.NewGrid())
	return p
}

// logTicks marks a log axis at 1, 2 and 5 times the powers of ten between
// lo and hi, with unlabelled minor ticks at the other integers; when that
// labels fewer than two ticks (a narrow range), it labels them all.
func logTicks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return nil
	}
	var ticks []plot.Tick
	labelled := 0
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		base := math.Pow(10, e)
		for m := 1; m < 10; m++ {
			v := float64(m) * base
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = formatTick(v)
				labelled++
			}
			ticks = append(ticks, t)
		}
	}
	if labelled < 2 {
		for i := range ticks {
			ticks[i].Label = formatTick(ticks[i].Value)
		}
	}
	return ticks
}

// formatTick prints a tick value rounded to four significant digits,
// without an exponent.
func formatTick(v float64) string {
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 4, 64), 64)
	if err != nil {
		r = v
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// maxValueTicks is the most distinct multiples multipleTicks labels one by
// one.
const maxValueTicks = 12

// multipleTicks marks the offered multiples xs themselves when there are
// few of them, else falls back to logTicks.
func multipleTicks(xs []float64) plot.Ticker {
	distinct := slices.Clone(xs)
	slices.Sort(distinct)
	distinct = slices.Compact(distinct)
	if len(distinct) > maxValueTicks {
		return plot.TickerFunc(logTicks)
	}
	ticks := make(plot.ConstantTicks, len(distinct))
	for i, x := range distinct {
		ticks[i] = plot.Tick{Value: x, Label: formatTick(x)}
	}
	return ticks
}

// setLog makes ax a log axis from lo/pad to hi*pad, marked by ticker.
func setLog(ax *plot.Axis, lo, hi, pad float64, ticker plot.Ticker) {
	ax.Scale = plot.LogScale{}
	ax.Tick.Marker = ticker
	ax.Min = lo / pad
	ax.Max = hi * pad
}

// linePoints returns a line with glyphs in the style of target number i.
func linePoints(xys plotter.XYs, i int) (*plotter.Line, *plotter.Scatter, error) {
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return nil, nil, err
	}
	l.Color = plotutil.Color(i)
	l.Width = vg.Points(1.5)
	s.Color = plotutil.Color(i)
	s.Shape = plotutil.Shape(i)
	s.Radius = vg.Points(3)
	return l, s, nil
}

// goodputPlot draws goodput / C against the offered multiple and returns
// it with its file name, or a nil plot without data.
func goodputPlot(shape string, lines map[string][]Row, ranks map[string]int) (*plot.Plot, string, error) {
	name := fileName("goodput", shape)
	if len(lines) == 0 {
		return nil, name, nil
	}
	p := newPlot("Goodput vs offered load, sweep, shape "+orDash(shape)+titleNote(lines),
		"offered load (multiple of capacity C, log scale)", "goodput / C")
	// Light load leaves the bottom left empty: goodput there is x at most.
	p.Legend.Top, p.Legend.YOffs = false, legendInset
	var xs []float64
	xmin, xmax, ymax := math.Inf(1), math.Inf(-1), 1.0
	for _, target := range byRank(lines, ranks) {
		var xys plotter.XYs
		for _, r := range lines[target] {
			xys = append(xys, plotter.XY{X: r.Multiple, Y: r.GoodputFrac})
			xs = append(xs, r.Multiple)
			xmin, xmax, ymax = math.Min(xmin, r.Multiple), math.Max(xmax, r.Multiple), math.Max(ymax, r.GoodputFrac)
		}
		l, s, err := linePoints(xys, ranks[target])
		if err != nil {
			return nil, name, fmt.Errorf("report: goodput of %s: %w", target, err)
		}
		p.Add(l, s)
		p.Legend.Add(target, l, s)
	}
	const pad = 1.15
	l, err := plotter.NewLine(idealLine(xmin/pad, xmax*pad))
	if err != nil {
		return nil, name, fmt.Errorf("report: ideal goodput: %w", err)
	}
	l.Color = color.Gray{Y: 96}
	l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(l)
	p.Legend.Add("ideal min(x, 1)", l)
	setLog(&p.X, xmin, xmax, pad, multipleTicks(xs))
	p.Y.Min, p.Y.Max = 0, ymax*1.1
	return p, name, nil
}

// idealLine samples min(x, 1) between lo and hi, evenly on a log scale,
// with its knee at 1.
func idealLine(lo, hi float64) plotter.XYs {
	const n = 64
	var xys plotter.XYs
	for i := range n {
		x := lo * math.Pow(hi/lo, float64(i)/(n-1))
		xys = append(xys, plotter.XY{X: x, Y: math.Min(x, 1)})
	}
	if lo < 1 && 1 < hi {
		xys = append(xys, plotter.XY{X: 1, Y: 1})
		slices.SortFunc(xys, func(a, b plotter.XY) int {
			switch {
			case a.X < b.X:
				return -1
			case a.X > b.X:
				return 1
			default:
				return 0
			}
		})
	}
	return xys
}

// latencyPlot draws the p50 and p99 latencies against the offered
// multiple and returns it with its file name, or a nil plot when no row
// has a latency.
func latencyPlot(shape string, lines map[string][]Row, ranks map[string]int) (*plot.Plot, string, error) {
	name := fileName("latency", shape)
	p := newPlot("Latency of OK answers vs offered load, sweep, shape "+orDash(shape)+titleNote(lines),
		"offered load (multiple of capacity C, log scale)", "latency (ms, log scale)")
	var xs []float64
	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymin, ymax := math.Inf(1), math.Inf(-1)
	for _, target := range byRank(lines, ranks) {
		for _, pc := range []struct {
			name string
			get  func(Row) float64
			dash bool
		}{
			{"p50", func(r Row) float64 { return r.P50 }, false},
			{"p99", func(r Row) float64 { return r.P99 }, true},
		} {
			var xys plotter.XYs
			for _, r := range lines[target] {
				if v := pc.get(r); v > 0 {
					xys = append(xys, plotter.XY{X: r.Multiple, Y: v})
					xs = append(xs, r.Multiple)
					xmin, xmax = math.Min(xmin, r.Multiple), math.Max(xmax, r.Multiple)
					ymin, ymax = math.Min(ymin, v), math.Max(ymax, v)
				}
			}
			if len(xys) == 0 {
				continue
			}
			l, s, err := linePoints(xys, ranks[target])
			if err != nil {
				return nil, name, fmt.Errorf("report: %s latency of %s: %w", pc.name, target, err)
			}
			if pc.dash {
				l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			p.Add(l, s)
			p.Legend.Add(target+" "+pc.name, l, s)
		}
	}
	if math.IsInf(ymin, 0) {
		return nil, name, nil
	}
	setLog(&p.X, xmin, xmax, 1.15, multipleTicks(xs))
	setLog(&p.Y, ymin, ymax, 1.5, plot.TickerFunc(logTicks))
	// Latency is lowest at light load; headroom above the highest point
	// keeps the legend (top left) off the lines.
	p.Y.Max = ymax * 4
	return p, name, nil
}

// stepRun is the run of one target a step plot shows.
type stepRun struct {
	target string
	sample bench.Sample
	width  time.Duration // of its series' buckets
}

// stepRuns picks, per target of the scenario with shape, the kept run
// (not behind, and kept by keep) with a series that has the lowest repeat
// index, in target order.
func stepRuns(rep *bench.Report, scenario, shape string, ranks map[string]int, keep func(bench.Sample) bool) []stepRun {
	picked := make(map[string]stepRun)
	for _, s := range rep.Samples {
		if s.Scenario != scenario || s.Shape != shape || s.Behind || len(s.Series) == 0 || !keep(s) {
			continue
		}
		end := s.Series[len(s.Series)-1].Start
		if s.Step != nil {
			end = s.Step.End
		}
		w := BucketWidth(s.Series, end)
		if w <= 0 {
			continue
		}
		if old, ok := picked[s.Target]; ok && old.sample.Repeat <= s.Repeat {
			continue
		}
		picked[s.Target] = stepRun{target: s.Target, sample: s, width: w}
	}
	runs := make([]stepRun, 0, len(picked))
	for _, t := range byRank(picked, ranks) {
		runs = append(runs, picked[t])
	}
	return runs
}

// keepAll keeps every sample.
func keepAll(bench.Sample) bool { return true }

// StepPlots draws, for each shape of the scenario's samples, a chart titled
// title as <scenario>-<shape>.png in dir, which it creates if missing, and
// returns their paths: for a scenario whose load is a step (its samples
// with a StepInfo and a Series), goodput, offered (dashed) and rejected
// (thin) rates per second of each series bucket against time, for one run
// per target, with the step up and down marked. The run shown of each
// target is the one with the lowest repeat index that is not behind and
// that keep keeps (nil keeps every run).
func StepPlots(dir string, rep *bench.Report, scenario, title string, keep func(bench.Sample) bool) ([]string, error) {
	if rep == nil {
		return nil, errors.New("report: nil report")
	}
	if keep == nil {
		keep = keepAll
	}
	ranks := TargetRanks(rep)
	return ShapePlots(dir, rep, scenario, func(shape string) (*plot.Plot, string, error) {
		return stepPlot(rep, scenario, title, shape, ranks, keep)
	})
}

// ShapePlots draws, with draw, one chart per handler shape of the
// scenario's samples in rep, and saves each in dir, which it creates if
// missing, under the file name draw gives it (PlotFile), numbered when two
// shapes give the same name; it returns their paths. draw returns a nil
// plot for a shape with nothing to show, which is skipped.
func ShapePlots(dir string, rep *bench.Report, scenario string, draw func(shape string) (*plot.Plot, string, error)) ([]string, error) {
	if rep == nil {
		return nil, errors.New("report: nil report")
	}
	var paths []string
	used := make(map[string]bool)
	for _, shape := range shapes(rep, scenario) {
		p, name, err := draw(shape)
		if err != nil {
			return paths, err
		}
		if p == nil {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return paths, fmt.Errorf("report: plot directory: %w", err)
		}
		base := strings.TrimSuffix(name, ".png")
		for i := 2; used[name]; i++ {
			name = base + "-" + strconv.Itoa(i) + ".png"
		}
		used[name] = true
		path := filepath.Join(dir, name)
		if err := p.Save(plotWidth, plotHeight, path); err != nil {
			return paths, fmt.Errorf("report: save %s: %w", name, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// PlotFile returns the file name of a chart of kind for a handler shape:
// "<kind>-<shape>.png" with the shape reduced to letters, digits, '-' and
// '_', or "<kind>.png" without a shape.
func PlotFile(kind, shape string) string { return fileName(kind, shape) }

// NewPlot returns a chart as this package draws them: a title, axis
// labels, a grid and the legend at the top left, LegendInset off the
// axes.
func NewPlot(title, x, y string) *plot.Plot { return newPlot(title, x, y) }

// LegendInset is how far NewPlot keeps the legend off the axes.
const LegendInset = legendInset

// stepPlot draws the time series of shape in a scenario whose load is a
// step, titled title, and returns it with its file name, or a nil plot
// when no target has a run that stepRuns keeps.
func stepPlot(rep *bench.Report, scenario, title, shape string, ranks map[string]int, keep func(bench.Sample) bool) (*plot.Plot, string, error) {
	name := fileName(scenario, shape)
	runs := stepRuns(rep, scenario, shape, ranks, keep)
	if len(runs) == 0 {
		return nil, name, nil
	}
	shown := make([]string, len(runs))
	for i, r := range runs {
		shown[i] = fmt.Sprintf("%s #%d", r.target, r.sample.Repeat)
	}
	bucket := formatDurationMS(runs[0].width) + " ms"
	p := newPlot(fmt.Sprintf("%s, shape %s, rates per %s bucket\nrun shown: first kept repeat of each target (%s)",
		title, orDash(shape), bucket, strings.Join(shown, ", ")),
		"time since start of run (s)", "requests per second")
	p.Legend.Left, p.Legend.XOffs = false, -legendInset
	ymax := 0.0
	for _, r := range runs {
		var good, done, offered, rejected plotter.XYs
		hasDone := hasCompletions(r.sample.Series)
		for _, b := range r.sample.Series {
			x := (b.Start + r.width/2).Seconds()
			good = append(good, plotter.XY{X: x, Y: perSecond(b.OK, r.width)})
			if hasDone {
				done = append(done, plotter.XY{X: x, Y: perSecond(b.Completed, r.width)})
			}
			offered = append(offered, plotter.XY{X: x, Y: perSecond(b.Offered, r.width)})
			rejected = append(rejected, plotter.XY{X: x, Y: perSecond(b.Rejected, r.width)})
		}
		for _, xys := range []plotter.XYs{good, done, offered, rejected} {
			for _, xy := range xys {
				ymax = math.Max(ymax, xy.Y)
			}
		}
		c := plotutil.Color(ranks[r.target])
		for _, ln := range []struct {
			name   string
			xys    plotter.XYs
			width  vg.Length
			dashes []vg.Length
		}{
			{"goodput/s by send time", good, vg.Points(1.5), nil},
			{"goodput/s by end time", done, vg.Points(1), []vg.Length{vg.Points(1), vg.Points(2)}},
			{"offered/s", offered, vg.Points(1), []vg.Length{vg.Points(5), vg.Points(3)}},
			{"rejected/s", rejected, vg.Points(0.5), nil},
		} {
			if len(ln.xys) == 0 {
				continue
			}
			l, err := plotter.NewLine(ln.xys)
			if err != nil {
				return nil, name, fmt.Errorf("report: step %s of %s: %w", ln.name, r.target, err)
			}
			l.Color, l.Width, l.Dashes = c, ln.width, ln.dashes
			p.Add(l)
			p.Legend.Add(r.target+" "+ln.name, l)
		}
	}
	if ymax <= 0 {
		ymax = 1
	}
	if info := runs[0].sample.Step; info != nil {
		for i, at := range []float64{info.Up.Seconds(), info.Down.Seconds()} {
			l, err := plotter.NewLine(plotter.XYs{{X: at, Y: 0}, {X: at, Y: ymax}})
			if err != nil {
				return nil, name, fmt.Errorf("report: step marker: %w", err)
			}
			l.Color = color.Gray{Y: 128}
			l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
			p.Add(l)
			if i == 0 {
				p.Legend.Add("step up, step down", l)
			}
		}
	}
	p.Y.Min, p.Y.Max = 0, ymax*1.05
	return p, name, nil
}
