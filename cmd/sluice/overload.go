package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
	"github.com/sluice-go/sluice/bench/scenario"
)

// suiteFlags are the flags demo and bench share; their defaults differ.
type suiteFlags struct {
	cfg       bench.SuiteConfig
	targets   string
	scenarios string
	cpu, db   time.Duration
	blocking  bool
	out       string
	progress  string
	// cpus is "split" or "shared"; targetCPUs and genCPUs are CPU lists
	// ("1", "0-7") that replace the automatic split.
	cpus, targetCPUs, genCPUs string
	// soak, when set, makes the flags those of the soak command: -duration,
	// -x and the chaos are this soak's, and there is no -scenarios.
	soak *scenario.Soak
	// chaos is the soak's chaos clients, "kind=n,..." or "none".
	chaos string
	// client is the generator's client modes, "reconnect,keep"; empty
	// for the default (reconnect) with samples that name no mode.
	client string
	// dashboard is the address the sluice targets serve their live
	// dashboard on while they run; empty for none.
	dashboard string
	// all are the scenarios -scenarios chooses from (scenario.All), with
	// the settings their own flags give them.
	all []bench.Scenario
}

func (f *suiteFlags) register(fs *flag.FlagSet) {
	c := &f.cfg
	if so := f.soak; so != nil {
		fs.DurationVar(&so.Duration, "duration", so.Duration, "sending window of the soak, a whole number of seconds")
		fs.Float64Var(&so.Multiple, "x", so.Multiple, "offered load, in multiples of each target's capacity")
		fs.DurationVar(&so.Settle, "settle", so.Settle, "when goroutines, fds and memory must have stopped growing (0: 10s, or a third of a -duration under 30s)")
		fs.IntVar(&so.PanicEvery, "panic-every", so.PanicEvery, "the handler panics on every n-th request (100: 1%; negative: never)")
		fs.StringVar(&f.chaos, "chaos", formatMix(scenario.DefaultChaosMix()), "chaos clients alongside the load, kind=count for slowloris, noread, reset, garbage, flood (none: no chaos)")
		fs.Float64Var(&so.Rules.MinGoodput, "min-goodput", scenario.DefaultSoakRules().MinGoodput, "the goodput check: every second at least this fraction of C (CI, on a shared machine, asks less)")
	} else {
		fs.DurationVar(&c.Duration, "duration", c.Duration, "sending window of each measured point")
		fs.StringVar(&f.scenarios, "scenarios", f.scenarios, scenario.Usage())
		fs.IntVar(&c.Conns, "conns", 0, "the load generator's connection pool in the sweep, shapes, slowdown, mix and step scenarios (0: the requests that can be in flight within the deadline, at most 2048)")
		fs.IntVar(&c.Clients, "clients", 0, "in the sweep, shapes, slowdown and step scenarios: the load of this many clients with one kept-alive connection each (request i is client i mod n's, sent once its previous answer is in), and the tables show how alike they were served (Jain's index, the share that got nothing); 0: the generator's pool")
		fs.BoolVar(&c.TLS, "tls", false, "serve every target over HTTPS (a throwaway certificate) and send over TLS, in the sweep, shapes, slowdown, mix and step scenarios")
		fs.BoolVar(&c.NewConns, "newconns", false, "send every request, in the capacity measurement too, on a new connection of its own (with -tls, a full handshake each), in the sweep, shapes, slowdown and step scenarios")
		fs.StringVar(&f.client, "client", "", "the load generator's client modes for the sweep and shapes, comma-separated, each point run under each in turn: reconnect (a request past its deadline closes its connection, the next opens a new one, as net/http's Transport; the default) and keep (the connection waits for the late answer and is reused); the tables then show the mode and the connections opened per second")
		for _, sc := range f.all {
			if fl, ok := sc.(scenario.Flagger); ok {
				fl.Flags(fs)
			}
		}
	}
	fs.IntVar(&c.Repeats, "repeats", c.Repeats, "repeats; targets alternate within each, medians are reported")
	fs.StringVar(&f.targets, "targets", f.targets, "comma-separated targets: sluice, nethttp, semaphore, sluice-half, gosched, sluice-pinned, sluice-half-pinned, sluice-nohold (never holds the clients that resend at once); for the shed scenario, sluice-busy (the busy gate alone), sluice-cpu (loadshed's CPU shedding alone); for the grpc scenario, "+scenario.TargetGRPCGo+" (grpc-go's own server)")
	fs.DurationVar(&f.cpu, "cpu", f.cpu, "CPU work per request of the weather handler")
	fs.DurationVar(&f.db, "db", f.db, "simulated database wait per request (awaited: releases the sluice worker)")
	fs.BoolVar(&f.blocking, "blocking", f.blocking, "make the database wait block the worker (the isolated model)")
	fs.DurationVar(&c.Deadline, "deadline", c.Deadline, "client deadline: an answer later than this counts as failed")
	fs.DurationVar(&c.Calibrate.Duration, "calibrate", c.Calibrate.Duration, "capacity measurement per target and closed-loop concurrency (16, 32, 64, 128 connections; C is the best)")
	fs.DurationVar(&c.Calibrate.Warmup, "warmup", c.Calibrate.Warmup, "warm-up before each capacity measurement")
	fs.BoolVar(&c.Constant, "constant", c.Constant, "constant gaps between requests instead of Poisson arrivals")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the Poisson arrivals")
	fs.StringVar(&f.cpus, "cpus", "split", "split: the load generator on CPUs of its own (the first quarter, at least one; none to split on 1 CPU), the targets on the rest; shared: both on every CPU")
	fs.Func("quota", "run every target in a CPU quota of its own, as a container's CPU limit: CPUs[/period], for example 0.5 (500m, 100ms periods) or 1.5/10ms; needs Linux and root (a cgroup of its own)", func(v string) error {
		q, err := bench.ParseQuota(v)
		c.Quota = &q
		return err
	})
	fs.StringVar(&f.targetCPUs, "target-cpus", "", "with -generator-cpus, the CPU list the targets run on (for example 1, or 4-15) instead of the automatic split")
	fs.StringVar(&f.genCPUs, "generator-cpus", "", "with -target-cpus, the CPU list the load generator runs on (for example 0, or 0-3)")
	fs.StringVar(&f.out, "out", f.out, "directory for report.json and the plots (empty: a new temporary directory)")
	fs.StringVar(&f.progress, "progress", "auto", "progress on stderr: auto (a bar on a terminal, else one line per step), on (the bar), lines (one line per step), off")
	fs.StringVar(&f.dashboard, "dashboard", "", "serve the live dashboard of each sluice target on this address while it runs, at "+bench.DashboardPath+" (for example localhost:8090)")
}

