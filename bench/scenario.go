package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-go/sluice/bench/load"
)

// A Scenario is one experiment of the suite: what it offers the targets,
// and how it measures one point. RunSuite asks each scenario for its points
// and runs every point on every target, each on a fresh child process;
// package bench/scenario holds the scenarios, one file each, and the list
// that the command's -scenarios reads.
//
// A scenario may also implement Calibrator (its own capacity measurement),
// TargetFilter (points that some targets cannot run) and TargetSupplier
// (targets its child hook serves).
type Scenario interface {
	// Name is the scenario's name, as -scenarios and Sample.Scenario
	// give it.
	Name() string
	// Check checks the scenario's own settings against the suite's and
	// fills in its defaults. RunSuite calls it once, after the suite's
	// own defaults are in, before anything runs.
	Check(s *SuiteConfig) error
	// Points lists the points of one repeat, in the order they run.
	Points(s *SuiteConfig) []Point
	// Run measures one point on one target, on a target process it
	// starts and stops itself (Trial.Start), and returns its sample. A
	// run cut short returns what it measured, if anything, with the
	// error.
	Run(ctx context.Context, t *Trial) (*Sample, error)
}

// A Calibrator is a Scenario that measures the capacity of its points'
// shape its own way (a cluster of targets, a tenant fleet) instead of one
// target serving the shape's handler closed loop.
type Calibrator interface {
	Calibrate(ctx context.Context, s *SuiteConfig, target string, sh Shape) (capacity, cpu float64, err error)
}

// A TargetFilter is a Scenario whose points some targets cannot run (a
// part that needs sluice's lanes); RunSuite skips those.
type TargetFilter interface {
	RunsOn(p Point, target string) bool
}

// A TargetSupplier is a Scenario whose child hook serves targets of its
// own (ChildPart.Targets) beside package bench's: a server that is not an
// http.Handler's, such as grpc-go's own. SuiteConfig.Targets may name
// them (an empty list takes them too); only the supplying scenario's
// points run on them.
type TargetSupplier interface {
	// SuppliedTargets names the targets the scenario's hook serves.
	SuppliedTargets() []string
}

// supplies reports whether sc serves target through its child hook.
func supplies(sc Scenario, target string) bool {
	ts, ok := sc.(TargetSupplier)
	return ok && slices.Contains(ts.SuppliedTargets(), target)
}

// Point is one measurement a scenario plans: what the target serves and
// what it is offered.
type Point struct {
	// Shape is the handler shape whose capacity Multiple counts in, and
	// under whose name the sample is filed.
	Shape Shape
	// Spec is what the target serves; usually Shape.Spec (the slowdown
	// scenario's is slower).
	Spec HandlerSpec
	// Multiple is the offered load in multiples of the target's capacity
	// for Shape, which RunSuite then measures first; 0 for a point that
	// needs no capacity.
	Multiple float64
	// Rate is a fixed offered rate, requests per second, for a point
	// offered the same load on every target.
	Rate float64
	// Conns is a closed loop's connections.
	Conns int
	// Part names a part of the scenario (its sample's Part); Client the
	// generator's client mode (Sample.Client).
	Part, Client string
	// Window is the point's sending window, for the progress and the
	// suite's planned time; zero means SuiteConfig.Duration.
	Window time.Duration
	// Quota, when set, is the CPU quota the point's target runs in, in
	// place of SuiteConfig.Quota. The points of one Shape share their
	// capacity, so they must share their quota too.
	Quota *Quota
}

// describe names a point in the suite's progress: "sweep 2x", "noisy
// 800/s", "stray cpu+stray 2x", "closed 64 conns".
func (p Point) describe(scenario string) string {
	var b strings.Builder
	b.WriteString(scenario)
	if p.Part != "" {
		b.WriteString(" " + p.Part)
	}
	if p.Rate > 0 {
		fmt.Fprintf(&b, " %.4g/s", p.Rate)
	}
	if p.Multiple > 0 {
		fmt.Fprintf(&b, " %.3gx", p.Multiple)
	}
	if p.Conns > 0 {
		fmt.Fprintf(&b, " %d conns", p.Conns)
	}
	if p.Client != "" {
		b.WriteString(" " + p.Client)
	}
	return b.String()
}

// Trial is one point's run on one target: what Scenario.Run is given, and
// the kit it runs with.
type Trial struct {
	// Suite is the suite's configuration, its defaults filled in.
	Suite *SuiteConfig
	// Scenario is the scenario the point belongs to, Point the point.
	Scenario Scenario
	Point    Point
	// Target names the target.
	Target string
	// Capacity is the target's capacity for Point.Shape measured in this
	// repeat, requests per second; 0 for a point with no Multiple.
	Capacity float64
	// Repeat is the repeat's index; Index the run's in the whole suite,
	// which seeds its arrivals.
	Repeat, Index int
}

// Sample returns the trial's sample with what identifies it filled in:
// scenario, shape, handler, target, repeat, capacity and the point's
// offered load.
func (t *Trial) Sample() *Sample {
	p := t.Point
	return &Sample{
		Scenario: t.Scenario.Name(), Shape: p.Shape.Name, Handler: p.Spec, Target: t.Target,
		Repeat: t.Repeat, Capacity: t.Capacity, Multiple: p.Multiple, Client: p.Client,
		Clients: p.Conns, Quota: t.Child().Quota,
	}
}

