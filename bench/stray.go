package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"
)

// Paths of the stray scenario's target, beside the weather's /forecast.
const (
	// StrayPath is the stray blocking handler: it calls a slow service
	// with a plain net/http client (not through package await), which
	// holds the thread it runs on, a sluice worker, until the answer.
	StrayPath = "/stray"
	// TrivialPath answers "ok" at once.
	TrivialPath = "/trivial"
)

// The parts of the stray scenario, as in StrayInfo.Part.
const (
	// StrayTrivial offers StrayConfig.TrivialRate to TrivialPath with
	// the stray calls alongside.
	StrayTrivial = "trivial"
	// StrayCPU offers StrayConfig.Multiple of C to the CPU-bound handler,
	// alone.
	StrayCPU = "cpu"
	// StrayCPUWith offers the same with the stray calls alongside.
	StrayCPUWith = "cpu+stray"
)

// StrayParts are the parts of the stray scenario, in the order it runs
// them for each target.
var StrayParts = []string{StrayTrivial, StrayCPU, StrayCPUWith}

// Defaults of StrayConfig's zero fields.
const (
	DefaultStrayDelay        = time.Second
	DefaultStrayRate         = 2.0
	DefaultStrayTrivialRate  = 500.0
	DefaultStrayTrivialConns = 32
	DefaultStrayMultiple     = 2.0
)

// StrayGrace is how long after the slow service's delay a stray call may
// still count as answered: the stray calls have a deadline of their own,
// Delay + StrayGrace, since each takes Delay by design.
const StrayGrace = 2 * time.Second

// strayClientTimeout bounds a stray call in the target, should the slow
// service never answer.
const strayClientTimeout = 30 * time.Second

// StrayConfig shapes the stray scenario, a handler that blocks its
// thread without saying so: StrayPath calls a slow service (a net/http
// server in the generator's process, on loopback, that answers after
// Delay) with a plain net/http client, Rate times a second at constant
// gaps. Beside those calls the scenario measures, each part on a fresh
// target process:
//
//   - trivial: TrivialPath, offered TrivialRate requests a second on
//     TrivialConns kept-alive connections of their own (its p50, p99 and
//     errors are the figures);
//   - cpu: Shape's handler (CPU-bound) at Multiple of the target's C
//     (measured just before, as in the other scenarios), without the stray
//     calls;
//   - cpu+stray: the same with the stray calls alongside.
type StrayConfig struct {
	// Delay is how long the slow service takes to answer; default 1 s.
	Delay time.Duration
	// Rate is the stray calls per second; default 2.
	Rate float64
	// TrivialRate and TrivialConns are the trivial endpoint's load;
	// default 500 requests a second on 32 connections.
	TrivialRate  float64
	TrivialConns int
	// Multiple is the CPU-bound load in multiples of C; default 2.
	Multiple float64
	// Shape is the CPU-bound handler; default ShapeCPU.
	Shape Shape
}

// defaults checks c and fills in its zero fields.
func (c *StrayConfig) defaults() error {
	if c.Delay <= 0 {
		c.Delay = DefaultStrayDelay
	}
	if c.Rate == 0 {
		c.Rate = DefaultStrayRate
	}
	if c.TrivialRate == 0 {
		c.TrivialRate = DefaultStrayTrivialRate
	}
	if c.TrivialConns <= 0 {
		c.TrivialConns = DefaultStrayTrivialConns
	}
	if c.Multiple == 0 {
		c.Multiple = DefaultStrayMultiple
	}
	if c.Shape.Name == "" {
		c.Shape = ShapeCPU
	}
	for name, v := range map[string]float64{"rate": c.Rate, "trivial rate": c.TrivialRate, "multiple": c.Multiple} {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("bench: stray %s %v must be positive and finite", name, v)
		}
	}
	return nil
}

// StrayInfo is the stray scenario's part of a Sample; the Sample's rates
// and latencies are those of the measured endpoint (TrivialPath, or the
// CPU-bound handler).
type StrayInfo struct {
	// Part is StrayTrivial, StrayCPU or StrayCPUWith.
	Part string `json:"part"`
	// Delay is the slow service's delay; Rate the stray calls offered
	// per second (0 in the part without them).
	Delay time.Duration `json:"delay"`
	Rate  float64       `json:"rate"`
	// Calls and CallLatency are the stray calls' own outcome: answered
	// with a 2xx within Delay + StrayGrace, or not.
	Calls       Rates       `json:"calls"`
	CallLatency Percentiles `json:"call_latency_ms"`
	// CallsBehind reports that the generator of the stray calls fell
	// behind its schedule.
	CallsBehind bool `json:"calls_behind,omitempty"`
}

