package bench

import (
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/valyala/fasthttp"

	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/sched"
	"github.com/sluice-go/sluice/server"
)

// Environment variables of the benchmarks (see also idle_test.go).
const (
	envConns = "SLUICE_BENCH_CONNS"      // client connections of BenchmarkHello
	envPin   = "SLUICE_BENCH_PIN"        // "0": sluice workers unpinned
	envProcs = "SLUICE_BENCH_GOMAXPROCS" // GOMAXPROCS while sluice runs
)

// running is a server under test, started on 127.0.0.1.
type running struct {
	addr string
	open func() int // connections the server holds open; nil if it cannot say
	stop func() error
	// sched is sluice's scheduler, for its counters; nil for the others.
	sched *sched.Scheduler
}

// target is a server to benchmark.
type target struct {
	name  string
	start func() (*running, error)
}

var helloTargets = []target{
	{"sluice-native", startSluiceNative},
	{"sluice-adapter", startSluiceAdapter},
	{"nethttp", startNetHTTP},
	{"fasthttp", startFastHTTP},
}

// helloNative is the hello handler in the server's native form.
func helloNative(w *server.ResponseWriter, _ *server.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(helloBody)
}

// helloHTTP is the hello handler for net/http, served by net/http and,
// through server.HTTPHandler, by sluice.
func helloHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(helloBody)
}

// helloFast is the hello handler for fasthttp.
func helloFast(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/plain")
	_, _ = ctx.Write(helloBody)
}

func startSluiceNative() (*running, error) {
	return startSluice(server.HandlerFunc(helloNative))
}

func startSluiceAdapter() (*running, error) {
	return startSluice(server.HTTPHandler(http.HandlerFunc(helloHTTP)))
}

// startSluice serves h on a runtime with the default options: one worker
// per usable CPU, pinned, GOMAXPROCS raised as the runtime does. Two
// environment variables change them, for diagnosis: SLUICE_BENCH_PIN=0
// leaves the workers unpinned, SLUICE_BENCH_GOMAXPROCS=n sets GOMAXPROCS
// while the runtime runs (runtime.WithGOMAXPROCS).
func startSluice(h server.Handler) (*running, error) {
	var opts []srt.Option
	if os.Getenv(envPin) == "0" {
		opts = append(opts, srt.WithPinning(false))
	}
	if os.Getenv(envProcs) != "" {
		n, err := envInt(envProcs, 0)
		if err != nil {
			return nil, err
		}
		opts = append(opts, srt.WithGOMAXPROCS(n))
	}
	rt, err := srt.New(opts...)
	if err != nil {
		return nil, err
	}
	if err := rt.Start(); err != nil {
		return nil, err
	}
	stopRT := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return rt.Stop(ctx)
	}
	srv, err := server.Listen(rt.Scheduler, "127.0.0.1:0", h, server.Config{})
	if err != nil {
		return nil, errors.Join(err, stopRT())
	}
	return &running{
		addr:  srv.Addr().String(),
		open:  srv.OpenConns,
		sched: rt.Scheduler,
		stop: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return errors.Join(srv.Close(ctx), stopRT())
		},
	}, nil
}

// startNetHTTP serves helloHTTP with a default net/http Server.
func startNetHTTP() (*running, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: http.HandlerFunc(helloHTTP)}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	return &running{
		addr: ln.Addr().String(),
		stop: func() error {
			err := hs.Close()
			if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
				err = errors.Join(err, serr)
			}
			return err
		},
	}, nil
}

// startFastHTTP serves helloFast with a default fasthttp Server.
func startFastHTTP() (*running, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	fs := &fasthttp.Server{Handler: helloFast}
	done := make(chan error, 1)
	go func() { done <- fs.Serve(ln) }()
	return &running{
		addr: ln.Addr().String(),
		open: func() int { return int(fs.GetOpenConnectionsCount()) },
		stop: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return errors.Join(fs.ShutdownWithContext(ctx), <-done)
		},
	}, nil
}