// finish checks the flags and completes the suite's configuration.
func (f *suiteFlags) finish(cmd string, args []string) error {
	c := &f.cfg
	switch {
	case c.Duration <= 0 || c.Duration > time.Hour:
		return fmt.Errorf("-duration must be in (0, 1h], got %v", c.Duration)
	case c.Repeats < 1 || c.Repeats > 100:
		return fmt.Errorf("-repeats must be in [1, 100], got %d", c.Repeats)
	case c.Deadline <= 0 || c.Deadline > time.Minute:
		return fmt.Errorf("-deadline must be in (0, 1m], got %v", c.Deadline)
	case c.Calibrate.Duration <= 0 || c.Calibrate.Warmup < 0:
		return fmt.Errorf("-calibrate must be positive and -warmup not negative")
	case f.cpu < 0 || f.cpu > time.Second || f.db < 0 || f.db > 10*time.Second:
		return fmt.Errorf("-cpu must be in [0, 1s] and -db in [0, 10s]")
	case f.cpu == 0 && f.db == 0:
		return errors.New("-cpu and -db are both zero: the handler would do no work")
	case f.progress != "auto" && f.progress != "on" && f.progress != "lines" && f.progress != "off":
		return fmt.Errorf("-progress must be auto, on, lines or off, got %q", f.progress)
	}
	c.Targets = splitList(f.targets)
	names := splitList(f.scenarios)
	if so := f.soak; so != nil {
		if so.Duration <= 0 || so.Duration > time.Hour || so.Duration%time.Second != 0 {
			return fmt.Errorf("-duration must be a whole number of seconds in (0, 1h], got %v", so.Duration)
		}
		if !(so.Multiple > 0) || so.Multiple > 1000 {
			return fmt.Errorf("-x must be in (0, 1000], got %v", so.Multiple)
		}
		if so.Settle < 0 || so.Settle > so.Duration {
			return fmt.Errorf("-settle must be in [0, -duration], got %v", so.Settle)
		}
		if !(so.Rules.MinGoodput > 0) || so.Rules.MinGoodput > 1 {
			return fmt.Errorf("-min-goodput must be in (0, 1], got %v", so.Rules.MinGoodput)
		}
		mix, err := parseMix(f.chaos)
		if err != nil {
			return fmt.Errorf("-chaos: %w", err)
		}
		so.Chaos = &mix
		names = []string{so.Name()}
	} else {
		switch {
		case c.Conns < 0 || c.Conns > 65536:
			return fmt.Errorf("-conns must be in [0, 65536], got %d", c.Conns)
		case c.Clients < 0 || c.Clients > 65536:
			return fmt.Errorf("-clients must be in [0, 65536], got %d", c.Clients)
		}
	}
	var err error
	if c.Scenarios, err = scenario.Select(f.all, names); err != nil {
		return fmt.Errorf("-scenarios: %w", err)
	}
	if c.ClientModes, err = parseClientModes(f.client); err != nil {
		return err
	}
	if err := f.splitCPUs(); err != nil {
		return err
	}
	name := "io"
	switch {
	case f.blocking:
		name = "blocking"
	case f.db == 0:
		name = "cpu"
	}
	c.Shape = bench.Shape{Name: name, Spec: bench.HandlerSpec{CPU: f.cpu, DB: f.db, Blocking: f.blocking}}
	c.Command = strings.Join(append([]string{"go run ./cmd/sluice", cmd}, args...), " ")
	if f.dashboard != "" {
		if err := checkDashboard(f.dashboard, names); err != nil {
			return err
		}
		c.Launch = bench.DashboardLauncher(c.Launch, f.dashboard)
	}
	return nil
}

