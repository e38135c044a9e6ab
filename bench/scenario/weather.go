package scenario

import (
	"context"
	"errors"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
)

// The weather scenarios (sweep, shapes, slowdown, mix, step) offer the
// weather handler open loop, in multiples of each target's capacity, and
// share the table of rates by offered load (they are Tabled). Each keeps
// its own settings; the handler's shape is the suite's (Shape), but for
// the shapes scenario, which compares several.

// clientPoints returns p once per client mode of the suite (once,
// unchanged, for none).
func clientPoints(p bench.Point, s *bench.SuiteConfig) []bench.Point {
	if len(s.ClientModes) == 0 {
		return []bench.Point{p}
	}
	ps := make([]bench.Point, 0, len(s.ClientModes))
	for _, m := range s.ClientModes {
		q := p
		q.Client = m.String()
		ps = append(ps, q)
	}
	return ps
}

// offer runs the trial's point on a fresh target: rate requests a second
// for the suite's Duration, shaped by shape (nil for none).
func offer(ctx context.Context, t *bench.Trial, shape func(*load.Config, *bench.Sample)) (*bench.Sample, error) {
	proc, err := t.Start(ctx, t.Child())
	if err != nil {
		return nil, err
	}
	rc, err := t.Generator(proc)
	if err != nil {
		return nil, errors.Join(err, proc.Stop())
	}
	rc.Rate = t.Point.Multiple * t.Capacity
	rc.Duration = t.Suite.Duration
	s := t.Sample()
	if shape != nil {
		shape(&rc, s)
	}
	return t.Measure(ctx, proc, rc, s)
}
