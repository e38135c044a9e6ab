//go:build linux

package hello

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	// envIdleClient, set to a server's address, makes the test binary the
	// child of BenchmarkIdleConnMemory (see idleClientMain).
	envIdleClient = "SLUICE_BENCH_IDLE_CLIENT"
	// envIdleConns sets the number of idle connections (10,000 default).
	envIdleConns = "SLUICE_BENCH_IDLE_CONNS"
)

const (
	idleDialers     = 32               // connections the child opens at a time
	idleClientLimit = 3 * time.Minute  // the child exits after this, whatever happens
	idleReadyLimit  = 90 * time.Second // the parent waits this long for the child
)

var idleTargets = []target{
	{"sluice", startSluiceNative},
	{"nethttp", startNetHTTP},
	{"fasthttp", startFastHTTP},
}

// BenchmarkIdleConnMemory measures the Go heap and stacks each target holds
// per idle kept-alive connection, after one request on each: it reports
// B/conn (heap in use plus stacks in use, after minus before, divided by the
// connection count), and the two parts apart. A child process opens the
// connections (SLUICE_BENCH_IDLE_CONNS, 10,000 by default), since one
// process could not hold both ends under the descriptor limit.
//
// Each run measures once, whatever b.N: run it with -benchtime 1x.
func BenchmarkIdleConnMemory(b *testing.B) {
	n, err := envInt(envIdleConns, 10000)
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range idleTargets {
		b.Run(t.name, func(b *testing.B) {
			srv, err := t.start()
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				if err := srv.stop(); err != nil {
					b.Errorf("stop %s: %v", t.name, err)
				}
			}()
			heap, stack := idleMemory(b, srv, n)
			b.ReportMetric(0, "ns/op") // the time means nothing here
			b.ReportMetric(float64(heap+stack)/float64(n), "B/conn")
			b.ReportMetric(float64(heap)/float64(n), "heap-B/conn")
			b.ReportMetric(float64(stack)/float64(n), "stack-B/conn")
		})
	}
}

// memInUse returns the heap and stack memory in use after a full garbage
// collection.
func memInUse() (heap, stack int64) {
	runtime.GC()
	runtime.GC() // a second cycle frees what the first one's finalizers and sync.Pools let go
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse), int64(ms.StackInuse)
}

// idleMemory has a child process open n connections to srv, each through
// one request, and returns how much heap and stack the server's process
// gained while they are idle. The child is gone when it returns.
func idleMemory(b *testing.B, srv *running, n int) (heap, stack int64) {
	heap0, stack0 := memInUse()

	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envIdleClient+"="+srv.addr, envIdleConns+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	type line struct {
		s   string
		err error
	}
	readyc := make(chan line, 1)
	go func() {
		s, err := bufio.NewReader(stdout).ReadString('\n')
		readyc <- line{s, err}
	}()
	var ready line
	readDone := false
	defer func() {
		// Closing stdin tells the child to close its connections and exit;
		// it is killed if it does not.
		_ = stdin.Close()
		if !readDone {
			_ = cmd.Process.Kill()
			<-readyc
		}
		waitc := make(chan error, 1)
		go func() { waitc <- cmd.Wait() }()
		select {
		case err := <-waitc:
			if err != nil {
				b.Errorf("idle client: %v", err)
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-waitc
			b.Error("idle client did not exit: killed")
		}
	}()

	select {
	case ready = <-readyc:
		readDone = true
	case <-time.After(idleReadyLimit):
		b.Fatalf("idle client not ready after %v", idleReadyLimit)
	}
	if want := fmt.Sprintf("ready %d\n", n); ready.s != want {
		b.Fatalf("idle client: got %q (%v), want %q", ready.s, ready.err, want)
	}
	if srv.open != nil {
		// Wait for the server to count every connection.
		for end := time.Now().Add(10 * time.Second); srv.open() < n; {
			if time.Now().After(end) {
				b.Fatalf("the server holds %d connections, want %d", srv.open(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	time.Sleep(200 * time.Millisecond) // let the last responses' handlers return
	heap1, stack1 := memInUse()
	return heap1 - heap0, stack1 - stack0
}

// idleClientMain is the child of BenchmarkIdleConnMemory: it opens
// SLUICE_BENCH_IDLE_CONNS connections to addr, sends one request on each
// and reads the response, writes "ready N" on stdout, and holds the
// connections until stdin closes. It returns the exit code.
func idleClientMain(addr string) int {
	n, err := envInt(envIdleConns, 10000)
	if err != nil {
		fmt.Fprintln(os.Stderr, "idle client:", err)
		return 2
	}
	time.AfterFunc(idleClientLimit, func() {
		fmt.Fprintf(os.Stderr, "idle client: exiting after %v\n", idleClientLimit)
		os.Exit(3)
	})
	conns := make([]net.Conn, n)
	defer func() {
		for _, nc := range conns {
			if nc != nil {
				closeAbortive(nc)
			}
		}
	}()
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for range idleDialers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				nc, err := openIdle(addr)
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("connection %d: %w", i, err) })
					next.Store(int64(n))
					return
				}
				conns[i] = nc
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		fmt.Fprintln(os.Stderr, "idle client:", firstErr)
		return 1
	}
	fmt.Printf("ready %d\n", n)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// openIdle opens a connection to addr and takes one request through it.
func openIdle(addr string) (net.Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReaderSize(nc, 1024)
	if _, err = nc.Write(request); err == nil {
		err = readResponse(br, make([]byte, 64), helloExpect)
	}
	if err == nil && br.Buffered() > 0 {
		err = errors.New("bytes after the response")
	}
	if err != nil {
		closeAbortive(nc)
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	return nc, nil
}
