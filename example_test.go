package sluice_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
)

// The README's protected server, as written there: any http.Handler,
// served until Ctrl-C or SIGTERM (what Kubernetes sends a pod it
// stops), then shut down gracefully. What protects it is the
// age limit: a request that has waited 100 ms since the kernel received it
// is rejected, unstarted, before its handler runs.
func Example() {
	mux := http.NewServeMux() // any http.Handler: routers and middleware run unchanged
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM) // until Ctrl-C or SIGTERM (Kubernetes)
	defer stop()
	err := sluice.ListenAndServe(ctx, ":8080", mux, sluice.Config{
		Admission: admit.Config{MaxAge: 100 * time.Millisecond}, // reject what waited 100 ms, unstarted
	})
	if err != nil {
		log.Fatal(err)
	}
}

// For I/O-bound handlers (they wait for databases and other services), the
// busy-worker gate keeps half the workers free for the continuations of
// requests already started, and the timed queue holds what it refuses for
// up to 100 ms.
func Example_ioBound() {
	mux := http.NewServeMux()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	busy, err := gate.NewBusy(gate.BusyConfig{Fraction: 0.5})
	if err != nil {
		log.Fatal(err)
	}
	err = sluice.ListenAndServe(ctx, ":8080", mux, sluice.Config{
		Admission: admit.Config{
			Gates: []admit.Policy{busy},
			Queue: &admit.QueueConfig{}, // up to MaxAge (100 ms) from arrival, then 503
		},
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Listen, then Run until the context ends; the server's address and
// counters are there meanwhile.
func ExampleListen() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	srv, err := sluice.Listen("127.0.0.1:0", mux, sluice.Config{})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()

	resp, err := http.Get("http://" + srv.Addr().String() + "/hello")
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	fmt.Printf("%d %s", resp.StatusCode, body)
	fmt.Println("admitted:", srv.Stats().Admitted)

	cancel()
	fmt.Println("stopped:", <-done)
	// Output:
	// 200 hello
	// admitted: 1
	// stopped: <nil>
}

// On Kubernetes: the probes on an admin address of their own, never behind
// the protected server (an overloaded server's 503s are its protection
// working, not a pod to restart or to take out of the Service), readiness
// withdrawn at SIGTERM, and the server stopped only once the endpoints
// have had time to forget the pod.
func Example_kubernetes() {
	mux := http.NewServeMux()
	srv, err := sluice.Listen(":8080", mux, sluice.Config{})
	if err != nil {
		log.Fatal(err)
	}

	var stopping atomic.Bool
	admin := http.NewServeMux()
	admin.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	admin.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if stopping.Load() {
			http.Error(w, "stopping", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})
	go http.ListenAndServe(":9090", admin) // the pod's internal port: probes and /metrics

	sig, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	serve, cancel := context.WithCancel(context.Background())
	go func() {
		<-sig.Done()
		stopping.Store(true)        // readiness fails: the pod leaves the Service's endpoints
		time.Sleep(5 * time.Second) // while they forget it, requests still come: serve them
		cancel()                    // then stop accepting, and drain (up to sluice.ShutdownGrace)
	}()
	if err := srv.Run(serve); err != nil {
		log.Fatal(err)
	}
}
