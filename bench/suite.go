package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

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

// StepConfig shapes the step scenario: Low×C for Before, High×C for
// During, Low×C for After, counted in buckets of Bucket.
type StepConfig struct {
	Low, High             float64
	Before, During, After time.Duration
	Bucket                time.Duration
}

// SuiteConfig configures RunSuite. Zero fields take the defaults given.
type SuiteConfig struct {
	// Targets names the targets (see Targets); default all of them.
	Targets []string
	// Scenarios names the scenarios (Scenario* constants); default all
	// but the soak, which runs only when named.
	Scenarios []string
	// Shape is the handler shape of the sweep, step, slowdown and mix
	// scenarios; default ShapeIO.
	Shape Shape
	// Shapes are compared by the shapes scenario; default ShapeCPU,
	// ShapeIO and ShapeBlocking.
	Shapes []Shape
	// Multiples are the sweep's offered loads, in multiples of each
	// target's capacity; default 0.5, 1, 2, 3, 5, 7, 10.
	Multiples []float64
	// ShapeMultiples are the offered loads of the shapes and mix
	// scenarios; default 2 and 5.
	ShapeMultiples []float64
	// Duration is the sending window of each point; default 3 s.
	Duration time.Duration
	// Repeats is the number of repeats; targets alternate within each,
	// in a rotated order; default 3.
	Repeats int
	// Deadline is the client deadline; default DefaultDeadline (1 s).
	Deadline time.Duration
	// ClientModes are the generator's client modes (Config.ClientMode)
	// the sweep and shapes scenarios run each point under, one after the
	// other, so that the modes alternate; empty means ClientReconnect
	// alone, the generator's behaviour of the recorded runs. Samples
	// name their mode when this is set.
	ClientModes []ClientMode
	// Conns is the generator's connection pool in the sweep, shapes,
	// slowdown, mix and step scenarios (Config.Conns); zero derives it
	// from Little's law, capped at MaxConns. A larger pool lets more
	// requests reach the target at once instead of waiting in the client
	// for a connection, as a client without a per-host limit does.
	Conns int
	// TLS serves every target over HTTPS (a throwaway certificate the
	// generator does not check) and sends over TLS.
	TLS bool
	// NewConns sends every request of the calibration and of the sweep
	// and shapes scenarios on a connection of its own (with TLS, a full
	// handshake each), as clients that do not keep connections do.
	NewConns bool
	// Clients, when positive, makes the generator's load that of Clients
	// clients with a kept-alive connection each (Config.Clients) in the
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
	Calibrate CalibrateConfig
	// CalibrateConns are the closed-loop concurrencies the capacity is
	// measured at; default 16, 32, 64 and 128. One level would favour one
	// kind of target: a server with a timed queue and an age limit
	// rejects what waits too long in a closed loop much deeper than it
	// needs to saturate, where net/http only grows its latency, and
	// net/http needs more requests in flight than sluice to fill the CPU.
	CalibrateConns []int
	// Step shapes the step scenario; default 0.5x for 2 s, 3x for 3 s,
	// 0.5x for 3 s, in 100 ms buckets.
	Step StepConfig
	// SlowdownFactor multiplies the database wait in the slowdown
	// scenario; default 2. SlowdownMultiple is its offered load, in
	// multiples of the capacity measured with the normal database;
	// default 0.8.
	SlowdownFactor, SlowdownMultiple float64
	// NewFraction is the share of requests on new connections in the mix
	// scenario, the rest on kept-alive ones; default 0.5.
	NewFraction float64
	// Soak shapes the soak scenario; it serves the handler of Shape.
	Soak SoakConfig
	// Noisy shapes the noisy scenario; it serves the handler of Shape.
	Noisy NoisyConfig
	// Stray shapes the stray scenario.
	Stray StrayConfig
	// Cluster shapes the cluster scenario.
	Cluster ClusterConfig
	// Shed shapes the shed scenario; it serves the handler of Shape.
	Shed ShedConfig
	// Tenants shapes the tenants scenario.
	Tenants TenantsConfig
	// Lanes shapes the lanes scenario.
	Lanes LanesConfig
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
	// Progress, if set, is called as the suite goes, with the planned
	// time done and in all, and what runs now.
	Progress func(done, total time.Duration, now string)
	// Command is recorded in the Report as the command that reproduces
	// the run.
	Command string

	// allCPUs are every CPU of the suite (both sets of a split, or this
	// process's mask), the noisy scenario's target's; set by RunSuite.
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
	}
	for _, n := range c.Targets {
		if _, ok := TargetByName(n); !ok {
			return fmt.Errorf("bench: unknown target %q", n)
		}
	}
	all := []string{ScenarioSweep, ScenarioShapes, ScenarioSlowdown, ScenarioMix, ScenarioStep}
	if len(c.Scenarios) == 0 {
		c.Scenarios = all
	}
	known := slices.Concat(all, []string{ScenarioSoak, ScenarioNoisy, ScenarioStray, ScenarioCluster, ScenarioShed, ScenarioTenants, ScenarioLanes})
	for _, s := range c.Scenarios {
		if !slices.Contains(known, s) {
			return fmt.Errorf("bench: unknown scenario %q (have %v)", s, known)
		}
		if (c.TLS || c.NewConns) && !slices.Contains(all, s) {
			return fmt.Errorf("bench: TLS and NewConns apply to the scenarios %v, not %s, which starts its servers its own way", all, s)
		}
		if c.NewConns && s == ScenarioMix {
			return errors.New("bench: NewConns does not apply to the mix scenario, which mixes new and kept connections itself")
		}
		if c.Clients != 0 && (!slices.Contains(all, s) || s == ScenarioMix) {
			return fmt.Errorf("bench: Clients applies to the sweep, shapes, slowdown and step scenarios, not %s", s)
		}
	}
	if slices.Contains(c.Scenarios, ScenarioSoak) {
		if err := c.Soak.defaults(); err != nil {
			return err
		}
	}
	if slices.Contains(c.Scenarios, ScenarioNoisy) {
		if err := c.Noisy.defaults(); err != nil {
			return err
		}
	}
	if slices.Contains(c.Scenarios, ScenarioStray) {
		if err := c.Stray.defaults(); err != nil {
			return err
		}
	}
	if slices.Contains(c.Scenarios, ScenarioCluster) {
		if err := c.Cluster.defaults(); err != nil {
			return err
		}
	}
	if slices.Contains(c.Scenarios, ScenarioShed) {
		if err := c.Shed.defaults(); err != nil {
			return err
		}
	}
	if slices.Contains(c.Scenarios, ScenarioTenants) {
		if err := c.Tenants.defaults(); err != nil {
			return err
		}
		for _, t := range c.Targets {
			if !tenantCapable(t) {
				return fmt.Errorf("bench: the tenants scenario runs on sluice targets only (its tracker is an admission policy), not %q: name them with -targets", t)
			}
		}
	}
	if slices.Contains(c.Scenarios, ScenarioLanes) {
		if err := c.Lanes.defaults(); err != nil {
			return err
		}
	}
	if c.Shape.Name == "" {
		c.Shape = ShapeIO
	}
	if len(c.Shapes) == 0 {
		c.Shapes = []Shape{ShapeCPU, ShapeIO, ShapeBlocking}
	}
	if len(c.Multiples) == 0 {
		c.Multiples = []float64{0.5, 1, 2, 3, 5, 7, 10}
	}
	if len(c.ShapeMultiples) == 0 {
		c.ShapeMultiples = []float64{2, 5}
	}
	for _, m := range slices.Concat(c.Multiples, c.ShapeMultiples) {
		if !(m > 0) || math.IsInf(m, 0) {
			return fmt.Errorf("bench: offered multiple %v must be positive and finite", m)
		}
	}
	if c.Duration <= 0 {
		c.Duration = 3 * time.Second
	}
	if c.Repeats <= 0 {
		c.Repeats = 3
	}
	if c.Deadline <= 0 {
		c.Deadline = DefaultDeadline
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
	s := &c.Step
	if s.Low <= 0 {
		s.Low = 0.5
	}
	if s.High <= 0 {
		s.High = 3
	}
	if s.Before <= 0 {
		s.Before = 2 * time.Second
	}
	if s.During <= 0 {
		s.During = 3 * time.Second
	}
	if s.After <= 0 {
		s.After = 3 * time.Second
	}
	if s.Bucket <= 0 {
		s.Bucket = 100 * time.Millisecond
	}
	if c.SlowdownFactor <= 0 {
		c.SlowdownFactor = 2
	}
	if c.SlowdownMultiple <= 0 {
		c.SlowdownMultiple = 0.8
	}
	if c.NewFraction <= 0 || c.NewFraction > 1 {
		c.NewFraction = 0.5
	}
	c.TargetCPUs = slices.Compact(slices.Sorted(slices.Values(c.TargetCPUs)))
	c.GeneratorCPUs = slices.Compact(slices.Sorted(slices.Values(c.GeneratorCPUs)))
	return checkSplit(c.TargetCPUs, c.GeneratorCPUs)
}

