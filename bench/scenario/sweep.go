package scenario

import (
	"context"

	"github.com/sluice-go/sluice/bench"
)

// Sweep offers the suite's Shape at each of its Multiples of each target's
// capacity (0.5x to 10x by default): the benchmark's main figure, goodput
// within the deadline against offered load.
type Sweep struct{}

// Name is "sweep".
func (*Sweep) Name() string { return bench.ScenarioSweep }

// Check refuses nothing the suite allows.
func (*Sweep) Check(s *bench.SuiteConfig) error { return checkWeather(s, bench.ScenarioSweep) }

// Points are one per multiple and client mode.
func (*Sweep) Points(s *bench.SuiteConfig) []bench.Point {
	var ps []bench.Point
	for _, m := range s.Multiples {
		ps = append(ps, clientPoints(bench.Point{Shape: s.Shape, Spec: s.Shape.Spec, Multiple: m}, s)...)
	}
	return ps
}

// Run offers the point's multiple for the suite's Duration.
func (*Sweep) Run(ctx context.Context, t *bench.Trial) (*bench.Sample, error) {
	return offer(ctx, t, nil)
}
