package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/sluice-go/sluice/examples/weather"
)

// ChildEnv is the environment variable that makes a program a target's
// child process: ServeChild, called first thing in main (or TestMain), sees
// it and serves the target it describes instead of running the program.
const ChildEnv = "SLUICE_BENCH_TARGET"

// childSpec is ChildEnv's value, as JSON.
type childSpec struct {
	Target  string      `json:"target"`
	Handler HandlerSpec `json:"handler"`
	Nice    int         `json:"nice,omitempty"`
}

// TargetNice is the nice value of the targets' child processes. On a
// machine where the load generator and the target share the CPUs, an
// overloaded target would otherwise take CPU time the generator needs to
// keep its schedule, and the run would not count; at a lower priority the
// target gets all the CPU the generator leaves, which is what it gets in
// the calibration too.
const TargetNice = 10

// Options returns the weather service's options for the spec.
func (h HandlerSpec) Options() weather.Options {
	return weather.Options{CPU: h.CPU, DB: h.DB, Blocking: h.Blocking}
}

// ServeChild serves a target when the process was started as a target's
// child (ChildEnv is set), then exits the process: 0 after a clean stop, 1
// on an error (written to stderr). Without ChildEnv it returns at once and
// does nothing. Call it first thing in main, and in TestMain of a test
// binary that starts targets with the default launcher.
func ServeChild() {
	v := os.Getenv(ChildEnv)
	if v == "" {
		return
	}
	if err := serveChild(context.Background(), v, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench target:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveChild starts the target described by spec, writes "listening URL"
// on out, and serves until in reaches its end (the parent closed it or
// died) or ctx ends.
func serveChild(ctx context.Context, spec string, in io.Reader, out io.Writer) error {
	var cs childSpec
	if err := json.Unmarshal([]byte(spec), &cs); err != nil {
		return fmt.Errorf("bad %s: %w", ChildEnv, err)
	}
	t, ok := TargetByName(cs.Target)
	if !ok {
		return fmt.Errorf("unknown target %q", cs.Target)
	}
	if cs.Nice != 0 {
		if err := renice(cs.Nice); err != nil {
			return err
		}
	}
	rn, err := t.Start(cs.Handler.Options())
	if err != nil {
		return fmt.Errorf("start %s: %w", cs.Target, err)
	}
	if _, err := fmt.Fprintf(out, "listening %s\n", rn.URL); err != nil {
		return errors.Join(err, rn.Stop())
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
	if err := rn.Stop(); err != nil {
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
	return nil
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
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error
	errb  *strings.Builder
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
	if _, ok := TargetByName(target); !ok {
		return nil, fmt.Errorf("bench: unknown target %q", target)
	}
	if launch == nil {
		launch = selfLauncher
	}
	cmd, err := launch()
	if err != nil {
		return nil, err
	}
	js, err := json.Marshal(childSpec{Target: target, Handler: spec, Nice: TargetNice})
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
	if err := startOn(cmd, cpus); err != nil {
		return nil, fmt.Errorf("bench: start target %s: %w", target, err)
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
			if js, ok := strings.CutPrefix(sc.Text(), "stats "); ok && json.Valid([]byte(js)) {
				p.Stats = json.RawMessage(js)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		p.done <- cmd.Wait()
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
