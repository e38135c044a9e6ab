package scenario

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-go/sluice/bench"
)

// DefaultShapes returns the handler shapes the shapes scenario compares when
// Shapes names none: CPU-bound, I/O-bound and blocking.
func DefaultShapes() []bench.Shape {
	return []bench.Shape{bench.ShapeCPU, bench.ShapeIO, bench.ShapeBlocking}
}

// DefaultShapeMultiples returns the shapes scenario's offered loads when it
// names none.
func DefaultShapeMultiples() []float64 { return []float64{2, 5} }

// Shapes compares CPU-bound, I/O-bound and blocking handlers at the same
// multiples of their own capacity.
type Shapes struct {
	// Shapes are the handler shapes compared; default DefaultShapes.
	Shapes []bench.Shape
	// Multiples are the offered loads, in multiples of each target's
	// capacity for each shape; default DefaultShapeMultiples.
	Multiples []float64

	shapes, x string // -shapes, -shape-x
}

// Name is "shapes".
func (*Shapes) Name() string { return "shapes" }

// Tabled shows the shapes' samples in the table of rates by offered load.
func (*Shapes) Tabled() {}

// Flags registers -shapes and -shape-x.
func (sh *Shapes) Flags(fs *flag.FlagSet) {
	fs.StringVar(&sh.shapes, "shapes", "", "the shapes scenario's handler shapes, comma-separated: cpu, io, blocking (empty: all three)")
	fs.StringVar(&sh.x, "shape-x", formatMultiples(orMultiples(sh.Multiples, DefaultShapeMultiples())),
		"offered loads of the shapes scenario, in multiples of capacity")
}

// Check reads -shapes and -shape-x and fills in the defaults.
func (sh *Shapes) Check(s *bench.SuiteConfig) error {
	if sh.shapes != "" {
		shapes, err := parseShapes(sh.shapes)
		if err != nil {
			return err
		}
		sh.Shapes = shapes
	}
	if len(sh.Shapes) == 0 {
		sh.Shapes = DefaultShapes()
	}
	return readMultiples(&sh.Multiples, "-shape-x", sh.x, DefaultShapeMultiples())
}

// parseShapes reads -shapes: shapes of DefaultShapes by name, each once.
func parseShapes(list string) ([]bench.Shape, error) {
	var shapes []bench.Shape
	for name := range strings.SplitSeq(list, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		i := slices.IndexFunc(DefaultShapes(), func(s bench.Shape) bool { return s.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("-shapes: %q is not a shape: cpu, io or blocking", name)
		}
		if slices.ContainsFunc(shapes, func(s bench.Shape) bool { return s.Name == name }) {
			return nil, fmt.Errorf("-shapes: %s named twice", name)
		}
		shapes = append(shapes, DefaultShapes()[i])
	}
	return shapes, nil
}

// Points are one per shape, multiple and client mode.
func (sh *Shapes) Points(s *bench.SuiteConfig) []bench.Point {
	var ps []bench.Point
	for _, shape := range sh.Shapes {
		for _, m := range sh.Multiples {
			ps = append(ps, clientPoints(bench.Point{Shape: shape, Spec: shape.Spec, Multiple: m}, s)...)
		}
	}
	return ps
}

// Run offers the point's multiple for the suite's Duration.
func (*Shapes) Run(ctx context.Context, t *bench.Trial) (*bench.Sample, error) {
	return offer(ctx, t, nil)
}
