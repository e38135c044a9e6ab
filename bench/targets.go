package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"time"

	"github.com/sluice-go/sluice/examples/weather"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/httpgate"
	"github.com/sluice-go/sluice/queue"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/server"
)

// Target is a server under test, started on 127.0.0.1 with the weather
// service (examples/weather) shaped by its options.
type Target struct {
	// Name identifies the target in reports: "sluice", "nethttp",
	// "semaphore", "sluice-half", "gosched".
	Name string
	// Start starts the target.
	Start func(opts weather.Options) (*Running, error)
}

// Running is a started target.
type Running struct {
	// URL is the target's base URL.
	URL string
	// Stop stops the target and releases everything it holds.
	Stop func() error
	// Stats, when set, returns the target's own counters (the sluice
	// server's admission Stats), for the report.
	Stats func() any
}

// SemaphoreTimeout is how long the naive semaphore target lets a request
// wait for a slot before answering 503: the common fix, measured in the
// design to collapse at 5x.
const SemaphoreTimeout = 100 * time.Millisecond

// Targets returns the targets of the overload benchmark:
//
//   - sluice: the default runtime (one pinned worker per CPU), the busy
//     gate's isolated rule (fewer requests than workers), and the 100 ms
//     timed queue in CoDel order, which also bounds a request's age from
//     its arrival in the kernel (server.Config.MaxAge) and, under a
//     standing overload, rejects requests older than 5 ms;
//   - nethttp: plain net/http;
//   - semaphore: net/http behind a semaphore of GOMAXPROCS slots with a
//     100 ms wait, the common fix;
//   - sluice-half: sluice with the busy gate's default instead, admitting
//     while at most half the workers are busy (the seeds' io_isolated
//     default), to measure what that rule costs and buys;
//   - gosched: net/http behind package httpgate with the GoSched gate
//     (running plus runnable goroutines at most twice GOMAXPROCS) and the
//     same timed queue, for users who stay on net/http.
//
// The handler is the weather service in every one.
func Targets() []Target {
	return []Target{
		{Name: "sluice", Start: func(o weather.Options) (*Running, error) {
			return startSluice(o, gate.BusyOptions{Isolated: true})
		}},
		{Name: "nethttp", Start: func(o weather.Options) (*Running, error) {
			return running(startNetHTTP(weather.Handler(o)))
		}},
		{Name: "semaphore", Start: func(o weather.Options) (*Running, error) {
			return running(startNetHTTP(semaphore(runtime.GOMAXPROCS(0), SemaphoreTimeout, weather.Handler(o))))
		}},
		{Name: "sluice-half", Start: func(o weather.Options) (*Running, error) {
			return startSluice(o, gate.BusyOptions{})
		}},
		{Name: "gosched", Start: startGoSched},
	}
}

// GoSchedFraction is the gosched target's gate setting: admit while the
// running and runnable goroutines are at most twice GOMAXPROCS. The gate
// counts every goroutine of the process (the server's own, timers, GC
// workers), so at 1 it refused about half of a light load in the admission
// benchmarks; 2 is the usable setting on a small machine
// (docs/benchmarks.md, "GoSched on net/http").
const GoSchedFraction = 2.0

// startGoSched serves the handler on net/http behind package httpgate with
// the GoSched gate and the 100 ms timed queue: the nearest thing to the
// executor's busy count that plain net/http can have.
func startGoSched(o weather.Options) (*Running, error) {
	adm := httpgate.New(httpgate.Options{
		Gate:  gate.NewGoSched(gate.GoSchedOptions{Fraction: GoSchedFraction}),
		Queue: &queue.Options{},
	})
	url, stop, err := startNetHTTP(adm.Wrap(weather.Handler(o)))
	if err != nil {
		adm.Close()
		return nil, err
	}
	return &Running{
		URL:   url,
		Stop:  func() error { err := stop(); adm.Close(); return err },
		Stats: func() any { return adm.Stats() },
	}, nil
}

// TargetByName returns the target of Targets with that name.
func TargetByName(name string) (Target, bool) {
	for _, t := range Targets() {
		if t.Name == name {
			return t, true
		}
	}
	return Target{}, false
}

func running(url string, stop func() error, err error) (*Running, error) {
	if err != nil {
		return nil, err
	}
	return &Running{URL: url, Stop: stop}, nil
}

func startSluice(o weather.Options, busy gate.BusyOptions) (*Running, error) {
	rt, err := srt.New()
	if err != nil {
		return nil, err
	}
	if err := rt.Start(); err != nil {
		return nil, err
	}
	srv, err := server.Listen(rt.Scheduler, "127.0.0.1:0", server.HTTPHandler(weather.Handler(o)), server.Config{
		Gate:  gate.NewBusy(rt.Scheduler, busy),
		Queue: &queue.Options{Order: queue.CoDel},
	})
	if err != nil {
		return nil, errors.Join(err, rt.Stop(context.Background()))
	}
	stop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return errors.Join(srv.Close(ctx), rt.Stop(ctx))
	}
	return &Running{URL: "http://" + srv.Addr().String(), Stop: stop, Stats: func() any { return srv.Stats() }}, nil
}

func startNetHTTP(h http.Handler) (string, func() error, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: h}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(l) }()
	stop := func() error {
		err := hs.Close()
		if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		return err
	}
	return "http://" + l.Addr().String(), stop, nil
}

// semaphore is the naive gate: n requests at once; the others wait up to
// wait for a slot, then get a plain 503.
func semaphore(n int, wait time.Duration, next http.Handler) http.Handler {
	slots := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case slots <- struct{}{}:
		case <-t.C:
			http.Error(w, fmt.Sprintf("busy: no slot within %v", wait), http.StatusServiceUnavailable)
			return
		case <-r.Context().Done():
			return
		}
		defer func() { <-slots }()
		next.ServeHTTP(w, r)
	})
}
