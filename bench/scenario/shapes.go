package scenario

import (
	"context"

	"github.com/sluice-go/sluice/bench"
)

// Shapes compares CPU-bound, I/O-bound and blocking handlers (the suite's
// Shapes) at the same multiples of their own capacity (ShapeMultiples).
type Shapes struct{}

// Name is "shapes".
func (*Shapes) Name() string { return "shapes" }

// Tabled shows the shapes's samples in the table of rates by offered load.
func (*Shapes) Tabled() {}

// Check refuses nothing the suite allows.
func (*Shapes) Check(s *bench.SuiteConfig) error { return checkWeather(s, "shapes") }

// Points are one per shape, multiple and client mode.
func (*Shapes) Points(s *bench.SuiteConfig) []bench.Point {
	var ps []bench.Point
	for _, sh := range s.Shapes {
		for _, m := range s.ShapeMultiples {
			ps = append(ps, clientPoints(bench.Point{Shape: sh, Spec: sh.Spec, Multiple: m}, s)...)
		}
	}
	return ps
}

// Run offers the point's multiple for the suite's Duration.
func (*Shapes) Run(ctx context.Context, t *bench.Trial) (*bench.Sample, error) {
	return offer(ctx, t, nil)
}
