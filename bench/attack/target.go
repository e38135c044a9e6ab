package attack

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/selfsigned"
	"github.com/sluice-go/sluice/metrics"
	"github.com/sluice-go/sluice/tenant"
)

// Targets are the servers the suite compares: sluice with its default
// configuration, a tenant tracker and its metrics, and net/http as most
// programs run it (an http.Server with a handler and nothing else).
var targetNames = []string{"sluice", "nethttp"}

// Targets returns the names of the targets Serve knows, sluice first.
func Targets() []string { return append([]string(nil), targetNames...) }

// BodyLimit is the request body limit of both targets: sluice's
// Config.MaxBodyBytes, and http.MaxBytesReader around net/http's handler,
// as a net/http program that limits bodies has it.
const BodyLimit = 1 << 20

// LargeSize is the size of the answer to /large, which the never-reading
// clients ask for: a few of them fill a socket's buffers.
const LargeSize = 256 << 10

// Handler is the targets' handler: / says hello, /echo reads the body and
// says how many bytes it read (413 past the limit), /large answers
// LargeSize bytes, /metrics is metricsHandler.
func Handler(metricsHandler http.Handler) http.Handler {
	large := strings.Repeat("sluice attack\n", LargeSize/14+1)[:LargeSize]
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hello\n")
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
		}
		_, _ = io.WriteString(w, strconv.FormatInt(n, 10))
	})
	mux.HandleFunc("/large", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(large)))
		_, _ = io.WriteString(w, large)
	})
	mux.Handle("/metrics", metricsHandler)
	return mux
}

// Server is a running target.
type Server struct {
	// Addr is where it listens, on loopback.
	Addr string
	// Usage reports the server's CPU time and memory so far, for a target
	// in a process of its own; nil in process, where the figures would
	// include the attacker's.
	Usage func() (Usage, error)
	// Counters, when set, says what the server counted that explains
	// its probes' fate (sluice's TLS handshakes waited, evicted, late);
	// Run reads it after Stop.
	Counters func() string
	// Stop stops it, closing every connection.
	Stop func() error
}

// Usage is a target process's CPU time and resident memory.
type Usage struct {
	CPU time.Duration
	RSS int64
}

// Serve starts the named target (Targets) in this process on a loopback
// port, serving Handler, over TLS with a throwaway certificate when https
// is set (HTTP/2 by ALPN too).
func Serve(target string, https bool) (*Server, error) {
	var cfg *tls.Config
	if https {
		cert, _, err := selfsigned.New()
		if err != nil {
			return nil, err
		}
		cfg = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	switch target {
	case "sluice":
		return serveSluice(cfg)
	case "nethttp":
		return serveNetHTTP(cfg)
	}
	return nil, fmt.Errorf("attack: no target %q (known: %s)", target, strings.Join(targetNames, ", "))
}

// serveSluice serves Handler on sluice: the default configuration, with
// a tenant tracker (names from X-Tenant) and its metrics at /metrics,
// where an invalid series fails the scrape as Prometheus would see it.
func serveSluice(cfg *tls.Config) (*Server, error) {
	tracker, err := tenant.New(tenant.Config{})
	if err != nil {
		return nil, err
	}
	col, err := metrics.New(metrics.Config{}, metrics.Tenants("attack", tracker))
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(col); err != nil {
		col.Close()
		return nil, err
	}
	h := Handler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	srv, err := sluice.Listen("127.0.0.1:0", h, sluice.Config{
		TLS:          cfg,
		MaxBodyBytes: BodyLimit,
		Admission:    admit.Config{Policies: []admit.Policy{tracker}},
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		col.Close()
		return nil, err
	}
	// The tracker's counts reach the metrics once a period, as an agent
	// would collect them.
	ctx, cancel := context.WithCancel(context.Background())
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				tracker.Collect(250 * time.Millisecond)
			}
		}
	}()
	counters := func() string {
		a := srv.Stats()
		s := fmt.Sprintf("admitted %d, refused %d", a.Admitted, a.Rejected)
		if a.Rejected > 0 {
			s += fmt.Sprintf(" %v", a.RejectedBy)
		}
		if cfg == nil {
			return s
		}
		t := srv.Server().TLSStats()
		return s + fmt.Sprintf("; handshakes: %d completed, %d failed, %d waited, %d evicted, %d late", t.Completed, t.Failed, t.Waited, t.Evicted, t.Late)
	}
	return &Server{Addr: srv.Addr().String(), Counters: counters, Stop: func() error {
		cancel()
		<-collected
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		err := srv.Stop(sctx)
		col.Close()
		return err
	}}, nil
}

// serveNetHTTP serves Handler on an http.Server with no timeouts, its body
// limit by http.MaxBytesReader, and its metrics those of the Go runtime.
func serveNetHTTP(cfg *tls.Config) (*Server, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	h := Handler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	limited := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, BodyLimit)
		h.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: limited, TLSConfig: cfg, ErrorLog: discardLog()}
	served := make(chan error, 1)
	go func() {
		if cfg != nil {
			served <- srv.ServeTLS(ln, "", "")
			return
		}
		served <- srv.Serve(ln)
	}()
	return &Server{Addr: ln.Addr().String(), Stop: func() error {
		err := srv.Close()
		if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		return err
	}}, nil
}

// discardLog is a log for net/http's server errors, which the attacks
// cause by the thousand.
func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }
