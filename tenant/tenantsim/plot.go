package tenantsim

import (
	"errors"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Size of one panel of the PNG that Plot writes.
const (
	panelWidth  = 18 * vg.Centimeter
	panelHeight = 8 * vg.Centimeter
)

// Plot draws r as a PNG file at path, three panels one above the other,
// per second of the run and per group of tenants (a TenantSpec with a
// Count is one line): the goodput in multiples of C (the sum over the
// group), the drop fraction in force (the mean over the group and the
// servers), and the share of the blame (the sum over the group). Grey
// dashed lines mark when tenants start or stop, and the windows of
// enforcement off and of the store's outage.
func Plot(path string, r *Result) error {
	if r == nil || len(r.Tenants) == 0 {
		return errors.New("tenantsim: nothing to plot")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("tenantsim: plot directory: %w", err)
	}
	panels := []struct {
		title, y string
		value    func(g group, sec int) float64
		max      float64
	}{
		{"goodput (x C)", "goodput (x C)", func(g group, sec int) float64 {
			var v float64
			for _, i := range g.members {
				v += r.Tenants[i].Seconds[sec].Goodput
			}
			return v
		}, 0},
		{"drop fraction in force", "drop fraction", func(g group, sec int) float64 {
			var v float64
			for _, i := range g.members {
				v += r.Tenants[i].Seconds[sec].Drop
			}
			return v / float64(len(g.members))
		}, 1},
		{"share of the blame", "blame share", func(g group, sec int) float64 {
			var v float64
			for _, i := range g.members {
				v += r.Tenants[i].Seconds[sec].BlameShare
			}
			return v
		}, 1},
	}
	sc := r.Scenario
	marks := r.marks()
	rows := make([][]*plot.Plot, len(panels))
	for k, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		if k == 0 {
			p.Title.Text = fmt.Sprintf("%s (seed %d): %s\n%s", sc.Name, sc.Seed, sc.Description, pn.title)
		}
		p.X.Label.Text = "time (s)"
		p.Y.Label.Text = pn.y
		p.Legend.Top = true
		p.Legend.XOffs = -3 * vg.Millimeter
		p.Add(plotter.NewGrid())
		ymax := pn.max
		for gi, g := range r.groups() {
			xys := make(plotter.XYs, len(r.Tenants[0].Seconds))
			for sec := range xys {
				xys[sec] = plotter.XY{X: float64(sec) + 0.5, Y: pn.value(g, sec)}
				ymax = max(ymax, xys[sec].Y)
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return fmt.Errorf("tenantsim: plot %s: %w", g.name, err)
			}
			l.Color = plotutil.Color(gi)
			l.Dashes = plotutil.Dashes(gi / 7)
			l.Width = vg.Points(1.5)
			p.Add(l)
			p.Legend.Add(g.label(), l)
		}
		if ymax <= 0 {
			ymax = 1
		}
		for _, at := range marks {
			l, err := plotter.NewLine(plotter.XYs{{X: at, Y: 0}, {X: at, Y: ymax * 1.05}})
			if err != nil {
				return fmt.Errorf("tenantsim: plot mark: %w", err)
			}
			l.Color = color.Gray{Y: 140}
			l.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
			p.Add(l)
		}
		p.X.Min, p.X.Max = 0, time.Duration(sc.Duration).Seconds()
		p.Y.Min, p.Y.Max = 0, ymax*1.05
		rows[k] = []*plot.Plot{p}
	}
	img := vgimg.New(panelWidth, panelHeight*vg.Length(len(panels)))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadX: vg.Millimeter, PadY: 2 * vg.Millimeter,
		PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: vg.Millimeter}
	canvases := plot.Align(rows, tiles, dc)
	for k := range rows {
		rows[k][0].Draw(canvases[k][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("tenantsim: plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("tenantsim: plot %s: %w", path, err)
	}
	return f.Close()
}

// marks returns the times, in seconds, at which something changes in the
// scenario: tenants start or stop, enforcement goes off or on, the store
// fails or comes back.
func (r *Result) marks() []float64 {
	sc := r.Scenario
	end := time.Duration(sc.Duration)
	var out []float64
	add := func(d Duration) {
		if v := time.Duration(d); v > 0 && v < end {
			out = append(out, v.Seconds())
		}
	}
	for _, t := range sc.Tenants {
		add(t.Start)
		add(t.End)
	}
	for _, w := range []*Window{sc.EnforceOff, sc.Outage} {
		if w != nil {
			add(w.From)
			add(w.To)
		}
	}
	return out
}
