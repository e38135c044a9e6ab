package scenario

import (
	"context"
	"flag"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/report"
)

// DefaultSweepMultiples returns the sweep's offered loads when Sweep names
// none.
func DefaultSweepMultiples() []float64 { return []float64{0.5, 1, 2, 3, 5, 7, 10} }

// Sweep offers the suite's Shape at each of Multiples of each target's
// capacity: the benchmark's main figure, goodput within the deadline
// against offered load.
type Sweep struct {
	// Multiples are the offered loads, in multiples of each target's
	// capacity; default DefaultSweepMultiples.
	Multiples []float64

	x string // -x
}

// Name is "sweep".
func (*Sweep) Name() string { return "sweep" }

// Tabled shows the sweep's samples in the table of rates by offered load.
func (*Sweep) Tabled() {}

// Flags registers -x, whose default is Multiples when set.
func (sw *Sweep) Flags(fs *flag.FlagSet) {
	fs.StringVar(&sw.x, "x", formatMultiples(orMultiples(sw.Multiples, DefaultSweepMultiples())),
		"offered loads of the sweep, in multiples of each target's capacity")
}

// Check reads -x and fills in the default multiples.
func (sw *Sweep) Check(s *bench.SuiteConfig) error {
	return readMultiples(&sw.Multiples, "-x", sw.x, DefaultSweepMultiples())
}

// Points are one per multiple and client mode.
func (sw *Sweep) Points(s *bench.SuiteConfig) []bench.Point {
	var ps []bench.Point
	for _, m := range sw.Multiples {
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
