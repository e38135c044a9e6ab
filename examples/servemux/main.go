// Command servemux runs an ordinary net/http ServeMux, with a middleware,
// on sluice: the handlers are plain http.HandlerFuncs, unchanged; only the
// line that starts the server differs from a net/http program.
//
//	go run ./examples/servemux -addr 127.0.0.1:8080
//	curl -s localhost:8080/hello/you
//
// It stops on Ctrl-C (or SIGTERM), letting requests in progress finish.
// Admission is sluice's default: a request that has waited 100 ms since
// the kernel received it is answered 503, unstarted.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/await"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	slog.Info("serving", "addr", *addr)
	if err := sluice.ListenAndServe(ctx, *addr, logRequests(newMux()), sluice.Config{}); err != nil {
		log.Fatal(err)
	}
	slog.Info("stopped")
}

// newMux is the application: nothing in it knows about sluice.
func newMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello/{name}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "Hello, %s!\n", r.PathValue("name"))
	})
	mux.HandleFunc("GET /time", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"now": time.Now().UTC().Format(time.RFC3339)})
	})
	// A handler that waits: await.Sleep releases the worker meanwhile
	// (time.Sleep would hold it), as the await package's http.Client and
	// database/sql wrappers do for real downstream calls.
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		if err := await.Sleep(r.Context(), 50*time.Millisecond); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "done waiting")
	})
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		var v any
		if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
			http.Error(w, "bad JSON: "+err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	})
	return mux
}

// logRequests is an ordinary net/http middleware.
func logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		next.ServeHTTP(w, r)
		slog.Info("request", "method", r.Method, "path", r.URL.Path, "took", time.Since(start))
	})
}