// point is one measurement the suite plans.
type point struct {
	scenario string
	shape    Shape
	spec     HandlerSpec // what the target serves (the slowdown's is slower)
	multiple float64     // of the capacity; 0 for a point offered a fixed rate
	rate     float64     // the noisy scenario's fixed rate
	part     string      // the stray scenario's part
	// client is the generator's client mode of a sweep or shapes point
	// when the suite names modes (SuiteConfig.ClientModes); "" otherwise.
	client string
}

// clientPoints returns p once per mode of modes (once, unchanged, for
// none).
func clientPoints(p point, modes []ClientMode) []point {
	if len(modes) == 0 {
		return []point{p}
	}
	ps := make([]point, 0, len(modes))
	for _, m := range modes {
		q := p
		q.client = m.String()
		ps = append(ps, q)
	}
	return ps
}

// needsCapacity reports whether any of points is offered in multiples of
// the capacity, which must then be measured first.
func needsCapacity(points []point) bool {
	return slices.ContainsFunc(points, func(p point) bool { return p.multiple > 0 })
}

// plan lists the points of one repeat for one target, grouped by the shape
// whose capacity they are offered in multiples of.
func (c *SuiteConfig) plan() (shapes []Shape, points map[string][]point) {
	points = make(map[string][]point)
	add := func(sh Shape, p point) {
		if _, ok := points[sh.Name]; !ok {
			shapes = append(shapes, sh)
		}
		points[sh.Name] = append(points[sh.Name], p)
	}
	for _, sc := range c.Scenarios {
		switch sc {
		case ScenarioSweep:
			for _, m := range c.Multiples {
				for _, p := range clientPoints(point{scenario: sc, shape: c.Shape, spec: c.Shape.Spec, multiple: m}, c.ClientModes) {
					add(c.Shape, p)
				}
			}
		case ScenarioShapes:
			for _, sh := range c.Shapes {
				for _, m := range c.ShapeMultiples {
					for _, p := range clientPoints(point{scenario: sc, shape: sh, spec: sh.Spec, multiple: m}, c.ClientModes) {
						add(sh, p)
					}
				}
			}
		case ScenarioSlowdown:
			slow := c.Shape.Spec
			slow.DB = time.Duration(float64(slow.DB) * c.SlowdownFactor)
			add(c.Shape, point{scenario: sc, shape: c.Shape, spec: slow, multiple: c.SlowdownMultiple})
		case ScenarioMix:
			for _, m := range c.ShapeMultiples {
				add(c.Shape, point{scenario: sc, shape: c.Shape, spec: c.Shape.Spec, multiple: m})
			}
		case ScenarioStep:
			add(c.Shape, point{scenario: sc, shape: c.Shape, spec: c.Shape.Spec, multiple: c.Step.High})
		case ScenarioSoak:
			add(c.Shape, point{scenario: sc, shape: c.Shape, spec: c.Shape.Spec, multiple: c.Soak.Multiple})
		case ScenarioNoisy:
			for _, r := range c.Noisy.Rates {
				add(c.Shape, point{scenario: sc, shape: c.Shape, spec: c.Shape.Spec, rate: r})
			}
		case ScenarioStray:
			sh := c.Stray.Shape
			for _, part := range StrayParts {
				m := c.Stray.Multiple
				if part == StrayTrivial {
					m = 0
				}
				add(sh, point{scenario: sc, shape: sh, spec: sh.Spec, multiple: m, part: part})
			}
		case ScenarioCluster:
			sh := c.Cluster.shape()
			for _, part := range ClusterParts {
				m := c.Cluster.Multiple
				if part == ClusterKill {
					m = c.Cluster.KillMultiple
				}
				add(sh, point{scenario: sc, shape: sh, spec: sh.Spec, multiple: m, part: part})
			}
		case ScenarioShed:
			add(c.Shape, point{scenario: sc, shape: c.Shape, spec: c.Shape.Spec}) // offered multiples of ShedReference's C
		case ScenarioTenants:
			sh := c.Tenants.shape()
			for _, part := range TenantsParts {
				add(sh, point{scenario: sc, shape: sh, spec: sh.Spec, multiple: c.Tenants.multiple(), part: part})
			}
		case ScenarioLanes:
			sh := c.Lanes.shape()
			for _, part := range LanesParts {
				add(sh, point{scenario: sc, shape: sh, spec: sh.Spec, multiple: c.Lanes.Multiple, part: part})
			}
		}
	}
	return shapes, points
}

