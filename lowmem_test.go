//go:build linux

package sluice

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/await"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/internal/syncbuf"
	srt "github.com/sluice-go/sluice/runtime"
)

// The low-memory test runs a server in a child process inside a cgroup
// (v1) whose memory limit is lowMemLimit, and sends it requests that each
// hold lowMemPerRequest for a while: far more than the limit if all were
// admitted.
const (
	lowMemLimit      = 192 << 20
	lowMemPerRequest = 4 << 20
	lowMemHold       = 300 * time.Millisecond
	lowMemClients    = 150
	lowMemEnv        = "SLUICE_TEST_LOWMEM_CHILD" // "gate" or "nogate"
	lowMemCgroupEnv  = "SLUICE_TEST_LOWMEM_CGROUP"
)

// TestMemoryGateRefusesBeforeTheOOMKiller: under a cgroup memory limit, a
// server behind the memory gate refuses new work with 503 "memory" and
// lives; the same server without the gate is killed by the kernel's OOM
// killer. It needs a writable cgroup v1 memory controller (root in a
// container with /sys/fs/cgroup/memory mounted read-write), and skips
// otherwise: that is the machine's capability, not something to install.
func TestMemoryGateRefusesBeforeTheOOMKiller(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's own memory would be measured")
	}
	root := "/sys/fs/cgroup/memory"
	if _, err := os.Stat(filepath.Join(root, "memory.limit_in_bytes")); err != nil {
		t.Skipf("no cgroup v1 memory controller at %s: %v", root, err)
	}
	parent, err := os.MkdirTemp(root, "sluice-lowmem-")
	if err != nil {
		t.Skipf("cannot create a memory cgroup under %s (it needs root and a writable mount): %v", root, err)
	}
	t.Cleanup(func() { _ = os.Remove(parent) })

	// The premise first: without the gate, this load gets the server
	// killed. Whether it does depends on the kernel's memory accounting
	// and reclaim on this machine (page cache, swap, how fast the heap is
	// charged), which no test controls: where it does not hold, the gate's
	// run would prove nothing, and the test skips.
	ungated := runLowMem(t, parent, "nogate")
	t.Logf("without the gate: %d served, %d refused, %d failed; killed: %v", ungated.ok, ungated.refused, ungated.failed, ungated.killed)
	if !ungated.killed {
		t.Skipf("the premise does not hold here: without the memory gate the load did not get the server killed by the OOM killer (%d served, %d failed), so the gate's run would prove nothing", ungated.ok, ungated.failed)
	}

	gated := runLowMem(t, parent, "gate")
	t.Logf("with the memory gate: %d served, %d refused (memory), %d failed; killed: %v", gated.ok, gated.refused, gated.failed, gated.killed)
	assert.False(t, gated.killed, "the server behind the memory gate is not killed")
	assert.Positive(t, gated.ok)
	assert.Positive(t, gated.refused, "it refused new work with 503 when memory ran low")
}

// lowMemResult is what one run saw.
type lowMemResult struct {
	ok, refused, failed int
	killed              bool
}

