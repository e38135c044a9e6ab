//go:build linux

package hello

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/selfsigned"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/sched"
	"github.com/sluice-go/sluice/server"
)

// Environment variables of the benchmarks (see also idle_test.go and
// load_test.go).
const (
	envConns = "SLUICE_BENCH_CONNS"      // client connections of BenchmarkHello
	envPin   = "SLUICE_BENCH_PIN"        // "0": sluice workers unpinned
	envProcs = "SLUICE_BENCH_GOMAXPROCS" // GOMAXPROCS while sluice runs
	envSpin  = "SLUICE_BENCH_SPIN"       // sluice workers' spin before park (runtime.Config.Spin), e.g. 20us
)

// running is a server under test, started on 127.0.0.1.
type running struct {
	addr string
	open func() int // connections the server holds open; nil if it cannot say
	stop func() error
	// sched is sluice's scheduler, for its counters; nil for the others.
	sched *sched.Scheduler
	// want is the response to expect; the zero value means the hello one.
	want expectation
}

func (r *running) expect() expectation {
	if r.want.status == "" {
		return helloExpect
	}
	return r.want
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
	{"sluice-reject", startSluiceReject},
	// The hello over TLS (HTTP/1.1 by ALPN, a throwaway certificate):
	// the client's connections are handshaken before the timed run.
	{"sluice-native-tls", overTLS(startSluiceNative)},
	{"sluice-adapter-tls", overTLS(startSluiceAdapter)},
	{"nethttp-tls", overTLS(startNetHTTP)},
	{"fasthttp-tls", overTLS(startFastHTTP)},
	// A file of SLUICE_BENCH_FILE_SIZE bytes through http.ServeFile.
	{"sluice-file", serveFile(startSluiceAdapted)},
	{"nethttp-file", serveFile(startNetHTTPWith)},
	{"sluice-file-tls", overTLS(serveFile(startSluiceAdapted))},
	{"nethttp-file-tls", overTLS(serveFile(startNetHTTPWith))},
	// A POST of SLUICE_BENCH_POST_SIZE bytes, read whole, answered hello.
	{"sluice-post", servePost(startSluiceAdapted)},
	{"nethttp-post", servePost(startNetHTTPWith)},
	{"sluice-post-tls", overTLS(servePost(startSluiceAdapted))},
	{"nethttp-post-tls", overTLS(servePost(startNetHTTPWith))},
}

// benchTLS is the TLS configuration of the target being started, set by
// overTLS for the duration of its start (benchmarks run one at a time).
var benchTLS *tls.Config

// overTLS makes start's server speak TLS: its address gets the tlsPrefix
// that dialClient reads.
func overTLS(start func() (*running, error)) func() (*running, error) {
	return func() (*running, error) {
		cert, _, err := selfsigned.New()
		if err != nil {
			return nil, err
		}
		benchTLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		defer func() { benchTLS = nil }()
		r, err := start()
		if err != nil {
			return nil, err
		}
		r.addr = tlsPrefix + r.addr
		return r, nil
	}
}

// listen opens the listener of a net/http or fasthttp target, over TLS
// while benchTLS is set, and returns it with its address.
func listen() (net.Listener, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	addr := ln.Addr().String()
	if benchTLS != nil {
		ln = tls.NewListener(ln, benchTLS)
	}
	return ln, addr, nil
}

// refuseAll is a gate that admits nothing: every request is rejected early,
// which measures the cost of a rejection against a hello response.
type refuseAll struct{}

var refusedByAll = &admit.Refusal{Reason: "refuse-all"}

func (refuseAll) Admit(*admit.Attempt) *admit.Refusal { return refusedByAll }
func (refuseAll) Done(*admit.Attempt, admit.Outcome)  {}

// startSluiceReject is the native hello server behind refuseAll.
func startSluiceReject() (*running, error) {
	r, err := startSluiceConfig(server.HandlerFunc(helloNative), server.Config{Admission: admit.Config{Gates: []admit.Policy{refuseAll{}}}})
	if err != nil {
		return nil, err
	}
	r.want = rejectExpect
	return r, nil
}

// helloNative is the hello handler in the server's native form.
func helloNative(w *server.ResponseWriter, _ *server.Request) {
	w.SetHeader("Content-Type", "text/plain")
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
// while the runtime runs (runtime.Config.GOMAXPROCS), SLUICE_BENCH_SPIN=20us
// makes idle workers poll that long before they sleep (runtime.Config.Spin).
func startSluice(h server.Handler) (*running, error) {
	return startSluiceConfig(h, server.Config{TLS: benchTLS})
}

// startSluiceConfig is startSluice with a server configuration.
func startSluiceConfig(h server.Handler, cfg server.Config) (*running, error) {
	var rc srt.Config
	if os.Getenv(envPin) == "0" {
		rc.Pinning = srt.PinOff
	}
	if v := os.Getenv(envSpin); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", envSpin, err)
		}
		rc.Spin = d
	}
	if os.Getenv(envProcs) != "" {
		n, err := envInt(envProcs, 0)
		if err != nil {
			return nil, err
		}
		rc.GOMAXPROCS = n
	}
	rt, err := srt.New(rc)
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
	srv, err := server.Listen(rt, "127.0.0.1:0", h, cfg)
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
func startNetHTTP() (*running, error) { return startNetHTTPWith(http.HandlerFunc(helloHTTP)) }