// strayHandler is the stray scenario's target handler: the weather
// service h, StrayPath (a plain net/http client call to slowURL, which
// holds the thread) and TrivialPath.
func strayHandler(h http.Handler, slowURL string) http.Handler {
	client := &http.Client{Timeout: strayClientTimeout} // a plain client: no await
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("GET "+StrayPath, func(w http.ResponseWriter, _ *http.Request) {
		resp, err := client.Get(slowURL)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		_, _ = io.WriteString(w, "done\n")
	})
	mux.HandleFunc("GET "+TrivialPath, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}

// slowService answers every request after delay (or gives up when the
// client goes away).
func slowService(delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
			_, _ = io.WriteString(w, "slow\n")
		case <-r.Context().Done():
		}
	})
}

// stray runs one part of the stray scenario on a fresh target process.
func (cfg *SuiteConfig) stray(ctx context.Context, target string, p Point, capacity float64, repeat, run int) (s *Sample, err error) {
	sc := cfg.Stray
	slowURL, stopSlow, err := startNetHTTP(slowService(sc.Delay))
	if err != nil {
		return nil, fmt.Errorf("bench: slow service: %w", err)
	}
	defer func() { err = errors.Join(err, stopSlow()) }()
	cs := ChildSpec{Target: target, Handler: p.Spec, Nice: TargetNice, StrayURL: slowURL + "/slow"}
	proc, err := startChild(ctx, cfg.Launch, cs, cfg.TargetCPUs)
	if err != nil {
		return nil, err
	}
	rc := Config{Duration: cfg.Duration, Deadline: cfg.Deadline, Seed: cfg.Seed + uint64(run)}
	if !cfg.Constant {
		rc.Arrival = Poisson
	}
	if p.Part == StrayTrivial {
		rc.URL, rc.Rate, rc.Conns = proc.URL+TrivialPath, sc.TrivialRate, sc.TrivialConns
		capacity = 0 // the CPU-bound handler's, which this part does not offer
	} else {
		rc.URL, rc.Rate = proc.URL+WeatherPath, p.Multiple*capacity
	}
	calls := make(chan *Result, 1)
	callErr := make(chan error, 1)
	withCalls := p.Part != StrayCPU
	cpu0, tcpu0, t0 := selfCPU(), proc.cpu(), time.Now()
	if withCalls {
		go func() {
			res, err := Run(ctx, Config{
				URL: proc.URL + StrayPath, Rate: sc.Rate, Duration: cfg.Duration,
				Deadline: sc.Delay + StrayGrace, Arrival: Constant,
			})
			calls <- res
			callErr <- err
		}()
	}
	res, err := Run(ctx, rc)
	var callRes *Result
	if withCalls {
		callRes = <-calls
		err = errors.Join(err, <-callErr)
	}
	gen, tcpu, elapsed := selfCPU()-cpu0, proc.cpu()-tcpu0, time.Since(t0)
	err = errors.Join(err, proc.Stop())
	if res == nil {
		return nil, err
	}
	s = &Sample{
		Scenario: ScenarioStray, Shape: p.Shape.Name, Handler: p.Spec, Target: target,
		Repeat: repeat, Capacity: capacity, Multiple: p.Multiple, Placement: proc.Placement,
	}
	Fill(s, res)
	s.Server = proc.Stats
	if sec := elapsed.Seconds(); sec > 0 {
		s.TargetCPU = tcpu.Seconds() / sec
		s.GeneratorCPU = gen.Seconds() / sec
	}
	si := &StrayInfo{Part: p.Part, Delay: sc.Delay}
	if callRes != nil {
		si.Rate = sc.Rate
		var call Sample
		Fill(&call, callRes)
		si.Calls, si.CallLatency, si.CallsBehind = call.Rates, call.Latency, call.Behind
	}
	s.Stray = si
	return s, err
}
