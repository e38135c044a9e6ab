package scenario

import (
	"context"
	"math"
	"net/http"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
)

// Mix offers requests on kept-alive connections and on new connections
// together (NewFraction of them new, spread evenly), at each of the
// ShapeMultiples, counted as two classes, "kept" and "new".
type Mix struct{}

// Name is "mix".
func (*Mix) Name() string { return "mix" }

// Tabled shows the mix's samples in the table of rates by offered load.
func (*Mix) Tabled() {}

// Check refuses NewConns and Clients: the mix chooses each request's
// connection itself.
func (*Mix) Check(s *bench.SuiteConfig) error { return checkWeather(s, "mix") }

// Points are one per multiple.
func (*Mix) Points(s *bench.SuiteConfig) []bench.Point {
	var ps []bench.Point
	for _, m := range s.ShapeMultiples {
		ps = append(ps, bench.Point{Shape: s.Shape, Spec: s.Shape.Spec, Multiple: m})
	}
	return ps
}

// Run offers the point's multiple for the suite's Duration, each request
// on a new connection or a kept one as spread says.
func (*Mix) Run(ctx context.Context, t *bench.Trial) (*bench.Sample, error) {
	isNew := spread(t.Suite.NewFraction)
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
