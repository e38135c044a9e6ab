//go:build linux

package hello

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/await"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/internal/gatetest"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/server"
)

// The slow-database case of "Rejecting requests" (its part on the gate; see
// docs/background.md): an I/O-bound server
// whose database becomes twice as slow. A fixed concurrency limit tuned for
// the normal latency is reached at the same request rate once every request
// waits twice as long, and rejects requests that this server has the CPU to
// serve (retrying them elsewhere does not help: the shared database is the
// bottleneck); the busy-worker gate looks at the CPU, which the slowdown
// does not load, and keeps admitting.
const (
	// slowCPU is the handler's CPU work before its downstream call.
	slowCPU = 200 * time.Microsecond
	// slowRate is the offered load, in requests per second, the same for
	// every run (SLUICE_BENCH_SLOW_RATE changes it): far below what the
	// server's CPUs can do (a request costs well under 1 ms of CPU, client
	// and downstream included), so that any rejection is a false one.
	slowRate    = 400
	envSlowRate = "SLUICE_BENCH_SLOW_RATE"
	// slowNormal and slowSlow are the downstream latencies: normal, and the
	// database twice as slow.
	slowNormal = 10 * time.Millisecond
	slowSlow   = 2 * slowNormal
	// slowOverhead is what a request spends in the server besides its CPU
	// work and its downstream wait (time.Sleep's overshoot in the
	// downstream, loopback round trips, scheduling), as measured at the
	// normal latency: BenchmarkIOSlowdown reports the whole as handler-ms,
	// about 11.2 ms at D = 10 ms on a 2-vCPU VM.
	slowOverhead = time.Millisecond
	// slowWarmUp is the time the load runs, at the same rate, before the
	// measured requests.
	slowWarmUp = 250 * time.Millisecond
	// slowTimeout bounds one request of the load client; a request that
	// takes it fails the benchmark.
	slowTimeout = 5 * time.Second
)

// slowLimit returns the fixed concurrency limit for an offered rate, tuned
// as an operator would for the normal latency: the concurrency the load
// needs, by Little's law (requests in flight = arrival rate × time in the
// server), plus 20% headroom, rounded up. At 400/s and 10 + 0.2 + 1 ms that
// is ceil(1.2 × 400 × 11.2 ms) = ceil(5.38) = 6, 34% over the 4.48 needed
// (the rounding adds to the 20%). With the database twice as slow the same
// load needs 400 × 21.2 ms = 8.48 requests in flight, so the limit admits at
// most about 6 / 8.48 = 71% of them and rejects the rest.
func slowLimit(rate int) int {
	return int(math.Ceil(1.2 * float64(rate) * (slowNormal + slowCPU + slowOverhead).Seconds()))
}

