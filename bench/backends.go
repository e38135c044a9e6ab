package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/sluice-go/sluice/bench/load"
)

// restartTries bounds the attempts to start a killed backend again on its
// address (another socket may hold the port for a moment), restartPause
// the wait between them.
const (
	restartTries = 10
	restartPause = 100 * time.Millisecond
)

// Backends are target processes started together for one run, each a
// child serving a handler of its own on its share of the target CPUs: the
// cluster and tenants scenarios' servers. Start them with
// SuiteConfig.StartBackends and stop them with Stop, whose counters Stats
// then returns.
type Backends struct {
	launch   Launcher
	procs    []*Process  // nil once stopped or killed
	children []ChildSpec // what each backend's child serves, and how
	cpus     [][]int
	stats    []json.RawMessage // each backend's counters, once stopped
	throttle []*Throttled      // what each one's quota did, once stopped
}

// backendCPUs returns the CPUs of backend i of n: disjoint sets when cpus
// has n or more, else all of cpus (none: the parent's CPUs).
func backendCPUs(cpus []int, n, i int) []int {
	if len(cpus) < n {
		return cpus
	}
	return cpus[i*len(cpus)/n : (i+1)*len(cpus)/n]
}

// StartBackends starts one backend per handler of specs, each the child
// process that spec describes serving that handler (spec.Handler is
// replaced), on its share of the target CPUs: disjoint sets when there are
// at least as many CPUs as backends, else all of them for each. It returns
// once every backend listens; on an error it stops those it started.
func (cfg *SuiteConfig) StartBackends(ctx context.Context, spec ChildSpec, specs []HandlerSpec) (*Backends, error) {
	children := make([]ChildSpec, len(specs))
	for i, h := range specs {
		children[i] = spec
		children[i].Handler = h
	}
	return cfg.StartChildren(ctx, children)
}

// StartChildren is StartBackends with each backend's child described
// whole: its handler, and what else differs from one backend to the next
// (a CPU quota of its own, ChildSpec.Quota).
func (cfg *SuiteConfig) StartChildren(ctx context.Context, children []ChildSpec) (*Backends, error) {
	b := &Backends{launch: cfg.Launch}
	for i, cs := range children {
		cs = cfg.spun(cs) // kept as started, for a restart
		cpus := backendCPUs(cfg.TargetCPUs, len(children), i)
		p, err := startChild(ctx, cfg.Launch, cs, cpus)
		if err != nil {
			return nil, errors.Join(err, b.Stop())
		}
		b.procs = append(b.procs, p)
		b.children = append(b.children, cs)
		b.cpus = append(b.cpus, cpus)
		b.stats = append(b.stats, nil)
		b.throttle = append(b.throttle, nil)
	}
	return b, nil
}

// URLs returns the backends' base URLs, in the order of their handlers.
func (b *Backends) URLs() []string {
	var out []string
	for _, p := range b.procs {
		out = append(out, p.URL)
	}
	return out
}

// Handlers returns what each backend serves, in order.
func (b *Backends) Handlers() []HandlerSpec {
	hs := make([]HandlerSpec, len(b.children))
	for i, cs := range b.children {
		hs[i] = cs.Handler
	}
	return hs
}

// CPU returns the CPU time the running backends have used so far.
func (b *Backends) CPU() time.Duration {
	var t time.Duration
	for _, p := range b.procs {
		if p != nil {
			t += p.cpu()
		}
	}
	return t
}

// Stop stops every backend still running, and keeps their counters for
// Stats.
func (b *Backends) Stop() error {
	var err error
	for i, p := range b.procs {
		if p != nil {
			err = errors.Join(err, p.Stop())
			b.stats[i], b.throttle[i], b.procs[i] = p.Stats, p.Throttled, nil
		}
	}
	return err
}

// Stats returns each backend's own counters, as it reported them when
// Stop stopped it; nil for one not stopped that way (a killed one).
func (b *Backends) Stats() []json.RawMessage { return b.stats }

// Throttled returns what each backend's CPU quota did to it, as Stop found
// it; nil for one without a quota or not stopped that way.
func (b *Backends) Throttled() []*Throttled { return b.throttle }

// Kill kills backend i with SIGKILL and waits for it to be gone; Restart
// brings it back.
func (b *Backends) Kill(i int) error {
	p := b.procs[i]
	b.procs[i] = nil
	if err := p.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("bench: kill backend %d: %w", i, err)
	}
	<-p.done
	return nil
}

// Restart starts backend i again, serving what it served, on the address
// of rawURL (its URL before Kill), trying again for a while if the port is
// held.
func (b *Backends) Restart(ctx context.Context, i int, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("bench: restart backend %d: %w", i, err)
	}
	cs := b.children[i]
	cs.Addr = u.Host
	var errs error
	for range restartTries {
		p, err := startChild(ctx, b.launch, cs, b.cpus[i])
		if err == nil {
			b.procs[i] = p
			return nil
		}
		errs = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(restartPause):
		}
	}
	return fmt.Errorf("bench: restart backend %d on %s: %w", i, u.Host, errs)
}

// CalibrateBackends measures the capacity of b's backends together, and
// stops them: a closed loop on each backend at the same time, at each of
// CalibrateConns per backend in turn, the capacity being the best sum of
// their goodputs; and the CPU time the backends used per second
// meanwhile.
func (cfg *SuiteConfig) CalibrateBackends(ctx context.Context, target string, b *Backends) (capacity, cpu float64, err error) {
	cc := cfg.Calibrate
	for _, n := range cfg.CalibrateConns {
		cc.Conns = n
		cals := make([]load.Calibration, len(b.procs))
		errs := make([]error, len(b.procs))
		m := b.MeterCPU()
		var wg sync.WaitGroup
		for i, p := range b.procs {
			c := cc
			c.URL = p.URL + WeatherPath
			wg.Go(func() { cals[i], errs[i] = load.Calibrate(ctx, c) })
		}
		wg.Wait()
		tcpu, _, _ := m.Read()
		if err = errors.Join(errs...); err != nil {
			break
		}
		var sum float64
		for _, c := range cals {
			sum += c.Goodput
		}
		if sum > capacity {
			capacity, cpu = sum, tcpu
		}
	}
	err = errors.Join(err, b.Stop())
	if err != nil {
		return 0, 0, fmt.Errorf("bench: calibrate the %s backends: %w", target, err)
	}
	if capacity <= 0 {
		return 0, 0, fmt.Errorf("bench: calibrate the %s backends: no request succeeded", target)
	}
	return capacity, cpu, nil
}
