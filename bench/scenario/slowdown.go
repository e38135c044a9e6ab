package scenario

import (
	"context"
	"flag"
	"time"

	"github.com/sluice-go/sluice/bench"
)

// The slowdown scenario's defaults.
const (
	// DefaultSlowdownFactor is how many times slower the database
	// answers.
	DefaultSlowdownFactor = 2
	// DefaultSlowdownMultiple is the offered load, in multiples of the
	// capacity measured with the normal database.
	DefaultSlowdownMultiple = 0.8
)

// Slowdown offers Multiple of the capacity measured with the normal
// database while the database answers Factor times slower: a dependency
// slowing down under a steady load.
type Slowdown struct {
	// Factor multiplies the suite's Shape's database wait; default
	// DefaultSlowdownFactor.
	Factor float64
	// Multiple is the offered load, in multiples of each target's
	// capacity with the normal database; default
	// DefaultSlowdownMultiple.
	Multiple float64
}

// Name is "slowdown".
func (*Slowdown) Name() string { return "slowdown" }

// Tabled shows the slowdown's samples in the table of rates by offered
// load.
func (*Slowdown) Tabled() {}

// Flags registers -slowdown-factor and -slowdown-x.
func (sl *Slowdown) Flags(fs *flag.FlagSet) {
	fs.Float64Var(&sl.Factor, "slowdown-factor", orFloat(sl.Factor, DefaultSlowdownFactor), "the slowdown scenario's database, this many times slower than when the capacity was measured")
	fs.Float64Var(&sl.Multiple, "slowdown-x", orFloat(sl.Multiple, DefaultSlowdownMultiple), "the slowdown scenario's offered load, in multiples of the capacity with the normal database")
}

// Check fills in the defaults and checks both settings are positive.
func (sl *Slowdown) Check(s *bench.SuiteConfig) error {
	sl.Factor = orFloat(sl.Factor, DefaultSlowdownFactor)
	sl.Multiple = orFloat(sl.Multiple, DefaultSlowdownMultiple)
	return positiveFinite(sl.Name(), setting{"factor (-slowdown-factor)", sl.Factor}, setting{"multiple (-slowdown-x)", sl.Multiple})
}

// Points are one: the suite's Shape with its database wait multiplied.
func (sl *Slowdown) Points(s *bench.SuiteConfig) []bench.Point {
	slow := s.Shape.Spec
	slow.DB = time.Duration(float64(slow.DB) * sl.Factor)
	return []bench.Point{{Shape: s.Shape, Spec: slow, Multiple: sl.Multiple}}
}

// Run offers the point's multiple for the suite's Duration.
func (*Slowdown) Run(ctx context.Context, t *bench.Trial) (*bench.Sample, error) {
	return offer(ctx, t, nil)
}
