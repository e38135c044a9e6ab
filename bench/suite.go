package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sluice-go/sluice/bench/load"
	"github.com/sluice-go/sluice/examples/weather"
	srt "github.com/sluice-go/sluice/runtime"
)

// Shape is a named shape of the weather handler.
type Shape struct {
	Name string
	Spec HandlerSpec
}

// The handler shapes of the suite.
var (
	// ShapeIO waits 10 ms on its database through await.Sleep after 1 ms
	// of CPU: I/O-bound ("io_isolated" in docs/background.md).
	ShapeIO = Shape{"io", HandlerSpec{CPU: time.Millisecond, DB: 10 * time.Millisecond}}
	// ShapeCPU computes for 1 ms and waits for nothing.
	ShapeCPU = Shape{"cpu", HandlerSpec{CPU: time.Millisecond}}
	// ShapeBlocking is ShapeIO with a database call that blocks the
	// worker (time.Sleep): the isolated model.
	ShapeBlocking = Shape{"blocking", HandlerSpec{CPU: time.Millisecond, DB: 10 * time.Millisecond, Blocking: true}}
)

// SuiteConfig configures RunSuite. Zero fields take the defaults given.
type SuiteConfig struct {
	// Targets names the targets (see Targets, and TargetSupplier for a
	// scenario's own); default all of them.
	Targets []string
	// Scenarios are the scenarios to run, in order (package
	// bench/scenario lists them); at least one.
	Scenarios []Scenario
	// Shape is the weather handler's shape, which the scenarios serve
	// unless they have shapes of their own; default ShapeIO.
	Shape Shape
	// Duration is the sending window of each point; default 3 s.
	Duration time.Duration
	// Repeats is the number of repeats; targets alternate within each,
	// in a rotated order; default 3.
	Repeats int
	// Deadline is the client deadline; default DefaultDeadline (1 s).
	Deadline time.Duration
	// ClientModes are the generator's client modes (load.Config.ClientMode)
	// the sweep and shapes scenarios run each point under, one after the
	// other, so that the modes alternate; empty means ClientReconnect
	// alone, the generator's behaviour of the recorded runs. Samples
	// name their mode when this is set.
	ClientModes []load.ClientMode
	// Conns is the generator's connection pool in the sweep, shapes,
	// slowdown, mix and step scenarios (load.Config.Conns); zero derives it
	// from Little's law, capped at MaxConns. A larger pool lets more
	// requests reach the target at once instead of waiting in the client
	// for a connection, as a client without a per-host limit does.
	Conns int
	// TLS serves every target over HTTPS (a throwaway certificate the
	// generator does not check) and sends over TLS.
	TLS bool
	// Quota, when set, runs every target process in this CPU quota (a
	// container's CPU limit), the calibration's included, unless a point
	// names a quota of its own (Point.Quota). It needs Linux and a
	// cgroup this process may make (root).
	Quota *Quota
	// NewConns sends every request of the calibration and of the sweep
	// and shapes scenarios on a connection of its own (with TLS, a full
	// handshake each), as clients that do not keep connections do.
	NewConns bool
	// Clients, when positive, makes the generator's load that of Clients
	// clients with a kept-alive connection each (load.Config.Clients) in the
	// sweep, shapes, slowdown and step scenarios, and the samples report
	// how alike the clients were served (Sample.Jain, Sample.Starved).
	Clients int
	// Constant sends at constant gaps instead of Poisson arrivals.
	Constant bool
	// Seed seeds the Poisson arrivals (each run adds its index).
	Seed uint64
	// Calibrate configures the capacity measurement of each target, once
	// per repeat and shape (its URL and Conns are ignored): a closed loop
	// at each of CalibrateConns connections in turn, C being the best
	// goodput of them.
	Calibrate load.CalibrateConfig
	// CalibrateConns are the closed-loop concurrencies the capacity is
	// measured at; default 16, 32, 64 and 128. One level would favour one
	// kind of target: a server with a timed queue and an age limit
	// rejects what waits too long in a closed loop much deeper than it
	// needs to saturate, where net/http only grows its latency, and
	// net/http needs more requests in flight than sluice to fill the CPU.
	CalibrateConns []int
	// TargetCPUs and GeneratorCPUs, when set (both or neither), split
	// the CPUs: every target's child process runs on TargetCPUs only (its
	// GOMAXPROCS and sluice's worker count follow from that mask) and
	// this process, the load generator, on GeneratorCPUs only, for the
	// whole suite. Without them both share every CPU, and the generator's
	// CPU time, which grows with the offered load, is taken from the
	// target's.
	TargetCPUs, GeneratorCPUs []int
	// Launch starts the targets' child processes; nil runs this
	// executable (which must call ServeChild first).
	Launch Launcher
	// SpinRate is the rate of the Spinner that every child's handler
	// computes with (ChildSpec.SpinRate, weather.SpinnerAt), so that the
	// targets compared do the same work per request, where each child's
	// own short measure of the loop would differ from the next one's
	// (docs/benchmarks.md, "The same work on every target"). Zero
	// measures it once, when the suite starts (the best of spinMeasures:
	// what interrupts a measure only slows the loop); negative lets each
	// child measure its own.
	SpinRate float64
	// Progress, if set, is called as the suite goes, with the planned
	// time done and in all, and what runs now.
	Progress func(done, total time.Duration, now string)
	// Command is recorded in the Report as the command that reproduces
	// the run.
	Command string

	// allCPUs are every CPU of the suite (both sets of a split, or this
	// process's mask), as Trial.AllCPUs gives them; set by RunSuite.
	allCPUs []int
}

