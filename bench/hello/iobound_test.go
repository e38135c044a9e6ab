//go:build linux

package hello

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/await"
	"github.com/sluice-go/sluice/examples/weather"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/server"
)

// The I/O-bound handler of the issue: 1 ms of CPU, then a 10 ms call to a
// downstream service through an http.Client.
const (
	ioCPU      = time.Millisecond
	ioDownWait = 10 * time.Millisecond
	envIOConns = "SLUICE_BENCH_IO_CONNS" // client connections of BenchmarkIOBound
)

// ioHandler returns the I/O-bound handler: it spins for cpu, then asks
// downstream, through client, with the request's context, and answers what
// downstream said.
func ioHandler(cpu time.Duration, downstream string, client *http.Client) http.HandlerFunc {
	spin := weather.NewSpinner()
	return func(w http.ResponseWriter, r *http.Request) {
		spin.Spin(cpu)
		req, err := http.NewRequestWithContext(r.Context(), "GET", downstream, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			http.Error(w, "downstream failed", http.StatusBadGateway)
			return
		}
		_, _ = w.Write(b)
	}
}

// startDownstream is the slow service: a net/http server that answers after
// ioDownWait, without using CPU meanwhile.
func startDownstream() (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(ioDownWait)
		w.Write([]byte("downstream"))
	})}
	go hs.Serve(l)
	return "http://" + l.Addr().String() + "/", func() { hs.Close() }, nil
}

// BenchmarkIOBound compares, below saturation, an I/O-bound http.Handler on
// net/http and on sluice with the await client (its worker released during
// the downstream call), and on sluice with a plain client, which holds its
// worker for the call (the isolated model). It reports requests per second
// and latency percentiles of a closed loop of SLUICE_BENCH_IO_CONNS
// (default 8) clients.
func BenchmarkIOBound(b *testing.B) {
	conns, err := envInt(envIOConns, 8)
	if err != nil {
		b.Fatal(err)
	}
	down, stopDown, err := startDownstream()
	if err != nil {
		b.Fatal(err)
	}
	defer stopDown()
	downTr := &http.Transport{MaxIdleConnsPerHost: 256}
	defer downTr.CloseIdleConnections()
	plain := &http.Client{Transport: downTr}
	awaiting := await.NewClient(plain)

	targets := []struct {
		name  string
		start func() (string, func(), error)
	}{
		{"sluice-await", func() (string, func(), error) { return startSluiceHTTP(ioHandler(ioCPU, down, awaiting)) }},
		{"sluice-blocking", func() (string, func(), error) { return startSluiceHTTP(ioHandler(ioCPU, down, plain)) }},
		{"nethttp", func() (string, func(), error) { return startNetHTTPHandler(ioHandler(ioCPU, down, plain)) }},
	}
	for _, tg := range targets {
		b.Run(tg.name, func(b *testing.B) {
			addr, stop, err := tg.start()
			if err != nil {
				b.Fatal(err)
			}
			defer stop()
			closedLoop(b, addr, conns)
		})
	}
}

func startSluiceHTTP(h http.Handler) (string, func(), error) {
	rt, err := srt.New(srt.Config{})
	if err != nil {
		return "", nil, err
	}
	if err := rt.Start(); err != nil {
		return "", nil, err
	}
	// No age limit: this measures how many requests a blocking handler
	// lets through, not what admission rejects.
	srv, err := server.Listen(rt, "127.0.0.1:0", server.HTTPHandler(h), server.Config{Admission: admit.Config{MaxAge: -1}})
	if err != nil {
		rt.Stop(context.Background())
		return "", nil, err
	}
	return srv.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Close(ctx)
		rt.Stop(ctx)
	}, nil
}

func startNetHTTPHandler(h http.Handler) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(l)
	return l.Addr().String(), func() { hs.Close() }, nil
}

// closedLoop sends b.N requests from conns clients, each waiting for its
// answer before the next, and reports throughput and latency.
func closedLoop(b *testing.B, addr string, conns int) {
	tr := &http.Transport{MaxIdleConnsPerHost: conns}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	url := "http://" + addr + "/"
	var next atomic.Int64
	var failed atomic.Int64
	lat := make([][]time.Duration, conns)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				resp, err := client.Get(url)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					failed.Add(1)
					continue
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d requests failed", n, b.N)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}