// startNetHTTPWith serves h with a default net/http Server.
func startNetHTTPWith(h http.Handler) (*running, error) {
	ln, addr, err := listen()
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: h}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	return &running{
		addr: addr,
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
	ln, addr, err := listen()
	if err != nil {
		return nil, err
	}
	fs := &fasthttp.Server{Handler: helloFast}
	done := make(chan error, 1)
	go func() { done <- fs.Serve(ln) }()
	return &running{
		addr: addr,
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
// previous response has arrived. The client runs in a child process by
// default (SLUICE_BENCH_CLIENT=process: this test binary run again, see
// loadClientMain), as a server's clients run elsewhere, or in this process
// with SLUICE_BENCH_CLIENT=inproc, where it competes with the server for
// the Go scheduler's Ps. Either way it runs on the same CPUs as the server,
// alike for every target.
//
// It reports req/s, the median and 99th percentile latency of a request
// (write to end of response) in microseconds, and allocations per request,
// which are the server's: the client allocates nothing per request, and in
// a child process none of its allocations are counted. With the client in
// a child process it reports the CPU time per request (user and system) of
// the server's process and of the client's apart, server-cpu-µs/op and
// client-cpu-µs/op, and the server's system time alone, server-sys-µs/op
// (on loopback it includes delivering the responses); in this process, the process's, both together, as
// cpu-µs/op. For sluice it also reports the workers' parks (sleeps in
// epoll_wait), polls and tasks run per request.
func BenchmarkHello(b *testing.B) {
	conns, err := envInt(envConns, 64)
	if err != nil {
		b.Fatal(err)
	}
	runLoad := runLoadProcess
	switch mode := os.Getenv(envClient); mode {
	case "", clientProcess:
	case clientInProc:
		runLoad = runLoadInProc
	default:
		b.Fatalf("%s=%q: want %q or %q", envClient, mode, clientProcess, clientInProc)
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

// runLoadProcess starts the load client in a child process, with conns
// connections to srv, lets it warm up, then has it send b.N requests,
// timed, and reports req/s and latencies from its result, the CPU time of
// this process (the server) and of the child apart, and for sluice the
// workers' parks, polls and tasks per request. The child is gone when it
// returns.
func runLoadProcess(b *testing.B, srv *running, conns int) {
	p, err := startLoadProcess(srv.addr, conns, b.N, srv.expect())
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := p.close(); err != nil && !b.Failed() {
			b.Error(err)
		}
	}()
	var snap0 sched.Snapshot
	if srv.sched != nil {
		snap0 = srv.sched.Snapshot()
	}
	runtime.GC()
	b.ResetTimer()
	cpu0, sys0 := processCPU()
	res, err := p.goRun()
	cpu, sys := processCPU()
	cpu, sys = cpu-cpu0, sys-sys0
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if res.Requests != int64(b.N) || res.ElapsedNs <= 0 {
		b.Fatalf("load client: %d requests in %d ns, want %d", res.Requests, res.ElapsedNs, b.N)
	}
	if srv.sched != nil {
		reportSched(b, srv.sched.Snapshot(), snap0)
	}
	b.ReportMetric(float64(b.N)/time.Duration(res.ElapsedNs).Seconds(), "req/s")
	b.ReportMetric(float64(res.P50Ns)/1e3, "p50-µs")
	b.ReportMetric(float64(res.P99Ns)/1e3, "p99-µs")
	b.ReportMetric(float64(cpu)/1e3/float64(b.N), "server-cpu-µs/op")
	b.ReportMetric(float64(sys)/1e3/float64(b.N), "server-sys-µs/op")
	b.ReportMetric(float64(res.CPUNs)/1e3/float64(b.N), "client-cpu-µs/op")
}

// runLoadInProc dials conns connections to srv from this process, warms
// them up, then sends b.N requests spread over them, timed, and reports
// req/s, latencies and the process's CPU time (client and server); for
// sluice, also the workers' parks, polls and tasks per request.
func runLoadInProc(b *testing.B, srv *running, conns int) {
	l, err := dialLoad(srv.addr, conns, srv.expect())
	if err != nil {
		b.Fatal(err)
	}
	defer l.close()
	var (
		snap0 sched.Snapshot
		cpu0  int64
	)
	elapsed, err := l.run(int64(b.N), warmUpRequests, func() error {
		if srv.sched != nil {
			snap0 = srv.sched.Snapshot()
		}
		runtime.GC()
		b.ResetTimer()
		cpu0, _ = processCPU()
		return nil
	})
	cpu, _ := processCPU()
	cpu -= cpu0
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if srv.sched != nil {
		reportSched(b, srv.sched.Snapshot(), snap0)
	}
	p50, p99 := l.quantiles()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(p50)/1e3, "p50-µs")
	b.ReportMetric(float64(p99)/1e3, "p99-µs")
	b.ReportMetric(float64(cpu)/1e3/float64(b.N), "cpu-µs/op")
}

// reportSched reports sluice's parks, polls and tasks per request between
// two snapshots of its scheduler.
func reportSched(b *testing.B, now, then sched.Snapshot) {
	parks, polls, tasks := schedCounts(now, then)
	b.ReportMetric(float64(parks)/float64(b.N), "parks/op")
	b.ReportMetric(float64(polls)/float64(b.N), "polls/op")
	b.ReportMetric(float64(tasks)/float64(b.N), "tasks/op")
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
// and the system part alone (the system calls, and on loopback the
// delivery of what the process sends), in nanoseconds.
func processCPU() (total, sys int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), ru.Stime.Nano()
}
