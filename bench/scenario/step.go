package scenario

import (
	"context"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
	"github.com/sluice-go/sluice/bench/report"
)

// Step offers a low load, then a high one, then the low one again (the
// suite's Step: 0.5x for 2 s, 3x for 3 s, 0.5x for 3 s by default), and
// counts the outcome in buckets of 100 ms: how fast a target sheds when
// overload begins and recovers when it ends.
type Step struct{}

// Name is "step".
func (*Step) Name() string { return "step" }

// Tabled shows the step's samples in the table of rates by offered load.
func (*Step) Tabled() {}

// Check refuses nothing the suite allows.
func (*Step) Check(s *bench.SuiteConfig) error { return checkWeather(s, "step") }

// Points are one, offered in multiples of the capacity up to Step.High.
func (*Step) Points(s *bench.SuiteConfig) []bench.Point {
	st := s.Step
	return []bench.Point{{Shape: s.Shape, Spec: s.Shape.Spec, Multiple: st.High, Window: st.Before + st.During + st.After}}
}

// Plots draws each target's goodput, offered and rejected rates in time
// (report.StepPlots).
func (st *Step) Plots(dir string, rep *bench.Report) ([]string, error) {
	return report.StepPlots(dir, rep, st.Name(), "Step response", nil)
}

// Run offers the three phases and records the step's profile
// (Sample.Step) with the series.
func (*Step) Run(ctx context.Context, t *bench.Trial) (*bench.Sample, error) {
	st, c := t.Suite.Step, t.Capacity
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
