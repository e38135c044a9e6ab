//go:build linux

package hello

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// The closed-loop load client of BenchmarkHello, and its child-process form.
//
// In a child process (the default, SLUICE_BENCH_CLIENT=process), the test
// binary runs again with SLUICE_BENCH_LOAD_CLIENT set to the server's
// address and the parameters below in its environment (see
// loadClientMain). It dials, warms the connections up, writes "ready" on
// its standard output, waits for a "go" line on its standard input, sends
// the requests, and writes one loadResult as a JSON line. A closed standard
// input ends it before it has written its result, and it exits by itself
// after loadClientLimit whatever happens.
const (
	envClient       = "SLUICE_BENCH_CLIENT"        // where the client runs: clientProcess or clientInProc
	envLoadClient   = "SLUICE_BENCH_LOAD_CLIENT"   // the server's address: be the child
	envLoadConns    = "SLUICE_BENCH_LOAD_CONNS"    // connections of the child
	envLoadRequests = "SLUICE_BENCH_LOAD_REQUESTS" // requests timed, over all connections
	envLoadWarmUp   = "SLUICE_BENCH_LOAD_WARMUP"   // requests per connection before "ready"
	envLoadExpect   = "SLUICE_BENCH_LOAD_EXPECT"   // "reject": expect sluice's 503, not hello; "file:NAME": that file's bytes; "post:N": hello to a POST of N bytes
)

// The values of SLUICE_BENCH_CLIENT.
const (
	clientProcess = "process" // a child process, the default
	clientInProc  = "inproc"  // this process
)

// The protocol between the parent and the child, and its time limits.
const (
	loadReadyLine   = "ready\n"                     // child to parent: warmed up
	loadGoLine      = "go\n"                        // parent to child: start the run
	loadReadyLimit  = 90 * time.Second              // the parent waits this long for "ready"
	loadClientLimit = loadDeadline + 30*time.Second // the child exits after this, whatever happens
	loadResultLimit = loadClientLimit + time.Minute // the parent waits this long for the result
	loadExitLimit   = 20 * time.Second              // and this long for the child to exit
)

// warmUpRequests is how many requests each connection sends before the
// timer starts.
const warmUpRequests = 16

// Latency histograms, in nanoseconds: 0.5 µs resolution at the low end,
// three significant digits, 10 s at most.
const (
	histMin = 1000
	histMax = 10_000_000_000
)

// hists holds the latency histograms of the client connections, reused
// from one run to the next (benchmarks run one at a time).
var hists []*hdrhistogram.Histogram

// load is the closed-loop client: keep-alive connections to one server,
// each sending its next request when the previous response has arrived.
type load struct {
	clients []*client
	hists   []*hdrhistogram.Histogram // one per connection
}

// dialLoad opens conns connections to addr, each with a deadline of
// loadDeadline from now.
func dialLoad(addr string, conns int, want expectation) (*load, error) {
	deadline := time.Now().Add(loadDeadline)
	l := &load{clients: make([]*client, 0, conns)}
	for range conns {
		c, err := dialClient(addr, want)
		if err != nil {
			l.close()
			return nil, err
		}
		c.setDeadline(deadline)
		l.clients = append(l.clients, c)
	}
	for len(hists) < conns {
		hists = append(hists, hdrhistogram.New(histMin, histMax, 3))
	}
	l.hists = hists[:conns]
	return l, nil
}

// close closes the connections.
func (l *load) close() {
	for _, c := range l.clients {
		c.close()
	}
}

