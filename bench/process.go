package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/bench/attack"
	"github.com/sluice-go/sluice/examples/weather"
	"github.com/sluice-go/sluice/internal/selfsigned"
)

// ChildEnv is the environment variable that makes a program a target's
// child process: ServeChild, called first thing in main (or TestMain), sees
// it and serves the target it describes instead of running the program.
const ChildEnv = "SLUICE_BENCH_TARGET"

// ChildSpec is ChildEnv's value, as JSON.
type ChildSpec struct {
	Target  string      `json:"target"`
	Handler HandlerSpec `json:"handler"`
	// SpinRate is the rate of the handler's Spinner (weather.SpinnerAt):
	// a suite gives all its children the same (SuiteConfig.SpinRate), so
	// that the targets it compares do the same work per request. Zero:
	// the child measures its own.
	SpinRate float64 `json:"spin_rate,omitempty"`
	Nice     int     `json:"nice,omitempty"`
	// Probe, when positive, makes the child write a "probe" line (its
	// goroutines and heap, childProbe) every Probe while it serves, and
	// an "exit" line (ChildExit) after it stopped.
	Probe time.Duration `json:"probe,omitempty"`
	// Addr, when set, is the address the target listens on (to start a
	// killed target again on its address); LoadHint makes a sluice target
	// send the load hint (server.Config.LoadHint).
	Addr     string `json:"addr,omitempty"`
	LoadHint bool   `json:"load_hint,omitempty"`
	// TLS makes the target serve HTTPS with a throwaway certificate.
	TLS bool `json:"tls,omitempty"`
	// Quota, when set, runs the child in a CPU quota of its own (a
	// container's CPU limit), from its first instruction on.
	Quota *Quota `json:"quota,omitempty"`
	// Attack makes the child serve the attack suite's target
	// (attack.Serve) instead of the weather service.
	Attack bool `json:"attack,omitempty"`
	// Hook, when set, names the ChildHook that adds a scenario's
	// behaviour to the child, and HookConfig holds the hook's own
	// settings, as JSON (SetHook sets both; a hook without settings needs
	// Hook alone).
	Hook       string          `json:"hook,omitempty"`
	HookConfig json.RawMessage `json:"hook_config,omitempty"`
}

// TargetNice is the nice value of the targets' child processes. On a
// machine where the load generator and the target share the CPUs, an
// overloaded target would otherwise take CPU time the generator needs to
// keep its schedule, and the run would not count; at a lower priority the
// target gets all the CPU the generator leaves, which is what it gets in
// the calibration too.
const TargetNice = 10

// Spinner returns the Spinner for the child's CPU work: at SpinRate, or,
// without one, measured now (weather.NewSpinner).
func (cs ChildSpec) Spinner() *weather.Spinner { return weather.SpinnerFor(cs.SpinRate) }

// Options returns the weather service's options for the spec.
func (h HandlerSpec) Options() weather.Config {
	return weather.Config{CPU: h.CPU, DB: h.DB, Blocking: h.Blocking}
}

