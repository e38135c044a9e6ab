package attack

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// Options configure Run.
type Options struct {
	// Attacks to run; nil means All.
	Attacks []Attack
	// Targets to run them against, by name; nil means Targets().
	Targets []string
	// Duration is how long each attack runs against each target, with
	// the probes; zero means 5 s.
	Duration time.Duration
	// ProbeRate is the probes sent a second; zero means 50.
	ProbeRate int
	// Conns is Env.Conns for every attack: zero lets each keep its own
	// default (hundreds to a thousand connections).
	Conns int
	// Start starts a target: nil means Serve, in this process.
	Start func(ctx context.Context, target string, https bool) (*Server, error)
	// Log, when set, receives a line per run as it ends.
	Log io.Writer
}

// Result is one attack's run against one target.
type Result struct {
	Attack, Target string
	// Probe is what the probes got while the attack ran.
	Probe ProbeResult
	// CPU is the target's CPU time during the run, and PeakRSS its
	// largest resident memory seen; zero for a target in process.
	CPU     time.Duration
	PeakRSS int64
	// Found is what the attack found wrong with the target ("" for
	// nothing): a body limit passed, say.
	Found string
	// Counters is what the target counted (Server.Counters), if it says.
	Counters string
}

// settle is how long an attack runs before the probes start, so that
// the probes meet it in force, unless the attack sets its own
// (Attack.Settle).
const settle = 300 * time.Millisecond

// Run runs every attack against every target, one at a time, each on a
// fresh target, and returns their results in order (attack, then
// target). It stops early, with what it has, when ctx ends.
func Run(ctx context.Context, opts Options) ([]Result, error) {
	if opts.Attacks == nil {
		opts.Attacks = All()
	}
	if opts.Targets == nil {
		opts.Targets = Targets()
	}
	if opts.Duration <= 0 {
		opts.Duration = 5 * time.Second
	}
	if opts.ProbeRate <= 0 {
		opts.ProbeRate = 50
	}
	if opts.Start == nil {
		opts.Start = func(_ context.Context, target string, https bool) (*Server, error) { return Serve(target, https) }
	}
	var out []Result
	for _, a := range opts.Attacks {
		for _, target := range opts.Targets {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			r, err := runOne(ctx, opts, a, target)
			if err != nil {
				return out, fmt.Errorf("attack %s on %s: %w", a.Name, target, err)
			}
			out = append(out, r)
			if opts.Log != nil {
				fmt.Fprintf(opts.Log, "%-20s %-8s probes %d/%d ok (first failure: %s), p99 %v, CPU %v, peak RSS %d MiB %s %s\n",
					a.Name, target, r.Probe.OK, r.Probe.Sent, r.Probe.FirstError, r.Probe.P99.Round(time.Millisecond),
					r.CPU.Round(time.Millisecond), r.PeakRSS>>20, r.Found, r.Counters)
			}
		}
	}
	return out, nil
}

// runOne runs attack a against a fresh target.
func runOne(ctx context.Context, opts Options, a Attack, target string) (Result, error) {
	srv, err := opts.Start(ctx, target, a.TLS)
	if err != nil {
		return Result{}, err
	}
	env := Env{Addr: srv.Addr, Conns: opts.Conns, BodyLimit: BodyLimit}
	probes := env
	env.From = AttackerAddr
	if a.TLS {
		env.TLS = &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}
		probes.TLS = env.TLS
	}
	res := Result{Attack: a.Name, Target: target}
	var before Usage
	if srv.Usage != nil {
		if before, err = srv.Usage(); err != nil {
			return res, errors.Join(err, srv.Stop())
		}
	}

	actx, cancel := context.WithTimeout(ctx, opts.Duration)
	defer cancel()
	var wg sync.WaitGroup
	var found error
	wg.Go(func() { found = a.Run(actx, env) })
	if srv.Usage != nil {
		wg.Go(func() { res.PeakRSS = peakRSS(actx, srv.Usage) })
	}
	wait := settle
	if a.Settle > 0 {
		wait = a.Settle
	}
	sleep(actx, wait)
	path := a.ProbePath
	if path == "" {
		path = "/"
	}
	res.Probe = probe(actx, probes, path, opts.ProbeRate)
	wg.Wait()
	if found != nil {
		res.Found = found.Error()
	}
	if srv.Usage != nil {
		after, err := srv.Usage()
		if err != nil {
			return res, errors.Join(err, srv.Stop())
		}
		res.CPU = after.CPU - before.CPU
		res.PeakRSS = max(res.PeakRSS, after.RSS)
	}
	if err := srv.Stop(); err != nil {
		return res, err
	}
	if srv.Counters != nil {
		res.Counters = srv.Counters()
	}
	return res, nil
}

// peakRSS samples usage until ctx ends and returns the largest RSS seen.
func peakRSS(ctx context.Context, usage func() (Usage, error)) int64 {
	var peak int64
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if u, err := usage(); err == nil {
			peak = max(peak, u.RSS)
		}
		select {
		case <-ctx.Done():
			return peak
		case <-t.C:
		}
	}
}

// Verdict compares sluice's probes with net/http's under one attack.
type Verdict struct {
	Attack string
	// Sluice and NetHTTP are the two targets' results.
	Sluice, NetHTTP Result
	// OK is set when sluice's probes did at least as well as net/http's
	// (their success within Tolerance, or one probe) and the attack found
	// nothing wrong with sluice.
	OK bool
}

// Tolerance is how far below net/http's probe success sluice's may be
// and still count as doing as well (or one probe, when that is more): a
// probe lost to a busy machine.
const Tolerance = 0.02

// Verdicts pairs the results of Run by attack, for the attacks run
// against both sluice and nethttp.
func Verdicts(results []Result) []Verdict {
	var out []Verdict
	index := map[string]int{}
	for _, r := range results {
		i, ok := index[r.Attack]
		if !ok {
			i = len(out)
			index[r.Attack] = i
			out = append(out, Verdict{Attack: r.Attack})
		}
		v := &out[i]
		switch r.Target {
		case "sluice":
			v.Sluice = r
		case "nethttp":
			v.NetHTTP = r
		}
	}
	kept := out[:0]
	for _, v := range out {
		if v.Sluice.Target == "" || v.NetHTTP.Target == "" {
			continue
		}
		slack := Tolerance
		if n := v.Sluice.Probe.Sent; n > 0 {
			slack = max(slack, 1/float64(n))
		}
		v.OK = v.Sluice.Found == "" && v.Sluice.Probe.Success() >= v.NetHTTP.Probe.Success()-slack-1e-9
		kept = append(kept, v)
	}
	return kept
}