// runLowMem runs the child server in a cgroup of its own under parent and
// loads it; mode is "gate" or "nogate".
func runLowMem(t *testing.T, parent, mode string) lowMemResult {
	t.Helper()
	cg := filepath.Join(parent, mode)
	require.NoError(t, os.Mkdir(cg, 0o755))
	defer func() {
		for range 50 { // the kernel frees the cgroup once its last process is gone
			if os.Remove(cg) == nil || errors.Is(os.Remove(cg), os.ErrNotExist) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	limit := strconv.Itoa(lowMemLimit)
	require.NoError(t, os.WriteFile(filepath.Join(cg, "memory.limit_in_bytes"), []byte(limit), 0o644))
	// No swap to fall back on, where the kernel accounts for it.
	_ = os.WriteFile(filepath.Join(cg, "memory.memsw.limit_in_bytes"), []byte(limit), 0o644)

	cmd := exec.Command(os.Args[0], "-test.run=^TestLowMemoryChild$")
	// GOMEMLIMIT below the cgroup's limit, as a Go server in a container
	// should have: the garbage collector works harder as the heap nears it,
	// and the memory gate refuses before the kernel's limit is reached.
	cmd.Env = append(os.Environ(), lowMemEnv+"="+mode, lowMemCgroupEnv+"="+cg,
		"GOMEMLIMIT="+strconv.Itoa(lowMemLimit/2))
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	// The child's standard error (its server's log, the test binary's
	// own lines) goes to this test's log, not to the terminal.
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	defer func() { logChild(t, mode, stderr.String()) }()
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "addr "); ok {
				addrs <- a
			}
		}
		exited <- cmd.Wait()
	}()
	var addr string
	select {
	case addr = <-addrs:
	case err := <-exited:
		t.Fatalf("the child exited before listening: %v", err)
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the child did not listen")
	}

	var res lowMemResult
	var mu sync.Mutex
	tr := &http.Transport{MaxIdleConnsPerHost: lowMemClients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	stop := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for i := range lowMemClients {
		wg.Go(func() {
			// The clients come one every 10 ms, and one that is refused
			// waits a little before it tries again, as a client told
			// "not started, retry later" does: the load grows, it does
			// not arrive all within one of the gate's readings.
			time.Sleep(time.Duration(i) * 10 * time.Millisecond)
			for time.Now().Before(stop) {
				resp, err := client.Get("http://" + addr + "/")
				mu.Lock()
				switch {
				case err != nil:
					res.failed++
				case resp.StatusCode == http.StatusOK:
					res.ok++
				case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Sluice-Reject-Reason") == "memory":
					res.refused++
				default:
					res.failed++
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(10 * time.Millisecond) // a dead server: do not spin
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	_ = stdin.Close() // asks a living child to stop
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
				res.killed = true
			}
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatal("the child did not stop")
	}
	return res
}

// logChild writes what a child wrote to its standard error to t's log:
// its first and last lines, and how many were between.
func logChild(t *testing.T, mode, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return
	}
	const keep = 10
	if len(lines) > 2*keep {
		n := len(lines) - 2*keep
		lines = append(append(lines[:keep:keep], fmt.Sprintf("... %d lines ...", n)), lines[len(lines)-keep:]...)
	}
	t.Logf("the %s child's standard error:\n%s", mode, strings.Join(lines, "\n"))
}

// TestLowMemoryChild is the server of the low-memory test, in its child
// process; it does nothing in a normal run.
func TestLowMemoryChild(t *testing.T) {
	mode := os.Getenv(lowMemEnv)
	if mode == "" {
		t.Skip("the child of TestMemoryGateRefusesBeforeTheOOMKiller")
	}
	cg := os.Getenv(lowMemCgroupEnv)
	if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatalf("joining %s: %v", cg, err)
	}
	var cfg Config
	if mode == "gate" {
		// The gate admits every request that arrives between two of its
		// readings (gate.Memory's doc), 4 MiB each: when it opens again,
		// the refused clients' retries come in a burst. Half the limit
		// free and a reading every millisecond keep that burst (a few
		// requests a millisecond) far inside the margin even when the
		// machine is busy with other tests; at 35% and 5 ms, CI's run
		// once let one in past the limit.
		mem, err := gate.NewMemory(gate.MemoryConfig{MinFreeFraction: 0.5, Interval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Close()
		cfg.Admission.Gates = []admit.Policy{mem}
	}
	var held sync.Mutex
	var hold [][]byte
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, lowMemPerRequest)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1 // touch every page: resident, charged to the cgroup
		}
		held.Lock()
		hold = append(hold, b)
		held.Unlock()
		_ = await.Sleep(r.Context(), lowMemHold) // the worker serves others meanwhile
		held.Lock()
		for i, x := range hold {
			if &x[0] == &b[0] {
				hold = append(hold[:i], hold[i+1:]...)
				break
			}
		}
		held.Unlock()
		fmt.Fprint(w, "ok")
	})
	cfg.Runtime.Pinning = srt.PinOff
	srv, err := Listen("127.0.0.1:0", h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("addr", srv.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Stop(ctx)
}
