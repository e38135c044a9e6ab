package scenario

import (
	"context"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/report"
)

// Sweep offers the suite's Shape at each of its Multiples of each target's
// capacity (0.5x to 10x by default): the benchmark's main figure, goodput
// within the deadline against offered load.
type Sweep struct{}

// Name is "sweep".
func (*Sweep) Name() string { return "sweep" }

// Tabled shows the sweep's samples in the table of rates by offered load.
func (*Sweep) Tabled() {}

// Check refuses nothing the suite allows.
func (*Sweep) Check(s *bench.SuiteConfig) error { return checkWeather(s, "sweep") }

// Points are one per multiple and client mode.
func (*Sweep) Points(s *bench.SuiteConfig) []bench.Point {
	var ps []bench.Point
	for _, m := range s.Multiples {
		ps = append(ps, clientPoints(bench.Point{Shape: s.Shape, Spec: s.Shape.Spec, Multiple: m}, s)...)
	}
	return ps
}

// Plots draws goodput and latency against the load offered
// (report.OfferedPlots).
func (sw *Sweep) Plots(dir string, rep *bench.Report) ([]string, error) {
	return report.OfferedPlots(dir, rep, sw.Name())
}

// Run offers the point's multiple for the suite's Duration.
func (*Sweep) Run(ctx context.Context, t *bench.Trial) (*bench.Sample, error) {
	return offer(ctx, t, nil)
}