// window returns a point's sending window.
func (c *SuiteConfig) window(p point) time.Duration {
	switch p.scenario {
	case ScenarioStep:
		return c.Step.Before + c.Step.During + c.Step.After
	case ScenarioSoak:
		return c.Soak.Duration
	case ScenarioStray:
		if p.part != StrayCPU {
			return c.Duration + c.Stray.Delay // the last stray call's answer
		}
	case ScenarioCluster:
		return c.clusterWindow(p.part)
	case ScenarioShed:
		return c.shedWindow()
	case ScenarioTenants:
		return c.Tenants.Duration
	}
	return c.Duration
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
					total += cfg.window(p) + cfg.Deadline/2
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
					capacity, capCPU, err = cfg.capacityOf(ctx, tgt, sh)
					progress(calibration, what)
					if err != nil {
						return rep, err
					}
				}
				for _, p := range points[sh.Name] {
					if !p.runsOn(tgt) {
						continue
					}
					what := fmt.Sprintf("repeat %d/%d, %s, %s: %s", r+1, cfg.Repeats, sh.Name, tgt, p.describe())
					progress(0, what)
					s, err := cfg.measure(ctx, tgt, p, capacity, r, run)
					if s != nil && s.Capacity > 0 {
						s.CapacityCPU = capCPU
					}
					run++
					progress(cfg.window(p)+cfg.Deadline/2, what)
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
	p, err := startChild(ctx, cfg.Launch, cfg.child(target, spec), cfg.TargetCPUs)
	if err != nil {
		return 0, 0, err
	}
	cc := cfg.Calibrate
	cc.URL = p.URL + weatherPath
	cc.NewConns = cfg.NewConns
	var best Calibration
	for _, n := range cfg.CalibrateConns {
		cc.Conns = n
		tcpu0, t0 := p.cpu(), time.Now()
		cal, cerr := Calibrate(ctx, cc)
		tcpu, elapsed := p.cpu()-tcpu0, time.Since(t0)
		if cerr != nil {
			err = cerr
			break
		}
		if cal.Goodput > best.Goodput {
			best = cal
			cpu = tcpu.Seconds() / elapsed.Seconds()
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

// child describes the child process of a target serving spec, over TLS
// when the suite says so.
func (cfg *SuiteConfig) child(target string, spec HandlerSpec) childSpec {
	return childSpec{Target: target, Handler: spec, Nice: TargetNice, TLS: cfg.TLS}
}

// weatherPath is the request every run sends.
const weatherPath = "/forecast?city=Lisbon"

// measure runs one point on a fresh child process.
func (cfg *SuiteConfig) measure(ctx context.Context, target string, p point, capacity float64, repeat, run int) (*Sample, error) {
	switch p.scenario {
	case ScenarioSoak:
		return cfg.soak(ctx, target, p, capacity, repeat, run)
	case ScenarioNoisy:
		return cfg.noisy(ctx, target, p, repeat, run)
	case ScenarioStray:
		return cfg.stray(ctx, target, p, capacity, repeat, run)
	case ScenarioCluster:
		return cfg.cluster(ctx, target, p, capacity, repeat, run)
	case ScenarioShed:
		return cfg.shed(ctx, target, p, repeat, run)
	case ScenarioTenants:
		return cfg.tenants(ctx, target, p, capacity, repeat, run)
	case ScenarioLanes:
		return cfg.lanes(ctx, target, p, capacity, repeat, run)
	}
	proc, err := startChild(ctx, cfg.Launch, cfg.child(target, p.spec), cfg.TargetCPUs)
	if err != nil {
		return nil, err
	}
	rc := Config{
		URL:      proc.URL + weatherPath,
		Deadline: cfg.Deadline,
		Seed:     cfg.Seed + uint64(run),
		Conns:    cfg.Conns,
	}
	if cfg.NewConns {
		rc.NewConn = func(int) bool { return true }
	}
	rc.Clients = cfg.Clients
	if !cfg.Constant {
		rc.Arrival = Poisson
	}
	if p.client != "" {
		if rc.ClientMode, err = ParseClientMode(p.client); err != nil {
			return nil, errors.Join(err, proc.Stop())
		}
	}
	s := &Sample{
		Scenario: p.scenario, Shape: p.shape.Name, Handler: p.spec, Target: target,
		Repeat: repeat, Capacity: capacity, Multiple: p.multiple, Client: p.client,
	}
	switch p.scenario {
	case ScenarioStep:
		st := cfg.Step
		rc.Phases = []Phase{
			{Rate: st.Low * capacity, Duration: st.Before},
			{Rate: st.High * capacity, Duration: st.During},
			{Rate: st.Low * capacity, Duration: st.After},
		}
		rc.Bucket = st.Bucket
		s.Step = &StepInfo{Low: st.Low, High: st.High, Up: st.Before, Down: st.Before + st.During, End: st.Before + st.During + st.After}
	case ScenarioMix:
		isNew := mixPattern(cfg.NewFraction)
		rc.NewConn = isNew
		rc.Classify = func(i int) (string, http.Header) {
			if isNew(i) {
				return "new", nil
			}
			return "kept", nil
		}
		fallthrough
	default:
		rc.Rate = p.multiple * capacity
		rc.Duration = cfg.Duration
	}
	cpu0, tcpu0, t0 := selfCPU(), proc.cpu(), time.Now()
	res, err := Run(ctx, rc)
	gen, tcpu, elapsed := selfCPU()-cpu0, proc.cpu()-tcpu0, time.Since(t0)
	err = errors.Join(err, proc.Stop())
	if res == nil {
		return nil, err
	}
	fill(s, res)
	s.Server = proc.Stats
	s.Placement = proc.Placement
	// Per second of the whole run: the sending window and the wait for
	// the last answers.
	if sec := elapsed.Seconds(); sec > 0 {
		s.TargetCPU = tcpu.Seconds() / sec
		s.GeneratorCPU = gen.Seconds() / sec
	}
	return s, err
}

// describe names a point in the suite's progress: "sweep 2x", "noisy
// 800/s", "stray cpu+stray 2x".
func (p point) describe() string {
	var b strings.Builder
	b.WriteString(p.scenario)
	if p.part != "" {
		b.WriteString(" " + p.part)
	}
	if p.rate > 0 {
		fmt.Fprintf(&b, " %.4g/s", p.rate)
	}
	if p.multiple > 0 {
		fmt.Fprintf(&b, " %.3gx", p.multiple)
	}
	if p.client != "" {
		b.WriteString(" " + p.client)
	}
	return b.String()
}

// mixPattern returns whether request i goes on a new connection, spreading
// a fraction f of the requests evenly.
func mixPattern(f float64) func(i int) bool {
	return func(i int) bool {
		return math.Floor(float64(i+1)*f) > math.Floor(float64(i)*f)
	}
}

// fill copies a Result into a Sample.
func fill(s *Sample, res *Result) {
	s.Requests = res.Offered
	s.Rates = rates(res.Offered, res.OK, res.Rejected, res.Failed, res.Duration)
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
	s.Latency = percentiles(all)
	if len(res.ByClass) > 1 {
		s.Classes = make(map[string]ClassSample, len(res.ByClass))
		for name, c := range res.ByClass {
			s.Classes[name] = ClassSample{
				Rates:   rates(c.Offered, c.OK, c.Rejected, c.Failed, res.Duration),
				Latency: percentiles(c.Latency),
				Series:  c.Series,
			}
		}
	}
}

func rates(offered, ok, rejected, failed int64, d time.Duration) Rates {
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

// percentiles reads a histogram of microseconds as milliseconds.
func percentiles(h *hdrhistogram.Histogram) Percentiles {
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