// BenchmarkIOSlowdown runs the I/O-bound handler (slowCPU of CPU, then a
// call through await.NewClient to a downstream net/http server that answers
// after D) on sluice behind two gates, busy (gate.NewBusy, the default 50%)
// and concurrency (gate.NewConcurrency with slowLimit(rate), tuned for D = 10 ms),
// each with D = 10 ms (normal) and D = 20 ms (slow, the database twice as
// slow).
//
// The load is open-loop and paced: a dispatcher starts one request every
// 1/rate seconds, each on its own goroutine, over a pool of kept-alive
// connections (as many as are in use at once), whatever the answers before
// it. A slower
// downstream so makes more requests wait at once, as it does for a real
// server whose clients do not slow down with it; a closed loop would hide
// this, its concurrency being its number of clients. b.N is the number of
// requests measured (at 400/s, -benchtime 2000x is a 5 s run), sent after
// slowWarmUp of the same load; the run stops by itself once they are
// answered, each within slowTimeout.
//
// It reports offered-req/s (the rate the dispatcher achieved), ok-req/s
// (200s per second of the run), rejected-% (503 with Sluice-Not-Started, of
// the requests sent), the median and 99th percentile latency of the 200s in
// milliseconds, handler-ms, the mean time an admitted request spent in the
// server (from admission to the end of its handler, as its gate's Release
// is told), and inflight-mean and inflight-max, the server's admitted
// requests in flight (Server.Stats) sampled at each dispatch, that is what
// the gate sees when it decides (less than the time average, rate ×
// handler-ms: between two arrivals the count only falls, and a sample is
// taken just before an arrival, at its lowest), and worker-busy-%, the
// share of the time the executor's workers were busy (not parked). Any
// other answer, or a client error, fails it.
func BenchmarkIOSlowdown(b *testing.B) {
	rate, err := envInt(envSlowRate, slowRate)
	if err != nil {
		b.Fatal(err)
	}
	limit := slowLimit(rate)
	gates := []struct {
		name string
		make func() admit.Policy
	}{
		{"busy", func() admit.Policy { return gatetest.Busy(b, gate.BusyConfig{}) }},
		{"concurrency", func() admit.Policy { return gatetest.Concurrency(b, limit) }},
	}
	latencies := []struct {
		name string
		d    time.Duration
	}{
		{"normal", slowNormal},
		{"slow", slowSlow},
	}
	for _, g := range gates {
		b.Run(g.name, func(b *testing.B) {
			for _, l := range latencies {
				b.Run(l.name, func(b *testing.B) {
					runSlowdown(b, rate, l.d, g.make)
				})
			}
		})
	}
}

// runSlowdown runs one case: a downstream that answers after d, the sluice
// server behind the gate that mk makes, and the paced load.
func runSlowdown(b *testing.B, rate int, d time.Duration, mk func() admit.Policy) {
	down, stopDown, err := startDelayed(d)
	if err != nil {
		b.Fatal(err)
	}
	defer stopDown()
	downTr := &http.Transport{MaxIdleConnsPerHost: 1024}
	defer downTr.CloseIdleConnections()
	downClient := await.NewClient(&http.Client{Transport: downTr})

	rt, err := srt.New(srt.Config{})
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Stop(ctx); err != nil {
			b.Error(err)
		}
	}()
	h := server.HTTPHandler(slowdownHandler(down, downClient))
	g := &timedGate{}
	srv, err := server.Listen(rt, "127.0.0.1:0", h, server.Config{Admission: admit.Config{
		Policies: []admit.Policy{g}, Gates: []admit.Policy{mk()},
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			b.Error(err)
		}
	}()

	tr := &http.Transport{MaxIdleConnsPerHost: 1024}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: slowTimeout}
	url := "http://" + srv.Addr().String() + "/"

	warm := int(float64(rate) * slowWarmUp.Seconds())
	if _, err := pacedLoad(client, url, rate, warm, nil); err != nil {
		b.Fatalf("warm-up: %v", err)
	}
	var inflight []int64
	sample := func() { inflight = append(inflight, srv.Stats().InFlight) }
	st0 := srv.Stats()
	g.released.Store(0)
	g.total.Store(0)
	snap0 := rt.Snapshot()
	t0 := time.Now()
	b.ResetTimer()
	res, err := pacedLoad(client, url, rate, b.N, sample)
	b.StopTimer()
	snap, wall := rt.Snapshot(), time.Since(t0)
	if err != nil {
		b.Fatal(err)
	}
	st := srv.Stats()
	if got := st.Rejected - st0.Rejected; got != int64(res.rejected) {
		b.Errorf("the server counted %d rejections, the client %d", got, res.rejected)
	}

	res.report(b)
	var sum, top int64
	for _, n := range inflight {
		sum += n
		top = max(top, n)
	}
	b.ReportMetric(float64(sum)/float64(max(1, len(inflight))), "inflight-mean")
	var busyNs int64
	for i, w := range snap.Workers {
		busyNs += w.BusyNs - snap0.Workers[i].BusyNs
	}
	b.ReportMetric(100*float64(busyNs)/float64(int64(len(snap.Workers))*int64(wall)), "worker-busy-%")
	if n := g.released.Load(); n > 0 {
		b.ReportMetric(float64(g.total.Load())/float64(n)/1e6, "handler-ms")
	}
	b.ReportMetric(float64(top), "inflight-max")
}