func (c *SuiteConfig) defaults() error {
	switch {
	case c.Clients < 0:
		return fmt.Errorf("bench: Clients %d must not be negative", c.Clients)
	case c.Clients > 0 && c.NewConns:
		return errors.New("bench: Clients keep a connection each: they cannot be combined with NewConns")
	}
	if len(c.Targets) == 0 {
		for _, t := range Targets() {
			c.Targets = append(c.Targets, t.Name)
		}
		for _, sc := range c.Scenarios {
			ts, ok := sc.(TargetSupplier)
			if !ok {
				continue
			}
			for _, n := range ts.SuppliedTargets() {
				if !slices.Contains(c.Targets, n) {
					c.Targets = append(c.Targets, n)
				}
			}
		}
	}
	for _, n := range c.Targets {
		if _, ok := TargetByName(n); !ok && !slices.ContainsFunc(c.Scenarios, func(sc Scenario) bool { return supplies(sc, n) }) {
			return fmt.Errorf("bench: unknown target %q", n)
		}
	}
	if c.Shape.Name == "" {
		c.Shape = ShapeIO
	}
	if c.Duration <= 0 {
		c.Duration = 3 * time.Second
	}
	if c.Repeats <= 0 {
		c.Repeats = 3
	}
	if c.Deadline <= 0 {
		c.Deadline = load.DefaultDeadline
	}
	if c.Calibrate.Warmup <= 0 {
		c.Calibrate.Warmup = 300 * time.Millisecond
	}
	if c.Calibrate.Duration <= 0 {
		c.Calibrate.Duration = time.Second
	}
	if len(c.CalibrateConns) == 0 {
		c.CalibrateConns = []int{16, 32, 64, 128}
	}
	for _, n := range c.CalibrateConns {
		if n <= 0 {
			return fmt.Errorf("bench: calibration concurrency %d must be positive", n)
		}
	}
	c.Calibrate.Deadline = c.Deadline
	c.TargetCPUs = slices.Compact(slices.Sorted(slices.Values(c.TargetCPUs)))
	c.GeneratorCPUs = slices.Compact(slices.Sorted(slices.Values(c.GeneratorCPUs)))
	if err := checkSplit(c.TargetCPUs, c.GeneratorCPUs); err != nil {
		return err
	}
	if len(c.Scenarios) == 0 {
		return errors.New("bench: no scenario to run: name at least one (package bench/scenario lists them)")
	}
	seen := make(map[string]bool)
	for _, sc := range c.Scenarios {
		if sc == nil {
			return errors.New("bench: a nil Scenario")
		}
		if seen[sc.Name()] {
			return fmt.Errorf("bench: scenario %s named twice", sc.Name())
		}
		seen[sc.Name()] = true
		if err := sc.Check(c); err != nil {
			return err
		}
	}
	// Measured last: a configuration refused costs no time.
	if c.SpinRate == 0 {
		c.SpinRate = measureSpinRate()
	}
	return nil
}

