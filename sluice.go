// Package sluice is the front door of sluice, a Go runtime for HTTP servers
// that do not crash when overloaded: it serves any http.Handler on its own
// executor (one worker per CPU, the work of requests already
// accepted running before new work), and decides before any of a request's
// work whether it starts, waits a short time or is rejected unstarted (safe
// to retry elsewhere).
//
// The simplest protected server:
//
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
//	defer stop()
//	err := sluice.ListenAndServe(ctx, ":8080", mux, sluice.Config{})
//
// By default a request that has waited 100 ms since the kernel received it
// (5 ms while the server is saturated) is rejected with 503 before its
// handler starts; see Config's Admission field (package admit) for gates,
// a timed queue and policies. The packages underneath (server, runtime,
// sched, admit, gate) are there for programs that need more than this
// front door: several servers on one runtime, tasks of their own on the
// executor, custom lanes.
//
// # Platforms
//
// The executor is Linux-only (epoll, pinned threads, the kernel's receive
// stamps). Elsewhere (macOS, Windows, the BSDs) every package builds, for
// development, and the front door serves the same handler on net/http
// behind the same admission pipeline (package httpgate), saying so once at
// start through Config.Logger (slog.Default() when nil). There, the runtime
// options and the settings of the executor (Config.Lanes, Config.Listen,
// MaxHandshakes, HoldRefused, LoadHint) are ignored, and the log line names
// those that were set; the age limit bounds only the wait in the admission
// queue, since net/http does not say when the kernel received a request;
// a gate that needs the executor (gate.Busy) makes Listen fail rather than
// leave the server unprotected; Server.Runtime and Server.Server return
// nil. The packages of the executor (sched, runtime, netpoll, server) build
// there too, and their constructors fail with an error that wraps
// errors.ErrUnsupported.
package sluice

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/sluice-go/sluice/admit"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/sched"
	"github.com/sluice-go/sluice/server"
)

// Config configures a server: timeouts, limits, listening sockets and, in
// its Admission field, what protects it. The zero value is usable. It is
// server.Config.
type Config = server.Config

// ShutdownGrace is how long Run and Stop let requests in progress finish,
// at most, before they close what is left.
const ShutdownGrace = 30 * time.Second

// Server is an HTTP server on a sluice runtime of its own. Listen and
// NewServer start it; Run serves until a context ends and then shuts down
// gracefully; Stop does the shutdown alone.
type Server struct {
	rt   *srt.Runtime   // nil off Linux
	srv  *server.Server // nil off Linux
	nh   *netHTTP       // off Linux, the net/http server; nil on Linux
	once sync.Once
	err  error
}

// Listen starts a runtime as cfg.Runtime says (by default one worker per
// usable CPU, pinned where the CPUs are the process's own; see
// runtime.Config) and a server on addr that serves h. addr is what net.Listen("tcp", addr) takes: ":8080" (every address,
// IPv6 and IPv4), "127.0.0.1:8080", "[::1]:8080", "localhost:8080"; see
// netpoll.Listen. It fails, naming the problem, on a bad address, a port
// it cannot bind or that another socket holds (EADDRINUSE, unless
// Config.Listen.ReusePort asks to share it), or an admission configuration
// that cannot work; nothing is left running then.
//
// Off Linux, Listen serves h on net/http instead, behind the same
// admission pipeline (see the package documentation).
//
// opts are the runtime's settings in their former style, applied to
// cfg.Runtime in order. Deprecated: set cfg.Runtime's fields instead; opts
// will go.
func Listen(addr string, h http.Handler, cfg Config, opts ...srt.Option) (*Server, error) {
	return listen(addr, h, withOptions(cfg, opts))
}

// withOptions is cfg with the deprecated runtime options applied to
// cfg.Runtime.
func withOptions(cfg Config, opts []srt.Option) Config {
	for _, o := range opts {
		o(&cfg.Runtime)
	}
	return cfg
}

// NewServer is Listen on a listener opened elsewhere: systemd's socket
// activation (net.FileListener on the inherited descriptor) or a socket
// handed over by the process this one replaces. The server listens on a
// duplicate of l's socket; NewServer closes l. (Off Linux, net/http
// serves on l itself, and Stop closes it.) opts are deprecated, as
// Listen's.
func NewServer(l net.Listener, h http.Handler, cfg Config, opts ...srt.Option) (*Server, error) {
	if l == nil {
		return nil, errors.New("sluice: NewServer with a nil net.Listener")
	}
	return newServer(l, h, withOptions(cfg, opts))
}