// parseClientModes reads -client: client modes, comma-separated, each once;
// none for an empty list.
func parseClientModes(list string) ([]load.ClientMode, error) {
	var modes []load.ClientMode
	for _, name := range splitList(list) {
		m, err := load.ParseClientMode(name)
		if err != nil {
			return nil, fmt.Errorf("-client: %q is not a mode: reconnect or keep", name)
		}
		if slices.Contains(modes, m) {
			return nil, fmt.Errorf("-client: %s named twice", name)
		}
		modes = append(modes, m)
	}
	return modes, nil
}

// splitCPUs sets the suite's CPU split from -cpus, -target-cpus and
// -generator-cpus.
func (f *suiteFlags) splitCPUs() error {
	c := &f.cfg
	if (f.targetCPUs == "") != (f.genCPUs == "") {
		return errors.New("-target-cpus and -generator-cpus go together: set both or neither")
	}
	var err error
	switch {
	case f.cpus != "split" && f.cpus != "shared":
		return fmt.Errorf("-cpus must be split or shared, got %q", f.cpus)
	case f.cpus == "shared" && f.targetCPUs != "":
		return errors.New("-cpus shared takes no -target-cpus or -generator-cpus")
	case f.cpus == "shared":
		c.TargetCPUs, c.GeneratorCPUs = nil, nil
	case f.targetCPUs == "":
		c.TargetCPUs, c.GeneratorCPUs, err = bench.SplitCPUs()
	default:
		if c.TargetCPUs, err = bench.ParseCPUList(f.targetCPUs); err != nil {
			return fmt.Errorf("-target-cpus: %w", err)
		}
		if c.GeneratorCPUs, err = bench.ParseCPUList(f.genCPUs); err != nil {
			return fmt.Errorf("-generator-cpus: %w", err)
		}
	}
	return err
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// demo is the README's first command: sluice against net/http at 2x and 5x
// of each one's capacity, about a minute of load, no services needed.
func demo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newSuiteFlags(8*time.Second, 1, "sluice,nethttp", "sweep", []float64{2, 5})
	return runSuiteCommand(ctx, "demo", f, args, stdout, stderr)
}

// benchCmd runs the whole overload benchmark (about 20 minutes).
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newSuiteFlags(3*time.Second, 3, "sluice,nethttp,semaphore,sluice-half",
		strings.Join(scenario.Default(), ","), nil)
	return runSuiteCommand(ctx, "bench", f, args, stdout, stderr)
}

// newSuiteFlags returns the flags' defaults of a command: what differs
// between demo and bench is given (multiples are the sweep's, nil for its
// default), the rest is common.
func newSuiteFlags(duration time.Duration, repeats int, targets, scenarios string, multiples []float64) *suiteFlags {
	all := scenario.All()
	for _, sc := range all {
		if sw, ok := sc.(*scenario.Sweep); ok {
			sw.Multiples = multiples
		}
	}
	return &suiteFlags{
		cfg: bench.SuiteConfig{
			Duration: duration,
			Repeats:  repeats,
			Deadline: load.DefaultDeadline,
			Calibrate: load.CalibrateConfig{
				Warmup:   300 * time.Millisecond,
				Duration: time.Second,
			},
		},
		targets:   targets,
		scenarios: scenarios,
		all:       all,
		cpu:       bench.ShapeIO.Spec.CPU,
		db:        bench.ShapeIO.Spec.DB,
	}
}