// planned is a point of the suite's plan, with its scenario.
type planned struct {
	sc Scenario
	Point
}

// window is the point's sending window.
func (p planned) window(c *SuiteConfig) time.Duration {
	if p.Window > 0 {
		return p.Window
	}
	return c.Duration
}

// runsOn reports whether the point is measured on the target: not on a
// target that another scenario's hook supplies.
func (p planned) runsOn(target string) bool {
	if _, ok := TargetByName(target); !ok && !supplies(p.sc, target) {
		return false
	}
	f, ok := p.sc.(TargetFilter)
	return !ok || f.RunsOn(p.Point, target)
}

// needsCapacity reports whether any of points is offered in multiples of
// the capacity, which must then be measured first.
func needsCapacity(points []planned) bool {
	return slices.ContainsFunc(points, func(p planned) bool { return p.Multiple > 0 })
}

// plan lists the points of one repeat, grouped by the shape whose capacity
// they are offered in multiples of, shapes in the order they first appear.
func (c *SuiteConfig) plan() (shapes []Shape, points map[string][]planned) {
	points = make(map[string][]planned)
	for _, sc := range c.Scenarios {
		for _, p := range sc.Points(c) {
			if _, ok := points[p.Shape.Name]; !ok {
				shapes = append(shapes, p.Shape)
			}
			points[p.Shape.Name] = append(points[p.Shape.Name], planned{sc, p})
		}
	}
	return shapes, points
}

// capacityOf measures target's capacity for the shape of points: the
// way the first of them that calibrates its own way says, or closed loop
// on one target serving the shape (calibrate).
func (c *SuiteConfig) capacityOf(ctx context.Context, target string, sh Shape, points []planned) (capacity, cpu float64, err error) {
	for _, p := range points {
		if cal, ok := p.sc.(Calibrator); ok {
			return cal.Calibrate(ctx, c, target, sh)
		}
	}
	var q *Quota
	if len(points) > 0 {
		q = points[0].Quota
	}
	return c.calibrateChild(ctx, c.child(target, sh.Spec, q))
}

// spinMeasures is how many measures of the Spinner's loop measureSpinRate
// takes the best of.
const spinMeasures = 5

// measureSpinRate measures the rate of the Spinner's loop on this machine:
// the best of spinMeasures measures.
func measureSpinRate() float64 {
	var best float64
	for range spinMeasures {
		best = max(best, weather.NewSpinner().Rate())
	}
	return best
}

// spun returns cs with the suite's spin rate, unless it has its own.
func (c *SuiteConfig) spun(cs ChildSpec) ChildSpec {
	if cs.SpinRate == 0 && c.SpinRate > 0 {
		cs.SpinRate = c.SpinRate
	}
	return cs
}

// startChild starts the child cs describes on cpus with the suite's
// launcher and spin rate (spun), and returns once it listens.
func (c *SuiteConfig) startChild(ctx context.Context, cs ChildSpec, cpus []int) (*Process, error) {
	return startChild(ctx, c.Launch, c.spun(cs), cpus)
}

// child is the child process that serves spec on target, over TLS when
// the suite says so, in quota q or else the suite's Quota.
func (c *SuiteConfig) child(target string, spec HandlerSpec, q *Quota) ChildSpec {
	if q == nil {
		q = c.Quota
	}
	return ChildSpec{Target: target, Handler: spec, Nice: TargetNice, TLS: c.TLS, Quota: q}
}

