package scenario

import (
	"context"
	"errors"
	"flag"
	"math"
	"net/http"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
)

// DefaultMixMultiples returns the mix's offered loads when Mix names none.
func DefaultMixMultiples() []float64 { return []float64{2, 5} }

// DefaultMixNewFraction is the share of the mix's requests sent on new
// connections when Mix gives none.
const DefaultMixNewFraction = 0.5

// Mix offers requests on kept-alive connections and on new connections
// together (NewFraction of them new, spread evenly), at each of Multiples,
// counted as two classes, "kept" and "new".
type Mix struct {
	// Multiples are the offered loads, in multiples of each target's
	// capacity; default DefaultMixMultiples.
	Multiples []float64
	// NewFraction is the share of requests sent each on a new
	// connection, in (0, 1]; default DefaultMixNewFraction.
	NewFraction float64

	x string // -mix-x
}

// Name is "mix".
func (*Mix) Name() string { return "mix" }

// Tabled shows the mix's samples, and those of its classes, in the table
// of rates by offered load.
func (*Mix) Tabled() {}

// Flags registers -mix-x and -mix-new.
func (mx *Mix) Flags(fs *flag.FlagSet) {
	fs.StringVar(&mx.x, "mix-x", formatMultiples(orMultiples(mx.Multiples, DefaultMixMultiples())),
		"offered loads of the mix scenario, in multiples of capacity")
	fs.Float64Var(&mx.NewFraction, "mix-new", orFloat(mx.NewFraction, DefaultMixNewFraction),
		"the share of the mix scenario's requests sent each on a new connection, in (0, 1]")
}

// Check refuses NewConns and Clients (the mix chooses each request's
// connection itself), reads -mix-x and fills in the defaults.
func (mx *Mix) Check(s *bench.SuiteConfig) error {
	if s.NewConns {
		return errors.New("bench: NewConns does not apply to the mix scenario, which mixes new and kept connections itself")
	}
	if s.Clients != 0 {
		return errors.New("bench: Clients applies to the sweep, shapes, slowdown and step scenarios, not mix")
	}
	mx.NewFraction = orFloat(mx.NewFraction, DefaultMixNewFraction)
	if !(mx.NewFraction > 0 && mx.NewFraction <= 1) {
		return errors.New("bench: the mix scenario's share of new connections (-mix-new, Mix.NewFraction) must be in (0, 1]")
	}
	return readMultiples(&mx.Multiples, "-mix-x", mx.x, DefaultMixMultiples())
}

// Points are one per multiple.
func (mx *Mix) Points(s *bench.SuiteConfig) []bench.Point {
	var ps []bench.Point
	for _, m := range mx.Multiples {
		ps = append(ps, bench.Point{Shape: s.Shape, Spec: s.Shape.Spec, Multiple: m})
	}
	return ps
}

// Run offers the point's multiple for the suite's Duration, each request
// on a new connection or a kept one as spread says.
func (mx *Mix) Run(ctx context.Context, t *bench.Trial) (*bench.Sample, error) {
	isNew := spread(mx.NewFraction)
	return offer(ctx, t, func(rc *load.Config, _ *bench.Sample) {
		rc.NewConn = isNew
		rc.Classify = func(i int) (string, http.Header) {
			if isNew(i) {
				return "new", nil
			}
			return "kept", nil
		}
	})
}

// spread returns whether request i goes on a new connection, spreading a
// fraction f of the requests evenly.
func spread(f float64) func(i int) bool {
	return func(i int) bool {
		return math.Floor(float64(i+1)*f) > math.Floor(float64(i)*f)
	}
}
