package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
)

// ScenarioShed puts loadshed's proportional CPU shedding (gate.CPU, with
// loadshed's example settings) against the busy-worker gate on the same
// step of overload, each the only protection of a sluice server (see
// ShedConfig).
const ScenarioShed = "shed"

// The shed scenario's targets, beside Targets: a sluice server protected
// by one signal alone, without the age limit and without a queue, so that
// what the load generator sees is that signal's doing.
const (
	// TargetSluiceBusy is the busy-worker gate alone (SluiceBusyConfig).
	TargetSluiceBusy = "sluice-busy"
	// TargetSluiceCPU is loadshed's CPU shedding alone (SluiceCPUConfig).
	TargetSluiceCPU = "sluice-cpu"
)

// SluiceBusyConfig is the configuration of the "sluice-busy" target: the
// busy-worker gate at its default (admit while at most half the workers
// are busy, the deciding one included), no queue (a refusal is answered at
// once) and no age limit. On one worker the gate always admits (see
// package gate): the target needs two CPUs or more to be protected.
func SluiceBusyConfig() sluice.Config {
	return sluice.Config{Admission: admit.Config{
		MaxAge: -1,
		Gates:  []admit.Policy{gate.NewBusy(gate.BusyOptions{})},
	}}
}

// SluiceCPUConfig is the configuration of the "sluice-cpu" target, with
// the CPU gate it returns, which the caller must Close: loadshed's CPU
// option with its README's settings (the machine's CPU utilisation
// averaged over 10 readings 1 s apart, a request refused with a
// probability rising from 0 at 60% to 1 at 80%), as a policy, no queue and
// no age limit. It reads the whole machine, as loadshed does: the load
// generator's work counts, and so does any other program's (run the
// scenario on a machine otherwise idle).
func SluiceCPUConfig() (sluice.Config, *gate.CPU) {
	cpu := gate.NewCPU(gate.CPUOptions{}) // loadshed's example: 0.6, 0.8, 1 s, 10
	return sluice.Config{Admission: admit.Config{
		MaxAge:   -1,
		Policies: []admit.Policy{cpu},
	}}, cpu
}

// shedTargets returns the shed scenario's targets, serving as o says.
// They are not in Targets (the default set of the other scenarios), but
// TargetByName knows them.
func shedTargets(o serveOptions) []Target {
	return []Target{
		{Name: TargetSluiceBusy, Serve: func(h http.Handler) (*Running, error) { return startSluice(o, h, SluiceBusyConfig()) }},
		{Name: TargetSluiceCPU, Serve: func(h http.Handler) (*Running, error) {
			cfg, cpu := SluiceCPUConfig()
			rn, err := startSluice(o, h, cfg)
			if err != nil {
				_ = cpu.Close()
				return nil, err
			}
			stop := rn.Stop
			rn.Stop = func() error { return errors.Join(stop(), cpu.Close()) }
			return rn, nil
		}},
	}
}

// Defaults of ShedConfig's zero fields.
const (
	DefaultShedLow    = 0.3
	DefaultShedHigh   = 3.0
	DefaultShedBefore = 10 * time.Second
	DefaultShedDuring = 15 * time.Second
	DefaultShedAfter  = 10 * time.Second
	DefaultShedBucket = 250 * time.Millisecond
)

// ShedConfig shapes the shed scenario: the suite's Shape (I/O-bound by
// default, the busy gate's case) is offered Low×C for Before, High×C for
// During and Low×C for After, open loop, and the outcome is counted in
// buckets of Bucket by send time, as in the step scenario. C is the
// capacity of ShedReference, measured just before each run, so that every
// target gets the same load. Its targets are TargetSluiceBusy and
// TargetSluiceCPU (name them with -targets); any other target runs it
// too. The CPU reading lags by design: it averages the last 10 s, so Before
// fills its window as a server that has been running would have it (10 s),
// During is long enough for it to act (15 s), and After shows how long it
// goes on refusing once the load is light again (10 s).
//
// The busy gate needs two workers or more to refuse anything, so on a
// machine whose split leaves the target one CPU run the scenario with
// -cpus shared (both the generator and the target on every CPU, the
// target at a lower priority).
type ShedConfig struct {
	// Low and High are the offered loads in multiples of each target's
	// capacity; defaults 0.3 and 3.
	Low, High float64
	// Before, During and After are the phases' lengths; defaults 10 s,
	// 15 s and 10 s.
	Before, During, After time.Duration
	// Bucket is the width of the series' buckets; default 250 ms.
	Bucket time.Duration
}

