package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// DefaultNoisyRates are the noisy scenario's offered loads, in requests
// per second: the two of the noisy-neighbour measurement in
// docs/benchmarks.md, on a 2-CPU machine where the weather handler's
// capacity on both CPUs is about 1800/s.
var DefaultNoisyRates = []float64{800, 1200}

// NoisyConfig shapes the noisy scenario: each target serves the suite's
// Shape (the weather handler, 1 ms of CPU and 10 ms of database by
// default) on every CPU of the suite, the split's two sets together (so a
// sluice target has one worker per CPU), while a busy loop in another
// process, started just before the target, holds the last of those CPUs
// at the targets' nice value (TargetNice), so that a thread of the target
// on that CPU gets about half of it. Each rate is offered open loop for
// the suite's Duration, the same rate to every target: the question is
// whether a target serves a load that the CPUs left to it can carry, not
// how it fares at a multiple of its own capacity.
type NoisyConfig struct {
	// Rates are the offered loads in requests per second; default
	// DefaultNoisyRates.
	Rates []float64
	// Quiet runs the same points without the neighbour: the control,
	// what each target does with every CPU to itself.
	Quiet bool
}

// defaults checks c and fills in its zero fields.
func (c *NoisyConfig) defaults() error {
	if len(c.Rates) == 0 {
		c.Rates = slices.Clone(DefaultNoisyRates)
	}
	for _, r := range c.Rates {
		if !(r > 0) || math.IsInf(r, 0) {
			return fmt.Errorf("bench: noisy rate %v must be positive and finite", r)
		}
	}
	return nil
}

// NoisyInfo is the noisy scenario's part of a Sample.
type NoisyInfo struct {
	// Rate is the offered load, in requests per second.
	Rate float64 `json:"rate"`
	// CPUs are the CPUs the target ran on; NeighbourCPU the one the busy
	// loop held, at NeighbourNice, or -1 in a quiet run (NoisyConfig.Quiet).
	CPUs          []int `json:"cpus"`
	NeighbourCPU  int   `json:"neighbour_cpu"`
	NeighbourNice int   `json:"neighbour_nice"`
	// NeighbourUse is the CPU time the busy loop got during the run, in
	// CPU-seconds per second.
	NeighbourUse float64 `json:"neighbour_use"`
	// RunQueue is how long the target's threads waited for a CPU during
	// the run.
	RunQueue RunQueue `json:"run_queue"`
}

// neighbourBound bounds a neighbour's busy loop beyond the run it is
// started for, should its parent never stop it.
const neighbourBound = processStartTimeout + 10*time.Second

// noisy runs one point of the noisy scenario: the neighbour, then a fresh
// target process on all the suite's CPUs, then the load.
func (cfg *SuiteConfig) noisy(ctx context.Context, target string, p Point, repeat, run int) (s *Sample, err error) {
	cpus := cfg.allCPUs
	if len(cpus) < 2 {
		return nil, fmt.Errorf("bench: the noisy scenario needs two CPUs or more, this process has %v", cpus)
	}
	ncpu := cpus[len(cpus)-1]
	var nb *neighbour
	if cfg.Noisy.Quiet {
		ncpu = -1
	} else {
		if nb, err = startNeighbour(ctx, cfg.Launch, ncpu, TargetNice, cfg.Duration+cfg.Deadline+neighbourBound); err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, nb.stop()) }()
	}
	proc, err := startProcess(ctx, cfg.Launch, target, p.Spec, cpus)
	if err != nil {
		return nil, err
	}
	rc := Config{
		URL:      proc.URL + WeatherPath,
		Rate:     p.Rate,
		Duration: cfg.Duration,
		Deadline: cfg.Deadline,
		Seed:     cfg.Seed + uint64(run),
	}
	if !cfg.Constant {
		rc.Arrival = Poisson
	}
	threads0, _ := threadSched(proc.pid())
	ncpu0, cpu0, tcpu0, t0 := nb.cpu(), selfCPU(), proc.cpu(), time.Now()
	res, err := Run(ctx, rc)
	gen, tcpu, ncpuUsed, elapsed := selfCPU()-cpu0, proc.cpu()-tcpu0, nb.cpu()-ncpu0, time.Since(t0)
	threads1, _ := threadSched(proc.pid())
	err = errors.Join(err, proc.Stop())
	if res == nil {
		return nil, err
	}
	s = &Sample{
		Scenario: ScenarioNoisy, Shape: p.Shape.Name, Handler: p.Spec, Target: target,
		Repeat: repeat, Placement: proc.Placement,
	}
	Fill(s, res)
	s.Server = proc.Stats
	ni := &NoisyInfo{Rate: p.Rate, CPUs: slices.Clone(cpus), NeighbourCPU: ncpu, NeighbourNice: TargetNice}
	if sec := elapsed.Seconds(); sec > 0 {
		s.TargetCPU = tcpu.Seconds() / sec
		s.GeneratorCPU = gen.Seconds() / sec
		ni.NeighbourUse = ncpuUsed.Seconds() / sec
	}
	if threads0 != nil && threads1 != nil {
		ni.RunQueue = runQueue(threads0, threads1, elapsed)
	}
	s.Noisy = ni
	return s, err
}