// Child returns the child process that serves the point's handler on the
// trial's target, over TLS when the suite says so, in the point's CPU
// quota or else the suite's.
func (t *Trial) Child() ChildSpec {
	return t.Suite.child(t.Target, t.Point.Spec, t.Point.Quota)
}

// Start starts the child cs describes on the suite's target CPUs and
// returns once it listens; stop it with Process.Stop.
func (t *Trial) Start(ctx context.Context, cs ChildSpec) (*Process, error) {
	return t.Suite.startChild(ctx, cs, t.Suite.TargetCPUs)
}

// StartOn is Start with the child on cpus instead of the suite's target
// CPUs.
func (t *Trial) StartOn(ctx context.Context, cs ChildSpec, cpus []int) (*Process, error) {
	return t.Suite.startChild(ctx, cs, cpus)
}

// Calibrate measures the capacity of target serving spec as the suite
// measures a point's (closed loops of SuiteConfig.CalibrateConns on a fresh
// child process), and the CPU time the target used per second meanwhile:
// for a scenario whose loads are multiples of another target's capacity,
// measured within its run.
func (t *Trial) Calibrate(ctx context.Context, target string, spec HandlerSpec) (capacity, cpu float64, err error) {
	return t.Suite.calibrate(ctx, target, spec)
}

// AllCPUs returns every CPU of the suite, in order: both sets of a split
// (SuiteConfig.TargetCPUs and GeneratorCPUs), or without one the CPUs this
// process may run on.
func (t *Trial) AllCPUs() []int { return slices.Clone(t.Suite.allCPUs) }

// Generator returns the open-loop generator's configuration for the weather
// request on proc, as the suite's settings shape it (deadline, seed,
// connection pool, Poisson or constant arrivals, new connections, clients,
// the point's client mode). The caller sets what it offers: Rate and
// Duration, or Phases.
func (t *Trial) Generator(proc *Process) (load.Config, error) {
	cfg := t.Suite
	rc := load.Config{
		URL:      proc.URL + WeatherPath,
		Deadline: cfg.Deadline,
		Seed:     cfg.Seed + uint64(t.Index),
		Conns:    cfg.Conns,
		Clients:  cfg.Clients,
	}
	if cfg.NewConns {
		rc.NewConn = func(int) bool { return true }
	}
	if !cfg.Constant {
		rc.Arrival = load.Poisson
	}
	if t.Point.Client != "" {
		m, err := load.ParseClientMode(t.Point.Client)
		if err != nil {
			return rc, err
		}
		rc.ClientMode = m
	}
	return rc, nil
}

// Measure runs the generator with rc against proc, stops proc, and fills s
// with the outcome: rates, latencies and series (Fill), the target's own
// counters and placement, and both processes' CPU time. It returns s, or
// nil when the run measured nothing, with any error of the run or of the
// stop.
func (t *Trial) Measure(ctx context.Context, proc *Process, rc load.Config, s *Sample) (*Sample, error) {
	m := MeterCPU(proc)
	res, err := load.Run(ctx, rc)
	m.Stop(s)
	err = errors.Join(err, proc.Stop())
	if res == nil {
		return nil, err
	}
	Fill(s, res)
	s.Server = proc.Stats
	s.Placement = proc.Placement
	s.Throttled = proc.Throttled
	return s, err
}

// A CPUMeter brackets a run: the CPU time this process (the load
// generator) and the target processes use during it. It is the one
// bracket of the suite: around every scenario's run (Trial.Measure,
// MeterCPU, Backends.MeterCPU) and every capacity measurement.
type CPUMeter struct {
	targetCPU     func() time.Duration // the targets' CPU time so far
	self0, target time.Duration
	start         time.Time
}

// MeterCPU starts metering now, the targets being procs.
func MeterCPU(procs ...*Process) *CPUMeter {
	return meterCPU(func() time.Duration {
		var d time.Duration
		for _, p := range procs {
			d += p.cpu()
		}
		return d
	})
}

// MeterCPU starts metering now, the targets being the running backends
// (Backends.CPU).
func (b *Backends) MeterCPU() *CPUMeter { return meterCPU(b.CPU) }

// meterCPU starts metering now, targetCPU reading the targets' CPU time.
func meterCPU(targetCPU func() time.Duration) *CPUMeter {
	m := &CPUMeter{targetCPU: targetCPU, self0: selfCPU(), start: time.Now()}
	m.target = m.targetCPU()
	return m
}

// Read returns the CPU time the targets and this process have used since
// the bracket began, in CPU-seconds per second of it (0 before any time
// has passed), and how long it has lasted.
func (m *CPUMeter) Read() (target, generator float64, elapsed time.Duration) {
	gen, tcpu, elapsed := selfCPU()-m.self0, m.targetCPU()-m.target, time.Since(m.start)
	if sec := elapsed.Seconds(); sec > 0 {
		target, generator = tcpu.Seconds()/sec, gen.Seconds()/sec
	}
	return target, generator, elapsed
}

// Stop ends the bracket and sets s.TargetCPU and s.GeneratorCPU from Read,
// over the bracket (the sending window and the wait for the last
// answers). It returns how long the bracket lasted.
func (m *CPUMeter) Stop(s *Sample) time.Duration {
	var elapsed time.Duration
	s.TargetCPU, s.GeneratorCPU, elapsed = m.Read()
	return elapsed
}
