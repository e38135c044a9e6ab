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
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// NeighbourEnv is the environment variable that makes a program a busy
// neighbour (Trial.StartNeighbour): ServeChild sees it and, instead of the
// program, runs a busy loop on the CPU it was started on until its stdin
// ends or its time is up, then exits.
const NeighbourEnv = "SLUICE_BENCH_NEIGHBOUR"

// neighbourSpec is NeighbourEnv's value, as JSON.
type neighbourSpec struct {
	// For bounds the busy loop, whatever the parent does.
	For time.Duration `json:"for"`
	// Nice is the loop's nice value.
	Nice int `json:"nice,omitempty"`
}

// runNeighbour is the neighbour's main: it sets its nice value, writes
// "spinning" on out and spins until in ends (the parent closed it or died)
// or spec.For has passed.
func runNeighbour(spec string, in io.Reader, out io.Writer) error {
	var ns neighbourSpec
	if err := json.Unmarshal([]byte(spec), &ns); err != nil {
		return fmt.Errorf("bad %s: %w", NeighbourEnv, err)
	}
	if ns.For <= 0 {
		return fmt.Errorf("bad %s: no time bound", NeighbourEnv)
	}
	if ns.Nice != 0 {
		if err := renice(ns.Nice); err != nil {
			return err
		}
	}
	var ended atomic.Bool
	go func() {
		_, _ = io.Copy(io.Discard, in)
		ended.Store(true)
	}()
	if _, err := fmt.Fprintln(out, "spinning"); err != nil {
		return err
	}
	spin(ns.For, &ended)
	return nil
}

// spinSink keeps the busy loop's arithmetic from being optimised away.
var spinSink atomic.Uint64

// spin keeps its CPU busy for d, or until stop is set.
func spin(d time.Duration, stop *atomic.Bool) {
	end := time.Now().Add(d)
	x := uint64(1)
	for !stop.Load() && time.Now().Before(end) {
		for range 1 << 12 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	spinSink.Store(x)
}

// A Neighbour is a busy loop running in a child process of its own, on
// one CPU (Trial.StartNeighbour): a noisy neighbour that takes that CPU
// from whatever else runs there.
type Neighbour struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error
	// CPU is the CPU the loop runs on.
	CPU int
}

// neighbourBound bounds a neighbour's busy loop beyond the run it is
// started for, should its parent never stop it.
const neighbourBound = processStartTimeout + 10*time.Second

// StartNeighbour starts a busy loop on cpu alone, at the targets' nice
// value (TargetNice, so that a target's thread on that CPU gets about half
// of it), in a child process the suite's Launch makes, and returns once it
// spins. The loop ends by itself a while after d, should Neighbour.Stop
// never be called.
func (t *Trial) StartNeighbour(ctx context.Context, cpu int, d time.Duration) (*Neighbour, error) {
	return startNeighbour(ctx, t.Suite.Launch, cpu, TargetNice, d+neighbourBound)
}

