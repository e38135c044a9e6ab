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
	// "semaphore".
	Name string
	// Start starts the target and returns its base URL and a function
	// that stops it and releases everything it holds.
	Start func(opts weather.Options) (url string, stop func() error, err error)
}

// SemaphoreTimeout is how long the naive semaphore target lets a request
// wait for a slot before answering 503: the common fix, measured in the
// design to collapse at 5x.
const SemaphoreTimeout = 100 * time.Millisecond

// Targets returns the three targets of the overload benchmark: sluice (the
// default runtime, the busy-worker gate and the 100 ms timed queue), plain
// net/http, and net/http behind a semaphore of GOMAXPROCS slots with a
// 100 ms wait.
func Targets() []Target {
	return []Target{
		{Name: "sluice", Start: startSluice},
		{Name: "nethttp", Start: func(o weather.Options) (string, func() error, error) {
			return startNetHTTP(weather.Handler(o))
		}},
		{Name: "semaphore", Start: func(o weather.Options) (string, func() error, error) {
			return startNetHTTP(semaphore(runtime.GOMAXPROCS(0), SemaphoreTimeout, weather.Handler(o)))
		}},
	}
}

func startSluice(o weather.Options) (string, func() error, error) {
	rt, err := srt.New()
	if err != nil {
		return "", nil, err
	}
	if err := rt.Start(); err != nil {
		return "", nil, err
	}
	srv, err := server.Listen(rt.Scheduler, "127.0.0.1:0", server.HTTPHandler(weather.Handler(o)), server.Config{
		Gate:  gate.NewBusy(rt.Scheduler, gate.BusyOptions{}),
		Queue: &queue.Options{},
	})
	if err != nil {
		return "", nil, errors.Join(err, rt.Stop(context.Background()))
	}
	stop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return errors.Join(srv.Close(ctx), rt.Stop(ctx))
	}
	return "http://" + srv.Addr().String(), stop, nil
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