// run has every connection send warmUp requests, then calls ready, then
// sends total requests spread over the connections and returns the time
// they took, from after ready returned to the last response. It stops at
// the first error, of a request or of ready (ready is not called if the
// warm-up failed), and returns it. The latencies are in l.hists.
func (l *load) run(total int64, warmUp int, ready func() error) (time.Duration, error) {
	var (
		next      atomic.Int64 // requests handed out
		errOnce   sync.Once
		firstErr  error
		warm      sync.WaitGroup
		done      sync.WaitGroup
		start     = make(chan struct{})
		stopAfter = int64(math.MaxInt64 / 2)
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		next.Store(stopAfter) // the others stop at their next request
	}
	for i, c := range l.clients {
		h := l.hists[i]
		h.Reset()
		warm.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			var err error
			for range warmUp {
				if err = c.roundTrip(); err != nil {
					break
				}
			}
			if err != nil {
				fail(fmt.Errorf("warm-up: %w", err))
			}
			warm.Done()
			if err != nil {
				return
			}
			<-start
			for next.Add(1) <= total {
				t0 := time.Now()
				if err := c.roundTrip(); err != nil {
					fail(err)
					return
				}
				_ = h.RecordValue(min(int64(time.Since(t0)), histMax))
			}
		}()
	}
	warm.Wait()
	if firstErr == nil { // no warm-up error (fail happens before warm.Done)
		if err := ready(); err != nil {
			fail(err)
		}
	}
	t0 := time.Now()
	close(start)
	done.Wait()
	elapsed := time.Since(t0)
	return elapsed, firstErr
}

// quantiles merges the connections' latency histograms and returns the
// median and 99th percentile, in nanoseconds. Call it once per run.
func (l *load) quantiles() (p50, p99 int64) {
	all := l.hists[0]
	for _, h := range l.hists[1:] {
		all.Merge(h)
	}
	return all.ValueAtQuantile(50), all.ValueAtQuantile(99)
}

// loadResult is the child's report, one JSON line on its standard output.
type loadResult struct {
	Requests  int64  `json:"requests"`   // requests answered in the timed run
	ElapsedNs int64  `json:"elapsed_ns"` // wall time of the timed run
	P50Ns     int64  `json:"p50_ns"`     // median latency
	P99Ns     int64  `json:"p99_ns"`     // 99th percentile latency
	CPUNs     int64  `json:"cpu_ns"`     // the child's CPU time in the run, user and system
	Error     string `json:"error,omitempty"`
}

// loadClientMain is the child process of BenchmarkHello: it runs the load
// client against addr with the parameters in its environment, talking to
// its parent as the comment at the top of this file says. It returns the
// exit code.
func loadClientMain(addr string) int {
	time.AfterFunc(loadClientLimit, func() {
		fmt.Fprintf(os.Stderr, "load client: exiting after %v\n", loadClientLimit)
		os.Exit(3)
	})
	var res loadResult
	report := func(err error) int {
		code := 0
		if err != nil {
			res.Error = err.Error()
			code = 1
		}
		line, merr := json.Marshal(res)
		if merr != nil {
			fmt.Fprintln(os.Stderr, "load client:", merr)
			return 2
		}
		if _, err := os.Stdout.Write(append(line, '\n')); err != nil {
			fmt.Fprintln(os.Stderr, "load client:", err)
			return 2
		}
		return code
	}
	conns, err := envInt(envLoadConns, 64)
	if err != nil {
		return report(err)
	}
	total, err := envInt(envLoadRequests, 1)
	if err != nil {
		return report(err)
	}
	warmUp, err := envInt(envLoadWarmUp, warmUpRequests)
	if err != nil {
		return report(err)
	}

	// The parent's "go", then the end of the standard input: the parent
	// closes it, or dies, which ends the run unless the result is out.
	var finished atomic.Bool
	goc := make(chan struct{})
	go func() {
		in := bufio.NewReader(os.Stdin)
		line, err := in.ReadString('\n')
		if err == nil && line != loadGoLine {
			err = fmt.Errorf("got %q, want %q", line, loadGoLine)
		}
		if err == nil {
			close(goc)
			_, err = io.Copy(io.Discard, in)
		}
		if finished.Load() {
			return
		}
		if err == nil {
			err = io.EOF
		}
		fmt.Fprintf(os.Stderr, "load client: standard input: %v: exiting\n", err)
		os.Exit(4)
	}()

	want := helloExpect
	switch v := os.Getenv(envLoadExpect); {
	case v == "reject":
		want = rejectExpect
	case strings.HasPrefix(v, "post:"):
		n, err := strconv.Atoi(strings.TrimPrefix(v, "post:"))
		if err != nil {
			return report(err)
		}
		want = expectation{status: "200", body: helloBody, post: n}
	case strings.HasPrefix(v, "file:"):
		name := strings.TrimPrefix(v, "file:")
		b, err := os.ReadFile(name)
		if err != nil {
			return report(err)
		}
		want = expectation{status: "200", body: b, file: name}
	}
	l, err := dialLoad(addr, conns, want)
	if err != nil {
		return report(err)
	}
	defer l.close()
	var cpu0 int64
	elapsed, err := l.run(int64(total), warmUp, func() error {
		if _, err := io.WriteString(os.Stdout, loadReadyLine); err != nil {
			return err
		}
		<-goc
		cpu0, _ = processCPU()
		return nil
	})
	cpu, _ := processCPU()
	cpu -= cpu0
	finished.Store(true)
	if err != nil {
		return report(err)
	}
	res.Requests = int64(total)
	res.ElapsedNs = int64(elapsed)
	res.P50Ns, res.P99Ns = l.quantiles()
	res.CPUNs = cpu
	return report(nil)
}