// RunSuite runs the overload benchmark: for each repeat, each handler
// shape and each target (in an order rotated every repeat, so that targets
// alternate), it starts the target in a child process, measures its
// capacity C, then offers the planned multiples of C, each point on a
// fresh child process, and records one Sample per point. Runs whose
// generator fell behind are kept and marked. RunSuite stops early, with
// the samples so far and ctx's error, when ctx ends.
func RunSuite(ctx context.Context, cfg SuiteConfig) (rep *Report, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	rep = &Report{
		Command:       cfg.Command,
		Started:       time.Now().UTC(),
		Machine:       machine(),
		Deadline:      cfg.Deadline,
		Repeats:       cfg.Repeats,
		SpinRate:      max(cfg.SpinRate, 0),
		TargetCPUs:    cfg.TargetCPUs,
		GeneratorCPUs: cfg.GeneratorCPUs,
	}
	if len(cfg.TargetCPUs) > 0 {
		cfg.allCPUs = slices.Sorted(slices.Values(slices.Concat(cfg.TargetCPUs, cfg.GeneratorCPUs)))
	} else if cfg.allCPUs, err = srt.AffinityCPUs(); err != nil {
		return nil, err
	}
	if len(cfg.GeneratorCPUs) > 0 {
		unpin, err := pinSelf(cfg.GeneratorCPUs)
		if err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, unpin()) }()
	}
	shapes, points := cfg.plan()
	var total, done time.Duration
	calibration := time.Duration(len(cfg.CalibrateConns)) * (cfg.Calibrate.Warmup + cfg.Calibrate.Duration)
	for _, tgt := range cfg.Targets {
		for _, sh := range shapes {
			if needsCapacity(points[sh.Name]) {
				total += calibration
			}
			for _, p := range points[sh.Name] {
				if p.runsOn(tgt) {
					total += p.window(&cfg) + cfg.Deadline/2
				}
			}
		}
	}
	total *= time.Duration(cfg.Repeats)
	progress := func(d time.Duration, now string) {
		done += d
		if cfg.Progress != nil {
			cfg.Progress(min(done, total), total, now)
		}
	}
	run := 0
	for r := range cfg.Repeats {
		order := slices.Clone(cfg.Targets)
		rot := r % len(order)
		order = append(order[rot:], order[:rot]...)
		for _, sh := range shapes {
			for _, tgt := range order {
				var capacity, capCPU float64
				if needsCapacity(points[sh.Name]) {
					what := fmt.Sprintf("repeat %d/%d, %s, %s: calibrating", r+1, cfg.Repeats, sh.Name, tgt)
					progress(0, what)
					var err error
					capacity, capCPU, err = cfg.capacityOf(ctx, tgt, sh, points[sh.Name])
					progress(calibration, what)
					if err != nil {
						return rep, err
					}
				}
				for _, p := range points[sh.Name] {
					if !p.runsOn(tgt) {
						continue
					}
					what := fmt.Sprintf("repeat %d/%d, %s, %s: %s", r+1, cfg.Repeats, sh.Name, tgt, p.describe(p.sc.Name()))
					progress(0, what)
					t := &Trial{Suite: &cfg, Scenario: p.sc, Point: p.Point, Target: tgt, Repeat: r, Index: run}
					if p.Multiple > 0 {
						t.Capacity = capacity
					}
					s, err := p.sc.Run(ctx, t)
					if s != nil && s.Capacity > 0 {
						s.CapacityCPU = capCPU
					}
					run++
					progress(p.window(&cfg)+cfg.Deadline/2, what)
					if s != nil {
						rep.Samples = append(rep.Samples, *s)
					}
					if err != nil {
						return rep, err
					}
				}
			}
		}
	}
	return rep, nil
}

// calibrate measures a target's capacity on a fresh child process, and the
// CPU time the target used per second meanwhile.
func (cfg *SuiteConfig) calibrate(ctx context.Context, target string, spec HandlerSpec) (capacity, cpu float64, err error) {
	return cfg.calibrateChild(ctx, cfg.child(target, spec, nil))
}