func runSuiteCommand(ctx context.Context, name string, f *suiteFlags, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	describe(fs, stderr)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := f.finish(name, args); err != nil {
		return err
	}
	if f.dashboard != "" {
		fmt.Fprintf(stderr, "dashboard: %s (each sluice target's, while it runs)\n", dashboardURL(f.dashboard))
	}
	out := f.out
	if out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
	}

	stop := startProgress(&f.cfg, f.progress, name, stderr)
	rep, err := bench.RunSuite(ctx, f.cfg)
	stop()
	if rep == nil {
		return err // nothing ran: no directory made
	}
	if out == "" {
		d, derr := os.MkdirTemp("", "sluice-"+name+"-")
		if derr != nil {
			return errors.Join(err, derr)
		}
		out = d
	}
	fmt.Fprintln(stdout)
	return errors.Join(err, saveAndPrintReport(stdout, rep, out, f.all))
}

// startProgress reports the suite's progress on stderr while it runs;
// the returned function ends the report. Mode "on" shows a progress bar,
// moving with the clock between the suite's reports; "lines" writes one
// plain line per step instead (see progressLines), for a log or a file;
// "auto" shows the bar when stderr is a terminal and the lines otherwise;
// "off" shows nothing. name is the command, which prefixes the lines.
func startProgress(cfg *bench.SuiteConfig, mode, name string, stderr io.Writer) func() {
	switch mode {
	case "off":
		return func() {}
	case "lines":
		return progressLines(cfg, name, stderr)
	case "auto":
		if !isTerminal(stderr) {
			return progressLines(cfg, name, stderr)
		}
	}
	return progressBar(cfg, stderr)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progressLines makes the suite write one line to w when it starts and
// one per step, as "sluice demo: [ 38%] repeat 1/1, io, nethttp: sweep
// 5x" (the share of the planned time done, and what runs now); the
// returned function writes the last line, with the time taken.
func progressLines(cfg *bench.SuiteConfig, name string, w io.Writer) func() {
	var (
		mu          sync.Mutex
		started     time.Time
		last        string
		done, total time.Duration
	)
	cfg.Progress = func(d, tot time.Duration, now string) {
		mu.Lock()
		defer mu.Unlock()
		if started.IsZero() {
			started = time.Now()
			fmt.Fprintf(w, "sluice %s: about %v of measurements planned, one line per step\n", name, tot.Round(time.Second))
		}
		done, total = d, tot
		// Each step is reported as it starts and again as it ends.
		if now == last {
			return
		}
		last = now
		fmt.Fprintf(w, "sluice %s: [%3.0f%%] %s\n", name, percent(d, tot), now)
	}
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if started.IsZero() {
			return
		}
		took := time.Since(started).Round(time.Second)
		if done >= total {
			fmt.Fprintf(w, "sluice %s: [100%%] done in %v\n", name, took)
		} else {
			fmt.Fprintf(w, "sluice %s: [%3.0f%%] stopped after %v\n", name, percent(done, total), took)
		}
	}
}

// percent returns done as a percentage of total (0 when total is not
// positive).
func percent(done, total time.Duration) float64 {
	if total <= 0 {
		return 0
	}
	return 100 * float64(done) / float64(total)
}

// progressBar shows a progress bar on w while the suite runs, moving with
// the clock between the suite's reports; the returned function fills and
// ends it.
func progressBar(cfg *bench.SuiteConfig, stderr io.Writer) func() {
	var (
		mu       sync.Mutex
		bar      *progressbar.ProgressBar
		lastDone time.Duration
		lastAt   time.Time
		total    time.Duration
		shown    time.Duration // never moves back
	)
	show := func(d time.Duration) {
		if d > shown {
			shown = d
			_ = bar.Set64(d.Milliseconds())
		}
	}
	cfg.Progress = func(done, tot time.Duration, now string) {
		mu.Lock()
		defer mu.Unlock()
		if bar == nil {
			total = tot
			bar = progressbar.NewOptions64(tot.Milliseconds(),
				progressbar.OptionSetWriter(stderr),
				progressbar.OptionSetWidth(30),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionShowDescriptionAtLineEnd(),
				progressbar.OptionThrottle(100*time.Millisecond),
			)
		}
		lastDone, lastAt = done, time.Now()
		bar.Describe(now)
		show(done)
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				mu.Lock()
				if bar != nil {
					show(min(lastDone+time.Since(lastAt), total))
				}
				mu.Unlock()
			}
		}
	}()
	return func() {
		close(quit)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if bar != nil {
			_ = bar.Finish()
			fmt.Fprintln(stderr)
		}
	}
}