// ServeChild serves a target when the process was started as a target's
// child (ChildEnv is set), then exits the process: 0 after a clean stop, 1
// on an error (written to stderr). Without ChildEnv it returns at once and
// does nothing. Call it first thing in main, and in TestMain of a test
// binary that starts targets with the default launcher, with the hooks of
// the scenarios the program runs (scenario.ChildHooks): a child whose spec
// names a hook (ChildSpec.Hook) looks for it among them.
//
// With NeighbourEnv set instead, the process is a busy neighbour
// (Trial.StartNeighbour): it spins until its stdin ends or its time is
// up, then exits.
func ServeChild(hooks ...ChildHook) {
	if v := os.Getenv(NeighbourEnv); v != "" {
		if err := runNeighbour(v, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench neighbour:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	v := os.Getenv(ChildEnv)
	if v == "" {
		return
	}
	if err := serveChild(context.Background(), v, os.Stdin, os.Stdout, hooks); err != nil {
		fmt.Fprintln(os.Stderr, "bench target:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveChild starts the target described by spec, writes "listening URL"
// on out, and serves until in reaches its end (the parent closed it or
// died) or ctx ends. Then it stops the target and writes "stats JSON"
// (the target's counters, if it has any), "report JSON" when its hook
// reports, and, when probed, "exit JSON". The spec's hook is looked for
// among hooks.
func serveChild(ctx context.Context, spec string, in io.Reader, out io.Writer, hooks []ChildHook) error {
	var cs ChildSpec
	if err := json.Unmarshal([]byte(spec), &cs); err != nil {
		return fmt.Errorf("bad %s: %w", ChildEnv, err)
	}
	o := serveOptions{addr: cs.Addr, loadHint: cs.LoadHint, dashboard: os.Getenv(DashboardEnv)}
	if cs.TLS {
		cert, _, err := selfsigned.New()
		if err != nil {
			return err
		}
		o.tls = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	if _, ok := targetByName(cs.Target, o); !ok && cs.Hook == "" {
		return fmt.Errorf("unknown target %q", cs.Target)
	}
	opts := cs.Handler.Options()
	opts.SpinRate = cs.SpinRate
	h := weather.Handler(opts)
	part, err := openHook(cs, h, hooks)
	if err != nil {
		return err
	}
	if part != nil && part.Handler != nil {
		h = part.Handler
	}
	o.part = part
	t, ok := hookTarget(part, cs.Target)
	if !ok {
		if t, ok = targetByName(cs.Target, o); !ok {
			return errors.Join(fmt.Errorf("unknown target %q (neither package bench's nor child hook %s's)", cs.Target, cs.Hook), closePart(part))
		}
	}
	if cs.Nice != 0 {
		if err := renice(cs.Nice); err != nil {
			return errors.Join(err, closePart(part))
		}
	}
	var before census
	if cs.Probe > 0 {
		// Go's netpoller opens its descriptors on the first network
		// use: open them now, so that they are in the count taken
		// before the target starts as well as in the one after it
		// stopped.
		if l, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
			_ = l.Close()
		}
		before = takeCensus()
	}
	serve := t.Serve
	if cs.Attack {
		serve = func(http.Handler) (*Running, error) { return attackTarget(cs) }
	}
	rn, err := serve(h)
	if err != nil {
		return errors.Join(fmt.Errorf("start %s: %w", cs.Target, err), closePart(part))
	}
	// The target stops first, then the hook's part lets go of what it
	// holds, before the target's stats are read.
	stop := func() error { return errors.Join(rn.Stop(), closePart(part)) }
	if _, err := fmt.Fprintf(out, "listening %s\n", rn.URL); err != nil {
		return errors.Join(err, stop())
	}
	if rn.Admin != "" {
		if _, err := fmt.Fprintf(out, "admin %s\n", rn.Admin); err != nil {
			return errors.Join(err, stop())
		}
	}
	if rn.Placement != nil {
		js, err := json.Marshal(rn.Placement())
		if err == nil {
			_, err = fmt.Fprintf(out, "placement %s\n", js)
		}
		if err != nil {
			return errors.Join(fmt.Errorf("placement: %w", err), stop())
		}
	}
	stopProbe := func() {}
	if cs.Probe > 0 {
		stopProbe = startProbe(out, cs.Probe)
	}
	ended := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, in)
		close(ended)
	}()
	select {
	case <-ended:
	case <-ctx.Done():
	}
	stopProbe()
	stopped := time.Now()
	if err := stop(); err != nil {
		return err
	}
	if rn.Stats != nil {
		js, err := json.Marshal(rn.Stats())
		if err != nil {
			return fmt.Errorf("stats: %w", err)
		}
		if _, err := fmt.Fprintf(out, "stats %s\n", js); err != nil {
			return err
		}
	}
	if part != nil && part.Report != nil {
		js, err := json.Marshal(part.Report())
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		if _, err := fmt.Fprintf(out, "report %s\n", js); err != nil {
			return err
		}
	}
	if cs.Probe > 0 {
		js, err := json.Marshal(settle(before, stopped, childSettle))
		if err != nil {
			return fmt.Errorf("exit: %w", err)
		}
		if _, err := fmt.Fprintf(out, "exit %s\n", js); err != nil {
			return err
		}
	}
	return nil
}

// childSettle bounds the wait, after the target stopped, for its
// goroutines and descriptors to go back to their counts before it started.
const childSettle = 2 * time.Second

// census is a child's count of its own goroutines and open descriptors.
type census struct {
	goroutines, fds int
}

func takeCensus() census {
	return census{goroutines: runtime.NumGoroutine(), fds: countFDs("self")}
}

// settle waits up to limit for the counts to fall back to before and
// returns what they were when they did, or at the limit.
func settle(before census, stopped time.Time, limit time.Duration) ChildExit {
	deadline := time.Now().Add(limit)
	for {
		now := takeCensus()
		if (now.goroutines <= before.goroutines && now.fds <= before.fds) || time.Now().After(deadline) {
			return ChildExit{
				GoroutinesBefore: before.goroutines, GoroutinesAfter: now.goroutines,
				FDsBefore: before.fds, FDsAfter: now.fds,
				After: time.Since(stopped),
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ChildExit is what a probed child reports once its target has stopped:
// its goroutines and open descriptors before the target started and after
// it stopped. After is taken as soon as both are back at their counts
// before, or 2 s after the stop began if they never are.
type ChildExit struct {
	GoroutinesBefore int `json:"goroutines_before"`
	GoroutinesAfter  int `json:"goroutines_after"`
	FDsBefore        int `json:"fds_before"`
	FDsAfter         int `json:"fds_after"`
	// After is the time from the beginning of the target's stop to the
	// second count.
	After time.Duration `json:"after"`
}

// childProbe is a child's report on itself while it serves.
type childProbe struct {
	Goroutines int    `json:"goroutines"`
	HeapBytes  uint64 `json:"heap_bytes"`
}

// startProbe writes "probe JSON" (a childProbe) on out every interval,
// the first at once, until the returned function is called; that function
// returns once the probe has stopped writing.
func startProbe(out io.Writer, interval time.Duration) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		heap := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			p := childProbe{Goroutines: runtime.NumGoroutine()}
			metrics.Read(heap)
			if heap[0].Value.Kind() == metrics.KindUint64 {
				p.HeapBytes = heap[0].Value.Uint64()
			}
			js, _ := json.Marshal(p)
			if _, err := fmt.Fprintf(out, "probe %s\n", js); err != nil {
				return
			}
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// attackTarget serves the attack suite's target named by cs: its stats are
// what the target counted (attack.Server.Counters), as a JSON string.
func attackTarget(cs ChildSpec) (*Running, error) {
	srv, err := attack.Serve(cs.Target, cs.TLS)
	if err != nil {
		return nil, err
	}
	rn := &Running{URL: "tcp://" + srv.Addr, Stop: srv.Stop}
	if srv.Counters != nil {
		rn.Stats = func() any { return srv.Counters() }
	}
	return rn, nil
}

// StartAttackTarget starts the attack suite's named target (attack.Serve),
// over TLS when https is set, in a child process made by launch (nil: this
// executable), and returns it as the suite runs it: Usage reads the
// child's CPU time and memory, and Counters what it counted, once stopped.
func StartAttackTarget(ctx context.Context, launch Launcher, target string, https bool) (*attack.Server, error) {
	p, err := startChild(ctx, launch, ChildSpec{Target: target, Attack: true, TLS: https}, nil)
	if err != nil {
		return nil, err
	}
	pid := p.pid()
	return &attack.Server{
		Addr: strings.TrimPrefix(p.URL, "tcp://"),
		Usage: func() (attack.Usage, error) {
			rss, _, err := procStatus(pid)
			return attack.Usage{CPU: processCPU(pid), RSS: rss}, err
		},
		Counters: func() string {
			var s string
			_ = json.Unmarshal(p.Stats, &s)
			return s
		},
		Stop: p.Stop,
	}, nil
}

// Launcher returns the command that runs the program as a target's child:
// the program must call ServeChild first; the returned command's
// environment needs ChildEnv, which StartProcess adds. Nil means the running
// executable itself (os.Executable) with no arguments.
type Launcher func() (*exec.Cmd, error)

func selfLauncher() (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench: find own executable: %w", err)
	}
	return exec.Command(exe), nil
}

// Process is a target served by a child process, so that the target and
// the load generator do not share a Go runtime (scheduler, GC, GOMAXPROCS)
// and the target starts fresh for every measurement.
type Process struct {
	// URL is the target's base URL.
	URL string
	// Stats is the target's counters as JSON, reported when it stopped
	// (nil for a target without any, or before Stop).
	Stats json.RawMessage
	// Exit is what a probed child (ChildSpec.Probe) reported after
	// its target stopped; nil before Stop, or when it reported nothing.
	Exit *ChildExit
	// Placement is where a sluice target's workers run, as the child
	// reported it once it listened; nil for other targets (read it after
	// Stop).
	Placement *Placement
	// Report is what the child's hook reported once its target had
	// stopped (ChildPart.Report), as JSON; nil before Stop and for a
	// child whose hook reports nothing.
	Report json.RawMessage
	// Throttled is what the child's CPU quota (ChildSpec.Quota) did to it
	// over its life; nil before Stop and for a child without a quota.
	Throttled *Throttled

	cmd   *exec.Cmd
	quota *quotaGroup // the child's cgroup, nil without a quota
	stdin io.WriteCloser
	done  chan error
	errb  *strings.Builder
	probe atomic.Pointer[probeReading] // the latest probe line
	admin atomic.Pointer[string]       // the admin line's URL
}

// AdminURL returns the URL of the endpoint the child serves beside its
// target (Running.Admin), as it reported it after its address; "" when it
// reported none (yet).
func (p *Process) AdminURL() string {
	if u := p.admin.Load(); u != nil {
		return *u
	}
	return ""
}

// probeReading is a probe line and when it was read.
type probeReading struct {
	childProbe
	at time.Time
}

// processStartTimeout bounds the wait for a child's "listening" line.
const processStartTimeout = 30 * time.Second

// StartProcess starts the named target serving the weather handler shaped
// by spec in a child process made by launch (nil: this executable), and
// returns once it listens. Stop ends it.
func StartProcess(ctx context.Context, launch Launcher, target string, spec HandlerSpec) (*Process, error) {
	return startProcess(ctx, launch, target, spec, nil)
}

// startProcess is StartProcess with the child restricted to cpus (none:
// the parent's CPUs).
func startProcess(ctx context.Context, launch Launcher, target string, spec HandlerSpec, cpus []int) (*Process, error) {
	return startChild(ctx, launch, ChildSpec{Target: target, Handler: spec, Nice: TargetNice}, cpus)
}

// startChild starts the child cs describes on cpus (none: the parent's
// CPUs) and returns once it listens.
func startChild(ctx context.Context, launch Launcher, cs ChildSpec, cpus []int) (*Process, error) {
	target := cs.Target
	if _, ok := TargetByName(target); !ok && cs.Hook == "" {
		// A child with a hook may serve a target of the hook's own
		// (ChildPart.Targets): the child checks that one.
		return nil, fmt.Errorf("bench: unknown target %q", target)
	}
	if launch == nil {
		launch = selfLauncher
	}
	cmd, err := launch()
	if err != nil {
		return nil, err
	}
	js, err := json.Marshal(cs)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	cmd.Env = append(append(os.Environ(), cmd.Env...), ChildEnv+"="+string(js))
	p := &Process{cmd: cmd, done: make(chan error, 1), errb: new(strings.Builder)}
	cmd.Stderr = &limitedWriter{b: p.errb, n: 4096}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if cs.Quota != nil {
		if p.quota, err = newQuotaGroup(*cs.Quota); err != nil {
			return nil, err
		}
		if err := p.quota.wrap(cmd); err != nil {
			return nil, errors.Join(err, p.quota.remove())
		}
	}
	if err := startOn(cmd, cpus); err != nil {
		err = fmt.Errorf("bench: start target %s: %w", target, err)
		if p.quota != nil {
			err = errors.Join(err, p.quota.remove())
		}
		return nil, err
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 4096), 1<<20)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		// Read the rest (the stats at the end) so that the child never
		// blocks on a full pipe.
		for sc.Scan() {
			p.readLine(sc.Text())
		}
		_, _ = io.Copy(io.Discard, stdout)
		err := cmd.Wait()
		if p.quota != nil {
			err = errors.Join(err, p.endQuota())
		}
		p.done <- err
	}()
	fail := func(err error) (*Process, error) {
		_ = cmd.Process.Kill()
		werr := <-p.done
		return nil, fmt.Errorf("bench: target %s: %w (exit: %v; stderr: %q)", target, err, werr, p.errb.String())
	}
	timer := time.NewTimer(processStartTimeout)
	defer timer.Stop()
	select {
	case line, ok := <-lines:
		url, found := strings.CutPrefix(line, "listening ")
		if !ok || !found {
			return fail(errors.New("did not report its address"))
		}
		p.URL = url
		return p, nil
	case <-timer.C:
		return fail(errors.New("not listening in time"))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
}

// readLine takes in a line the child wrote after its address.
func (p *Process) readLine(line string) {
	kind, js, _ := strings.Cut(line, " ")
	switch kind {
	case "stats":
		if json.Valid([]byte(js)) {
			p.Stats = json.RawMessage(js)
		}
	case "probe":
		var r probeReading
		if json.Unmarshal([]byte(js), &r.childProbe) == nil {
			r.at = time.Now()
			p.probe.Store(&r)
		}
	case "exit":
		var e ChildExit
		if json.Unmarshal([]byte(js), &e) == nil {
			p.Exit = &e
		}
	case "report":
		if json.Valid([]byte(js)) {
			p.Report = json.RawMessage(js)
		}
	case "admin":
		if js != "" {
			p.admin.Store(&js)
		}
	case "placement":
		var pl Placement
		if json.Unmarshal([]byte(js), &pl) == nil {
			p.Placement = &pl
		}
	}
}

// Throttled is what a CPU quota did to a child (Process.Throttled): the
// kernel's throttling counters of its cgroup over the child's life.
type Throttled struct {
	// Quota is the child's quota.
	Quota Quota `json:"quota"`
	// Periods is the number of the quota's periods in which the child was
	// throttled; Time how long it was held off the CPU in all.
	Periods int64         `json:"periods"`
	Time    time.Duration `json:"time"`
}

// endQuota records what the quota did to the child, which has exited, and
// removes its cgroup.
func (p *Process) endQuota() error {
	t, err := p.quota.throttling()
	if err == nil {
		p.Throttled = &Throttled{Quota: p.quota.quota, Periods: t.Periods, Time: t.Time}
	}
	return errors.Join(err, p.quota.remove())
}

// pid returns the child's process id.
func (p *Process) pid() int { return p.cmd.Process.Pid }

// cpu returns the CPU time the child has used so far, or 0 if unknown.
func (p *Process) cpu() time.Duration { return processCPU(p.cmd.Process.Pid) }

// Stop asks the child to stop (closing its stdin), waits up to 15 s for it
// to exit, kills it past that, and reports how it ended.
func (p *Process) Stop() error {
	_ = p.stdin.Close()
	timer := time.NewTimer(15 * time.Second)
	defer timer.Stop()
	select {
	case err := <-p.done:
		if err != nil {
			return fmt.Errorf("bench: target exit: %w (stderr: %q)", err, p.errb.String())
		}
		return nil
	case <-timer.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		return errors.New("bench: target did not stop within 15 s; killed")
	}
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	b *strings.Builder
	n int
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if rest := w.n - w.b.Len(); rest > 0 {
		w.b.Write(p[:min(len(p), rest)])
	}
	return len(p), nil
}
