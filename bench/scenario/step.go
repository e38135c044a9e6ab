package scenario

import (
	"context"
	"flag"
	"time"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
	"github.com/sluice-go/sluice/bench/report"
)

// DefaultStep returns the step scenario's load, whose values Step takes
// for its zero fields: 0.5x for 2 s, 3x for 3 s, 0.5x for 3 s, counted in
// buckets of 100 ms.
func DefaultStep() Step {
	return Step{Low: 0.5, High: 3, Before: 2 * time.Second, During: 3 * time.Second, After: 3 * time.Second, Bucket: 100 * time.Millisecond}
}

// Step offers a low load, then a high one, then the low one again (Low×C
// for Before, High×C for During, Low×C for After), and counts the outcome
// in buckets of Bucket: how fast a target sheds when overload begins and
// recovers when it ends. Each zero field takes DefaultStep's.
type Step struct {
	// Low and High are the two loads, in multiples of each target's
	// capacity.
	Low, High float64
	// Before, During and After are how long the low load, the high one
	// and the low one again last.
	Before, During, After time.Duration
	// Bucket is the width of the series' buckets.
	Bucket time.Duration
}

// Name is "step".
func (*Step) Name() string { return "step" }

// Tabled shows the step's samples in the table of rates by offered load,
// with their step response.
func (*Step) Tabled() {}

// Flags registers -step-low, -step-high, -step-before, -step-during and
// -step-after.
func (st *Step) Flags(fs *flag.FlagSet) {
	st.defaults()
	fs.Float64Var(&st.Low, "step-low", st.Low, "the step scenario's low load, before and after the step, in multiples of capacity")
	fs.Float64Var(&st.High, "step-high", st.High, "the step scenario's high load, in multiples of capacity")
	fs.DurationVar(&st.Before, "step-before", st.Before, "how long the step scenario's low load lasts before the step")
	fs.DurationVar(&st.During, "step-during", st.During, "how long the step scenario's high load lasts")
	fs.DurationVar(&st.After, "step-after", st.After, "how long the step scenario's low load lasts after the step")
}

// defaults fills in DefaultStep's values for the zero fields.
func (st *Step) defaults() {
	d := DefaultStep()
	st.Low, st.High = orFloat(st.Low, d.Low), orFloat(st.High, d.High)
	if st.Before == 0 {
		st.Before = d.Before
	}
	if st.During == 0 {
		st.During = d.During
	}
	if st.After == 0 {
		st.After = d.After
	}
	if st.Bucket == 0 {
		st.Bucket = d.Bucket
	}
}

// Check fills in the defaults and checks that every setting is positive.
func (st *Step) Check(s *bench.SuiteConfig) error {
	st.defaults()
	return positiveFinite(st.Name(), setting{"low load (-step-low)", st.Low}, setting{"high load (-step-high)", st.High},
		setting{"time before (-step-before)", st.Before.Seconds()}, setting{"time during (-step-during)", st.During.Seconds()},
		setting{"time after (-step-after)", st.After.Seconds()}, setting{"bucket (Step.Bucket)", st.Bucket.Seconds()})
}

// Points are one, offered in multiples of the capacity up to High.
func (st *Step) Points(s *bench.SuiteConfig) []bench.Point {
	return []bench.Point{{Shape: s.Shape, Spec: s.Shape.Spec, Multiple: st.High, Window: st.Before + st.During + st.After}}
}

// Plots draws each target's goodput, offered and rejected rates in time
// (report.StepPlots).
func (st *Step) Plots(dir string, rep *bench.Report) ([]string, error) {
	return report.StepPlots(dir, rep, st.Name(), "Step response", nil)
}

// Run offers the three phases and records the step's profile
// (Sample.Step) with the series.
func (st *Step) Run(ctx context.Context, t *bench.Trial) (*bench.Sample, error) {
	c := t.Capacity
	return offer(ctx, t, func(rc *load.Config, s *bench.Sample) {
		rc.Rate, rc.Duration = 0, 0
		rc.Phases = []load.Phase{
			{Rate: st.Low * c, Duration: st.Before},
			{Rate: st.High * c, Duration: st.During},
			{Rate: st.Low * c, Duration: st.After},
		}
		rc.Bucket = st.Bucket
		s.Step = &bench.StepInfo{Low: st.Low, High: st.High, Up: st.Before, Down: st.Before + st.During, End: st.Before + st.During + st.After}
	})
}