// loadProcess is a child process running the load client, warmed up and
// waiting for its "go".
type loadProcess struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	lines    chan string   // the child's standard output, line by line
	quit     chan struct{} // closed when the lines are no longer read
	readDone chan struct{} // closed at the end of the child's standard output
	waited   bool
	waitErr  error
}

// startLoadProcess starts the child client of conns connections to addr,
// which will send total requests, and waits until it is ready. On an error
// the child is gone.
func startLoadProcess(addr string, conns, total int, want expectation) (*loadProcess, error) {
	cmd := exec.Command(os.Args[0])
	expect := ""
	switch {
	case want.status == rejectExpect.status:
		expect = "reject"
	case want.file != "":
		expect = "file:" + want.file
	case want.post > 0:
		expect = "post:" + strconv.Itoa(want.post)
	}
	cmd.Env = append(os.Environ(),
		envLoadExpect+"="+expect,
		envLoadClient+"="+addr,
		envLoadConns+"="+strconv.Itoa(conns),
		envLoadRequests+"="+strconv.Itoa(total),
		envLoadWarmUp+"="+strconv.Itoa(warmUpRequests),
	)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		_ = stdin.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		_ = stdin.Close()
		_ = stdout.Close()
		return nil, err
	}
	p := &loadProcess{
		cmd:      cmd,
		stdin:    stdin,
		lines:    make(chan string),
		quit:     make(chan struct{}),
		readDone: make(chan struct{}),
	}
	go func() {
		defer close(p.readDone)
		br := bufio.NewReader(stdout)
		for {
			s, err := br.ReadString('\n')
			if err != nil {
				return // the child has exited (a partial line is dropped)
			}
			select {
			case p.lines <- s:
			case <-p.quit:
			}
		}
	}()
	line, err := p.recv(loadReadyLimit, "ready")
	if err == nil && line != loadReadyLine {
		err = resultError(line)
	}
	if err != nil {
		_ = p.close()
		return nil, err
	}
	return p, nil
}

// recv returns the child's next line, or an error if it exits or says
// nothing for limit; what names the line awaited.
func (p *loadProcess) recv(limit time.Duration, what string) (string, error) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case s := <-p.lines:
		return s, nil
	case <-p.readDone:
		return "", fmt.Errorf("load client exited before %s: %v", what, p.wait())
	case <-timer.C:
		return "", fmt.Errorf("load client: no %s after %v", what, limit)
	}
}

// wait waits for the child's exit, once, and returns its error. The
// child's standard output must have ended.
func (p *loadProcess) wait() error {
	if !p.waited {
		p.waited = true
		p.waitErr = p.cmd.Wait()
	}
	return p.waitErr
}

// goRun lets the child run and returns its result; an error if the child
// failed, with its text.
func (p *loadProcess) goRun() (loadResult, error) {
	if _, err := io.WriteString(p.stdin, loadGoLine); err != nil {
		return loadResult{}, fmt.Errorf("load client: write %q: %w", loadGoLine, err)
	}
	line, err := p.recv(loadResultLimit, "the result")
	if err != nil {
		return loadResult{}, err
	}
	var res loadResult
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		return loadResult{}, fmt.Errorf("load client: result %q: %w", line, err)
	}
	if res.Error != "" {
		return res, fmt.Errorf("load client: %s", res.Error)
	}
	return res, nil
}