// BenchmarkHello serves "Hello, World!" from each target and runs b.N
// requests through the closed-loop client: SLUICE_BENCH_CONNS keep-alive
// connections (64 by default), each sending its next request when the
// previous response has arrived. The client runs in this process, on the
// same CPUs as the server, alike for every target.
//
// It reports req/s, the median and 99th percentile latency of a request
// (write to end of response) in microseconds, the CPU time of the process
// per request (client and server, user and system), and allocations per
// request, which are the server's: the client allocates nothing per
// request.
func BenchmarkHello(b *testing.B) {
	conns, err := envInt(envConns, 64)
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range helloTargets {
		b.Run(t.name, func(b *testing.B) {
			b.ReportAllocs()
			srv, err := t.start()
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				if err := srv.stop(); err != nil {
					b.Errorf("stop %s: %v", t.name, err)
				}
			}()
			runLoad(b, srv, conns)
		})
	}
}

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

// runLoad dials conns connections to srv, warms them up, then sends b.N
// requests spread over them, timed, and reports req/s, latencies and CPU
// time; for sluice, also the workers' parks (sleeps in epoll_wait), polls
// and tasks per request.
func runLoad(b *testing.B, srv *running, conns int) {
	addr := srv.addr
	deadline := time.Now().Add(loadDeadline)
	clients := make([]*client, 0, conns)
	defer func() {
		for _, c := range clients {
			_ = c.nc.Close()
		}
	}()
	for range conns {
		c, err := dialClient(addr)
		if err != nil {
			b.Fatal(err)
		}
		_ = c.nc.SetDeadline(deadline)
		clients = append(clients, c)
	}
	for len(hists) < conns {
		hists = append(hists, hdrhistogram.New(histMin, histMax, 3))
	}

	var (
		next      atomic.Int64 // requests handed out
		errOnce   sync.Once
		firstErr  error
		ready     sync.WaitGroup
		done      sync.WaitGroup
		start     = make(chan struct{})
		total     = int64(b.N)
		stopAfter = int64(math.MaxInt64 / 2)
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		next.Store(stopAfter) // the others stop at their next request
	}
	for i, c := range clients {
		h := hists[i]
		h.Reset()
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			var err error
			for range warmUpRequests {
				if err = c.roundTrip(); err != nil {
					break
				}
			}
			ready.Done()
			if err != nil {
				fail(err)
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
	ready.Wait()
	var snap0 sched.Snapshot
	if srv.sched != nil {
		snap0 = srv.sched.Snapshot()
	}
	runtime.GC()
	b.ResetTimer()
	cpu0 := processCPU()
	t0 := time.Now()
	close(start)
	done.Wait()
	elapsed := time.Since(t0)
	cpu := processCPU() - cpu0
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	if srv.sched != nil {
		parks, polls, tasks := schedCounts(srv.sched.Snapshot(), snap0)
		b.ReportMetric(float64(parks)/float64(b.N), "parks/op")
		b.ReportMetric(float64(polls)/float64(b.N), "polls/op")
		b.ReportMetric(float64(tasks)/float64(b.N), "tasks/op")
	}

	all := hists[0]
	for _, h := range hists[1:conns] {
		all.Merge(h)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(all.ValueAtQuantile(50))/1e3, "p50-µs")
	b.ReportMetric(float64(all.ValueAtQuantile(99))/1e3, "p99-µs")
	b.ReportMetric(float64(cpu)/1e3/float64(b.N), "cpu-µs/op")
}

// schedCounts returns the parks, polls and tasks run of all workers between
// two snapshots.
func schedCounts(now, then sched.Snapshot) (parks, polls, tasks int64) {
	for i, w := range now.Workers {
		parks += w.Parks - then.Workers[i].Parks
		polls += w.Polls - then.Workers[i].Polls
	}
	for i, l := range now.Lanes {
		tasks += l.Run - then.Lanes[i].Run
	}
	return parks, polls, tasks
}

// processCPU returns the CPU time the process has used, user and system,
// in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
