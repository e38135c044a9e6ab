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
	"github.com/sluice-go/sluice/queue"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/server"
)

// Target is a server under test, started on 127.0.0.1 with the weather
// service (examples/weather) shaped by its options.
type Target struct {
	// Name identifies the target in reports: "sluice", "nethttp",
	// "semaphore", "sluice-half".
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
//     default), to measure what that rule costs and buys.
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
	}
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
