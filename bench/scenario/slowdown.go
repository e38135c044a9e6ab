package scenario

import (
	"context"
	"time"

	"github.com/sluice-go/sluice/bench"
)

// Slowdown offers SlowdownMultiple of the capacity measured with the normal
// database while the database answers SlowdownFactor times slower: a
// dependency slowing down under a steady load.
type Slowdown struct{}

// Name is "slowdown".
func (*Slowdown) Name() string { return "slowdown" }

// Tabled shows the slowdown's samples in the table of rates by offered load.
func (*Slowdown) Tabled() {}

// Check refuses nothing the suite allows.
func (*Slowdown) Check(s *bench.SuiteConfig) error { return checkWeather(s, "slowdown") }

// Points are one: the suite's Shape with its database wait multiplied.
func (*Slowdown) Points(s *bench.SuiteConfig) []bench.Point {
	slow := s.Shape.Spec
	slow.DB = time.Duration(float64(slow.DB) * s.SlowdownFactor)
	return []bench.Point{{Shape: s.Shape, Spec: slow, Multiple: s.SlowdownMultiple}}
}

// Run offers the point's multiple for the suite's Duration.
func (*Slowdown) Run(ctx context.Context, t *bench.Trial) (*bench.Sample, error) {
	return offer(ctx, t, nil)
}