// ListenAndServe serves h on addr until ctx ends, then shuts down
// gracefully (see Run). It returns nil after a clean shutdown. opts are
// deprecated, as Listen's.
func ListenAndServe(ctx context.Context, addr string, h http.Handler, cfg Config, opts ...srt.Option) error {
	s, err := Listen(addr, h, cfg, opts...)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}

// ListenAndServeTLS is ListenAndServe over HTTPS, with the certificate
// and key of certFile and keyFile (PEM; the certificate file may hold the
// chain after the leaf), as net/http's ListenAndServeTLS. A cfg.TLS, if
// set, gives the other settings; its certificates are replaced. opts are
// deprecated, as Listen's.
func ListenAndServeTLS(ctx context.Context, addr, certFile, keyFile string, h http.Handler, cfg Config, opts ...srt.Option) error {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("sluice: loading the TLS certificate: %w", err)
	}
	if cfg.TLS == nil {
		cfg.TLS = &tls.Config{}
	} else {
		cfg.TLS = cfg.TLS.Clone()
	}
	cfg.TLS.Certificates = []tls.Certificate{cert}
	return ListenAndServe(ctx, addr, h, cfg, opts...)
}

// Serve serves h on l until ctx ends, then shuts down gracefully (see Run).
// It closes l, as net/http's Serve does. opts are deprecated, as
// Listen's.
func Serve(ctx context.Context, l net.Listener, h http.Handler, cfg Config, opts ...srt.Option) error {
	s, err := NewServer(l, h, cfg, opts...)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}

// Run serves until ctx ends, then stops gracefully with Stop, giving
// requests in progress up to ShutdownGrace. It returns nil after a clean
// shutdown.
func (s *Server) Run(ctx context.Context) error {
	<-ctx.Done()
	grace, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	return s.Stop(grace)
}

// Stop shuts the server down and stops its runtime: it stops accepting,
// closes idle connections, lets requests in progress finish (answered
// with Connection: close) until ctx ends, then closes what is left, and
// stops the workers. It returns nil after a clean shutdown, ctx's error if
// requests had to be cut. Stop may be called more than once; later calls
// return the first one's result.
func (s *Server) Stop(ctx context.Context) error {
	s.once.Do(func() {
		if s.nh != nil {
			s.err = s.nh.stop(ctx)
			return
		}
		err := s.srv.Shutdown(ctx)
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = errors.Join(err, s.srv.Close(closeCtx))
			cancel()
		}
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.err = errors.Join(err, s.rt.Stop(stopCtx))
	})
	return s.err
}

// Addr returns the address the server listens on (with the port the kernel
// chose for port 0).
func (s *Server) Addr() net.Addr {
	if s.nh != nil {
		return s.nh.addr()
	}
	return s.srv.Addr()
}

// Stats returns the admission counters.
func (s *Server) Stats() admit.Stats {
	if s.nh != nil {
		return s.nh.stats()
	}
	return s.srv.Stats()
}

// Pipeline returns the server's admission pipeline, on every platform: the
// sluice server's on Linux, the net/http middleware's elsewhere. Metrics
// and the dashboard read it.
func (s *Server) Pipeline() *admit.Pipeline {
	if s.nh != nil {
		return s.nh.gate.Pipeline()
	}
	return s.srv.Pipeline()
}

// Server returns the HTTP server, for what the front door does not show.
// Off Linux, where net/http serves, it returns nil.
func (s *Server) Server() *server.Server { return s.srv }

// Yield lets the worker serve other requests before a handler goes on:
// call it between slices of a long computation (every few hundred
// microseconds), so that the requests of better lanes, and the handler's
// own lane's resumptions, are not held up behind it. Outside a sluice
// handler (on net/http) it returns nil at once. See sched.Yield.
func Yield(ctx context.Context) error { return sched.Yield(ctx) }

// Runtime returns the server's runtime: its lanes can be tuned, and tasks
// of the program's own submitted to its workers. Off Linux, where there is
// no executor, it returns nil.
func (s *Server) Runtime() *srt.Runtime { return s.rt }