// timedGate is a policy that admits everything and adds up the time the
// admitted requests spent in the server, from admission to the end of the
// handler, as their outcomes say: the time in the server of Little's law.
type timedGate struct {
	released, total atomic.Int64
}

func (g *timedGate) Admit(*admit.Attempt) *admit.Refusal { return nil }

func (g *timedGate) Done(_ *admit.Attempt, o admit.Outcome) {
	if o.Canceled {
		return
	}
	g.released.Add(1)
	g.total.Add(int64(o.Latency))
}

// report reports the offered and served rates, the share rejected and the
// latency of the 200s.
func (res slowdownResult) report(b *testing.B) {
	span := res.span.Seconds()
	b.ReportMetric(float64(b.N)/span, "offered-req/s")
	b.ReportMetric(float64(len(res.ok))/span, "ok-req/s")
	b.ReportMetric(100*float64(res.rejected)/float64(b.N), "rejected-%")
	if len(res.ok) > 0 {
		slices.Sort(res.ok)
		b.ReportMetric(float64(res.ok[len(res.ok)/2])/1e6, "p50-ms")
		b.ReportMetric(float64(res.ok[len(res.ok)*99/100])/1e6, "p99-ms")
	}
}

// slowdownResult is what the paced load saw.
type slowdownResult struct {
	ok       []time.Duration // the latencies of the 200s
	rejected int             // 503s with Sluice-Not-Started
	span     time.Duration   // n dispatch intervals, as achieved
}

// pacedLoad sends n GET requests to url at rate per second, each from its own
// goroutine at its own time (an open loop), calls sample (if not nil) at
// each dispatch, waits for every answer and returns them. Any answer but
// 200 or a rejection, or any error, is an error.
func pacedLoad(client *http.Client, url string, rate, n int, sample func()) (slowdownResult, error) {
	type answer struct {
		status int // 200, 503 (a rejection), or 0 (err is set)
		lat    time.Duration
		err    error
	}
	answers := make([]answer, n)
	interval := time.Second / time.Duration(rate)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		if sample != nil {
			sample()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := &answers[i]
			t0 := time.Now()
			resp, err := client.Get(url)
			if err != nil {
				a.err = err
				return
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			a.lat = time.Since(t0)
			switch {
			case err != nil:
				a.err = err
			case resp.StatusCode == http.StatusOK:
				a.status = http.StatusOK
			case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(server.NotStartedHeader) == "1":
				a.status = http.StatusServiceUnavailable
			default:
				a.err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}()
	}
	// The span of n arrivals is n intervals: the last dispatch's time plus
	// one interval, as achieved.
	res := slowdownResult{span: time.Since(start) + interval}
	wg.Wait()
	var errs []error
	for _, a := range answers {
		switch {
		case a.err != nil:
			errs = append(errs, a.err)
		case a.status == http.StatusOK:
			res.ok = append(res.ok, a.lat)
		default:
			res.rejected++
		}
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("%d of %d requests failed, the first: %w", len(errs), n, errs[0])
	}
	return res, nil
}

// slowdownHandler spins slowCPU, then asks downstream, through client.
func slowdownHandler(downstream string, client *http.Client) http.HandlerFunc {
	return ioHandler(slowCPU, downstream, client)
}

// startDelayed is the database: a net/http server on 127.0.0.1 that answers
// after d, without using CPU meanwhile.
func startDelayed(d time.Duration) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(d)
		_, _ = w.Write([]byte("row"))
	})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(l)
	}()
	return "http://" + l.Addr().String() + "/", func() {
		_ = hs.Close()
		<-done
	}, nil
}