// calibrateChild is calibrate on the child cs describes.
func (cfg *SuiteConfig) calibrateChild(ctx context.Context, cs ChildSpec) (capacity, cpu float64, err error) {
	target := cs.Target
	p, err := cfg.startChild(ctx, cs, cfg.TargetCPUs)
	if err != nil {
		return 0, 0, err
	}
	cc := cfg.Calibrate
	cc.URL = p.URL + WeatherPath
	cc.NewConns = cfg.NewConns
	var best load.Calibration
	for _, n := range cfg.CalibrateConns {
		cc.Conns = n
		m := MeterCPU(p)
		cal, cerr := load.Calibrate(ctx, cc)
		tcpu, _, _ := m.Read()
		if cerr != nil {
			err = cerr
			break
		}
		if cal.Goodput > best.Goodput {
			best, cpu = cal, tcpu
		}
	}
	err = errors.Join(err, p.Stop())
	if err != nil {
		return 0, 0, fmt.Errorf("bench: calibrate %s: %w", target, err)
	}
	if best.Goodput <= 0 {
		return 0, 0, fmt.Errorf("bench: calibrate %s: no request succeeded", target)
	}
	return best.Goodput, cpu, nil
}

// WeatherPath is the request the weather scenarios send.
const WeatherPath = "/forecast?city=Lisbon"

// Fill copies what a run of the generator measured into s: rates, the
// requests scheduled, whether it fell behind, the series, connections
// opened, the clients' fairness, latencies of all classes and of each.
func Fill(s *Sample, res *load.Result) {
	s.Requests = res.Offered
	s.Rates = RatesOf(res.Offered, res.OK, res.Rejected, res.Failed, res.Duration)
	s.Behind = res.Behind
	s.MaxLag = res.MaxLag
	s.Late = res.Late
	s.Series = res.Series
	if sec := res.Duration.Seconds(); sec > 0 {
		s.NewConns = float64(res.Dials) / sec
	}
	if n := len(res.Clients); n > 0 {
		s.Clients = n
		s.Jain, s.Starved = res.Fairness()
	}
	var all *hdrhistogram.Histogram
	for _, c := range res.ByClass {
		if all == nil {
			all = hdrhistogram.New(c.Latency.LowestTrackableValue(), c.Latency.HighestTrackableValue(), int(c.Latency.SignificantFigures()))
		}
		all.Merge(c.Latency)
	}
	s.Latency = PercentilesOf(all)
	if len(res.ByClass) > 1 {
		s.Classes = make(map[string]ClassSample, len(res.ByClass))
		for name, c := range res.ByClass {
			s.Classes[name] = ClassSample{
				Rates:   RatesOf(c.Offered, c.OK, c.Rejected, c.Failed, res.Duration),
				Latency: PercentilesOf(c.Latency),
				Series:  c.Series,
			}
		}
	}
}

// RatesOf returns the rates of counts over d.
func RatesOf(offered, ok, rejected, failed int64, d time.Duration) Rates {
	sec := d.Seconds()
	if sec <= 0 {
		return Rates{}
	}
	return Rates{
		Offered:  float64(offered) / sec,
		Goodput:  float64(ok) / sec,
		Rejected: float64(rejected) / sec,
		Failed:   float64(failed) / sec,
	}
}

// PercentilesOf reads a histogram of microseconds as milliseconds.
func PercentilesOf(h *hdrhistogram.Histogram) Percentiles {
	if h == nil || h.TotalCount() == 0 {
		return Percentiles{}
	}
	ms := func(q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }
	return Percentiles{P50: ms(50), P90: ms(90), P99: ms(99), P999: ms(99.9), Max: float64(h.Max()) / 1000}
}

// machine describes where the suite runs.
func machine() string {
	return fmt.Sprintf("%s/%s, %d CPUs, GOMAXPROCS %d, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())
}

// ParseMultiples reads a comma-separated list of offered loads in
// multiples of capacity ("0.5,2,5", or "2x"), each in (0, 1000], for the
// flag named flagName.
func ParseMultiples(flagName, s string) ([]float64, error) {
	var out []float64
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		x, err := strconv.ParseFloat(strings.TrimSuffix(v, "x"), 64)
		if err != nil || !(x > 0) || x > 1000 {
			return nil, fmt.Errorf("%s: %q is not a multiple in (0, 1000]", flagName, v)
		}
		out = append(out, x)
	}
	return out, nil
}