// defaults checks c and fills in its zero fields.
func (c *ShedConfig) defaults() error {
	if c.Low == 0 {
		c.Low = DefaultShedLow
	}
	if c.High == 0 {
		c.High = DefaultShedHigh
	}
	for name, d := range map[string]*time.Duration{"before": &c.Before, "during": &c.During, "after": &c.After, "bucket": &c.Bucket} {
		if *d < 0 {
			return fmt.Errorf("bench: shed %s %v must not be negative (zero for the default)", name, *d)
		}
	}
	if c.Before == 0 {
		c.Before = DefaultShedBefore
	}
	if c.During == 0 {
		c.During = DefaultShedDuring
	}
	if c.After == 0 {
		c.After = DefaultShedAfter
	}
	if c.Bucket == 0 {
		c.Bucket = DefaultShedBucket
	}
	for name, v := range map[string]float64{"low": c.Low, "high": c.High} {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("bench: shed %s multiple %v must be positive and finite", name, v)
		}
	}
	return nil
}

// window is the shed scenario's sending window.
func (c *ShedConfig) window() time.Duration { return c.Before + c.During + c.After }

// ShedReference is the target whose capacity C the shed scenario's loads
// are multiples of, measured before each run: the README's sluice server,
// unprotected but by its age limit. Both targets are offered the same
// rates, rather than multiples of their own C (the busy gate's 50% rule
// lowers its C).
const ShedReference = "sluice"

// shedWindow is the planned time of one point: the reference's
// calibration and the three phases.
func (cfg *SuiteConfig) shedWindow() time.Duration {
	cal := time.Duration(len(cfg.CalibrateConns)) * (cfg.Calibrate.Warmup + cfg.Calibrate.Duration)
	return cal + cfg.Shed.window()
}

// shed runs one point of the shed scenario: it measures the reference's
// capacity, then offers the three phases, in buckets, to a fresh target
// process.
func (cfg *SuiteConfig) shed(ctx context.Context, target string, p Point, repeat, run int) (*Sample, error) {
	sc := cfg.Shed
	capacity, capCPU, err := cfg.calibrate(ctx, ShedReference, p.Spec)
	if err != nil {
		return nil, err
	}
	proc, err := startProcess(ctx, cfg.Launch, target, p.Spec, cfg.TargetCPUs)
	if err != nil {
		return nil, err
	}
	rc := Config{
		URL:      proc.URL + WeatherPath,
		Deadline: cfg.Deadline,
		Seed:     cfg.Seed + uint64(run),
		Phases: []Phase{
			{Rate: sc.Low * capacity, Duration: sc.Before},
			{Rate: sc.High * capacity, Duration: sc.During},
			{Rate: sc.Low * capacity, Duration: sc.After},
		},
		Bucket: sc.Bucket,
	}
	if !cfg.Constant {
		rc.Arrival = Poisson
	}
	host := gate.NewCPU(gate.CPUOptions{Interval: gate.Manual, Window: 1}) // its first reading: now
	defer host.Close()
	cpu0, tcpu0, t0 := selfCPU(), proc.cpu(), time.Now()
	res, err := Run(ctx, rc)
	gen, tcpu, elapsed, hst := selfCPU()-cpu0, proc.cpu()-tcpu0, time.Since(t0), host.Refresh()
	err = errors.Join(err, proc.Stop())
	if res == nil {
		return nil, err
	}
	s := &Sample{
		Scenario: ScenarioShed, Shape: p.Shape.Name, Handler: p.Spec, Target: target, Repeat: repeat,
		Capacity: capacity, CapacityCPU: capCPU, Multiple: sc.High, Placement: proc.Placement,
		Step: &StepInfo{Low: sc.Low, High: sc.High, Up: sc.Before, Down: sc.Before + sc.During, End: sc.window()},
	}
	Fill(s, res)
	s.Server = proc.Stats
	if sec := elapsed.Seconds(); sec > 0 {
		s.TargetCPU = tcpu.Seconds() / sec
		s.GeneratorCPU = gen.Seconds() / sec
	}
	s.Shed = &ShedInfo{HostCPU: hst.Utilisation * float64(runtime.NumCPU())}
	if hst.Err != nil || hst.Span == 0 {
		s.Shed.HostCPU = -1
	} else {
		s.Shed.OtherCPU = max(0, s.Shed.HostCPU-s.TargetCPU-s.GeneratorCPU)
	}
	return s, err
}

// ShedInfo is the shed scenario's part of a Sample: what else ran on the
// machine. The CPU target reads the whole machine's CPU, so another
// program's work makes it refuse; a run where others used more than
// ShedDisturbed is marked, and reports leave it out.
type ShedInfo struct {
	// HostCPU is the machine's CPU time during the run, in CPU-seconds
	// per second (read as the CPU gate reads it, over the run, times the
	// CPUs); -1 when /proc/stat could not be read.
	HostCPU float64 `json:"host_cpu"`
	// OtherCPU is what of it neither the target nor the load generator
	// used: other programs.
	OtherCPU float64 `json:"other_cpu"`
}

// ShedDisturbed is the CPU time other programs may use during a shed run,
// in CPU-seconds per second, before the run counts as disturbed.
const ShedDisturbed = 0.1

// Disturbed reports whether other programs used more than ShedDisturbed
// of the machine's CPU during the run.
func (si *ShedInfo) Disturbed() bool { return si != nil && si.OtherCPU > ShedDisturbed }