// close closes the child's standard input, which ends it if it has not
// finished, waits for it to exit, killing it after loadExitLimit, and
// returns its exit error.
func (p *loadProcess) close() error {
	close(p.quit)
	_ = p.stdin.Close()
	timer := time.NewTimer(loadExitLimit)
	defer timer.Stop()
	select {
	case <-p.readDone:
	case <-timer.C:
		_ = p.cmd.Process.Kill()
		<-p.readDone
		return errors.Join(errors.New("load client did not exit: killed"), p.wait())
	}
	return p.wait()
}

// resultError returns the error of a line the child wrote instead of
// "ready": its result with an error, or else the line itself.
func resultError(line string) error {
	var res loadResult
	if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &res) == nil && res.Error != "" {
		return fmt.Errorf("load client: %s", res.Error)
	}
	return fmt.Errorf("load client: got %q, want %q", line, loadReadyLine)
}

// startHandler serves h with net/http on 127.0.0.1 for a test.
func startHandler(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	t.Cleanup(func() {
		_ = hs.Close()
		<-done
	})
	return ln.Addr().String()
}

// TestLoadProcess runs the child-process client against net/http.
func TestLoadProcess(t *testing.T) {
	addr := startHandler(t, helloHTTP)
	p, err := startLoadProcess(addr, 4, 500, helloExpect)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.goRun()
	if cerr := p.close(); cerr != nil {
		t.Errorf("close: %v", cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 500 || res.ElapsedNs <= 0 || res.P50Ns <= 0 || res.P99Ns < res.P50Ns || res.CPUNs < 0 {
		t.Errorf("result %+v", res)
	}
}

// TestLoadProcessErrors checks that the child's errors come back with
// their text: in the warm-up, before "ready", and in the timed run.
func TestLoadProcessErrors(t *testing.T) {
	const conns = 2
	failing := func(after int64) http.HandlerFunc {
		var n atomic.Int64
		return func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) > after {
				http.Error(w, "failing", http.StatusServiceUnavailable)
				return
			}
			helloHTTP(w, r)
		}
	}

	addr := startHandler(t, failing(0))
	if p, err := startLoadProcess(addr, conns, 100, helloExpect); err == nil {
		_ = p.close()
		t.Error("warm-up against a failing server: no error")
	} else if !strings.Contains(err.Error(), "warm-up") || !strings.Contains(err.Error(), "503") {
		t.Errorf("warm-up against a failing server: %v", err)
	} else {
		t.Log(err)
	}

	addr = startHandler(t, failing(conns*warmUpRequests+10))
	p, err := startLoadProcess(addr, conns, 100, helloExpect)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.goRun()
	_ = p.close() // exit status 1
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("run against a server failing after 10 requests: %v", err)
	} else {
		t.Log(err)
	}
}

// TestLoadProcessStdinClosed checks that the child exits when its standard
// input closes before the "go".
func TestLoadProcessStdinClosed(t *testing.T) {
	addr := startHandler(t, helloHTTP)
	p, err := startLoadProcess(addr, 2, 100, helloExpect)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = p.close()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Errorf("close: %v, want exit status 4", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the child took %v to exit", d)
	}
}

// TestLoadNewConns checks the client's envNewConns mode: each request on a
// connection of its own, which the client resets once the response is in.
func TestLoadNewConns(t *testing.T) {
	t.Setenv(envNewConns, "1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var opened atomic.Int64
	hs := &http.Server{Handler: http.HandlerFunc(helloHTTP), ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	defer func() {
		_ = hs.Close()
		<-done
	}()
	const conns, warmUp, total = 3, 2, 30
	l, err := dialLoad(ln.Addr().String(), conns, helloExpect)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	if _, err := l.run(total, warmUp, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got, want := opened.Load(), int64(conns*warmUp+total); got != want {
		t.Errorf("%d connections for %d requests", got, want)
	}
	for _, c := range l.clients {
		if c.nc != nil {
			t.Error("a connection left open between requests")
		}
	}
	if _, err := dialClient(tlsPrefix+"127.0.0.1:1", helloExpect); err == nil || !strings.Contains(err.Error(), "plain HTTP") {
		t.Errorf("TLS with new connections: %v", err)
	}
}