// startNeighbour starts a busy loop in a child process made by launch
// (nil: this executable), on cpu alone, at nice, for at most d, and
// returns once it spins.
func startNeighbour(ctx context.Context, launch Launcher, cpu, nice int, d time.Duration) (*Neighbour, error) {
	if launch == nil {
		launch = selfLauncher
	}
	cmd, err := launch()
	if err != nil {
		return nil, err
	}
	js, err := json.Marshal(neighbourSpec{For: d, Nice: nice})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	cmd.Env = append(append(os.Environ(), cmd.Env...), NeighbourEnv+"="+string(js))
	n := &Neighbour{cmd: cmd, done: make(chan error, 1), CPU: cpu}
	errb := new(strings.Builder)
	cmd.Stderr = &limitedWriter{b: errb, n: 4096}
	if n.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if err := startOn(cmd, []int{cpu}); err != nil {
		return nil, fmt.Errorf("bench: start the neighbour on CPU %d: %w", cpu, err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ready <- sc.Scan() && sc.Text() == "spinning"
		_, _ = io.Copy(io.Discard, stdout)
		n.done <- cmd.Wait()
	}()
	fail := func(err error) (*Neighbour, error) {
		_ = cmd.Process.Kill()
		werr := <-n.done
		return nil, fmt.Errorf("bench: neighbour: %w (exit: %v; stderr: %q)", err, werr, errb.String())
	}
	timer := time.NewTimer(processStartTimeout)
	defer timer.Stop()
	select {
	case ok := <-ready:
		if !ok {
			return fail(errors.New("did not start spinning"))
		}
		return n, nil
	case <-timer.C:
		return fail(errors.New("not spinning in time"))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
}

// CPUTime returns the CPU time the loop has used so far; 0 for a nil
// Neighbour (none started) or when the kernel does not say.
func (n *Neighbour) CPUTime() time.Duration {
	if n == nil {
		return 0
	}
	return processCPU(n.cmd.Process.Pid)
}

// Stop ends the loop (closing its stdin), waits up to 5 s for it to exit
// and kills it past that.
func (n *Neighbour) Stop() error {
	_ = n.stdin.Close()
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	select {
	case err := <-n.done:
		if err != nil {
			return fmt.Errorf("bench: neighbour exit: %w", err)
		}
		return nil
	case <-timer.C:
		_ = n.cmd.Process.Kill()
		<-n.done
		return errors.New("bench: neighbour did not stop within 5 s; killed")
	}
}

// schedTimes is a thread's time on a CPU and waiting for one, from
// /proc/PID/task/TID/schedstat.
type schedTimes struct {
	run, wait time.Duration
}

// threadSched returns the schedstat times of every thread of process pid,
// by thread id. A thread that ends while they are read is left out.
func threadSched(pid int) (map[int]schedTimes, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("bench: threads of %d: %w", pid, err)
	}
	out := make(map[int]schedTimes, len(tasks))
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue
		}
		if st, ok := parseSchedstat(string(b)); ok {
			out[tid] = st
		}
	}
	return out, nil
}

// parseSchedstat reads a schedstat line: nanoseconds on a CPU, nanoseconds
// waiting on a run queue, and time slices.
func parseSchedstat(s string) (schedTimes, bool) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return schedTimes{}, false
	}
	run, err1 := strconv.ParseInt(f[0], 10, 64)
	wait, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return schedTimes{}, false
	}
	return schedTimes{run: time.Duration(run), wait: time.Duration(wait)}, true
}

// RunQueue sums up how long a process's threads waited for a CPU while
// they were runnable, over an interval, from the kernel's schedstat: a
// thread that is ready to run but finds its CPU taken waits on the run
// queue.
type RunQueue struct {
	// Wait is the run-queue wait of all the threads together, in seconds
	// per second of the interval.
	Wait float64 `json:"wait"`
	// MaxThread is the run-queue wait of the thread that waited most, in
	// seconds per second: about 0.5 for a thread kept runnable on a CPU
	// shared half and half with a busy neighbour.
	MaxThread float64 `json:"max_thread"`
	// MaxThreadRun is the time that thread spent on a CPU, in seconds per
	// second.
	MaxThreadRun float64 `json:"max_thread_run"`
}

// runQueue compares two readings of threadSched taken elapsed apart. A
// thread absent from before started meanwhile and counts from zero; one
// absent from after ended meanwhile and is not counted.
func runQueue(before, after map[int]schedTimes, elapsed time.Duration) RunQueue {
	var rq RunQueue
	sec := elapsed.Seconds()
	if sec <= 0 {
		return rq
	}
	for tid, a := range after {
		b := before[tid]
		w := (a.wait - b.wait).Seconds() / sec
		rq.Wait += w
		if w > rq.MaxThread {
			rq.MaxThread = w
			rq.MaxThreadRun = (a.run - b.run).Seconds() / sec
		}
	}
	return rq
}

// A RunQueueMeter brackets a run: how long a target process's threads
// waited for a CPU during it (RunQueue), from the kernel's schedstat.
type RunQueueMeter struct {
	proc   *Process
	before map[int]schedTimes
	start  time.Time
}

// MeterRunQueue starts metering proc's threads now.
func MeterRunQueue(proc *Process) *RunQueueMeter {
	before, _ := threadSched(proc.pid())
	return &RunQueueMeter{proc: proc, before: before, start: time.Now()}
}

// Stop ends the bracket, which must be before proc stops, and returns the
// wait of its threads over the bracket; ok is false when the kernel's
// schedstat could not be read (not Linux, or the process gone).
func (m *RunQueueMeter) Stop() (rq RunQueue, ok bool) {
	after, _ := threadSched(m.proc.pid())
	if m.before == nil || after == nil {
		return RunQueue{}, false
	}
	return runQueue(m.before, after, time.Since(m.start)), true
}
