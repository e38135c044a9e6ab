package sluice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	goruntime "runtime"
	"strconv"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/httpgate"
	"github.com/sluice-go/sluice/server"
)

// netHTTP is the front door off Linux, where the executor cannot run: the
// handler served by net/http behind the same admission pipeline
// (cfg.Admission, through package httpgate). It is built here, on every
// platform, so that Linux tests exercise it too; only front_other.go uses
// it in a program.
type netHTTP struct {
	hs       *http.Server
	gate     *httpgate.Admission
	l        net.Listener
	served   chan struct{} // closed when http.Server.Serve has returned
	serveErr error         // what it returned
}

// serveNetHTTP serves h on l with net/http, behind the admission pipeline
// of cfg.Admission, and logs once, through cfg.Logger (slog.Default() when
// nil), that it does so in place of the executor, naming the settings it
// ignores. It fails, without
// closing l, on a nil handler or an admission configuration that net/http
// cannot honour (gate.Busy, which counts the executor's busy workers: see
// httpgate.New); ignoring that gate would leave the server unprotected.
//
// What applies: the timeouts (ReadHeaderTimeout and IdleTimeout with their
// sluice defaults; a negative IdleTimeout leaves net/http's, ReadTimeout),
// MaxHeaderBytes, MaxBodyBytes (413 for a larger Content-Length, and
// *http.MaxBytesError when reading past it), Admission, TLS and
// DisableHTTP2 (HTTP/2 over TLS, and h2c with prior knowledge). What does
// not: Lanes, Listen (the socket options of the executor's listeners),
// MaxHandshakes, HoldRefused, LoadHint and Runtime. The age
// limit of Admission bounds the wait in its queue only: net/http does not
// say when the kernel received a request.
func serveNetHTTP(l net.Listener, h http.Handler, cfg Config) (*netHTTP, error) {
	if h == nil {
		return nil, errors.New("sluice: nil http.Handler")
	}
	gate, err := httpgate.New(cfg.Admission)
	if err != nil {
		return nil, fmt.Errorf("sluice: on net/http: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	hs := &http.Server{
		Handler:           limitBody(gate.Wrap(h), cfg.MaxBodyBytes),
		ReadHeaderTimeout: orDefault(cfg.ReadHeaderTimeout, server.DefaultReadHeaderTimeout),
		ReadTimeout:       max(cfg.ReadTimeout, 0),
		WriteTimeout:      max(cfg.WriteTimeout, 0),
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelError),
		Protocols:         new(http.Protocols),
	}
	switch {
	case cfg.IdleTimeout < 0:
		hs.IdleTimeout = 0
	case cfg.IdleTimeout == 0 && cfg.ReadTimeout <= 0:
		hs.IdleTimeout = server.DefaultIdleTimeout
	}
	if hs.MaxHeaderBytes == 0 {
		hs.MaxHeaderBytes = server.DefaultMaxHeaderBytes
	}
	hs.Protocols.SetHTTP1(true)
	if !cfg.DisableHTTP2 {
		hs.Protocols.SetHTTP2(true)
		hs.Protocols.SetUnencryptedHTTP2(true)
	}
	if cfg.TLS != nil {
		hs.TLSConfig = cfg.TLS.Clone()
	}
	log.Info("sluice: the executor is Linux-only; serving on net/http behind the admission pipeline",
		"os", goruntime.GOOS, "addr", l.Addr().String(), "ignored", ignoredOffLinux(cfg))
	s := &netHTTP{hs: hs, gate: gate, l: l, served: make(chan struct{})}
	go func() {
		defer close(s.served)
		if hs.TLSConfig != nil {
			s.serveErr = hs.ServeTLS(l, "", "")
		} else {
			s.serveErr = hs.Serve(l)
		}
	}()
	return s, nil
}

// ignoredOffLinux names the settings of cfg that the net/http front door
// does not apply.
func ignoredOffLinux(cfg Config) []string {
	var names []string
	if !reflect.ValueOf(cfg.Runtime).IsZero() {
		names = append(names, "Config.Runtime")
	}
	if !reflect.ValueOf(cfg.Lanes).IsZero() {
		names = append(names, "Config.Lanes")
	}
	if !reflect.ValueOf(cfg.Listen).IsZero() {
		names = append(names, "Config.Listen")
	}
	if cfg.MaxHandshakes != 0 {
		names = append(names, "Config.MaxHandshakes")
	}
	if cfg.HoldRefused > 0 {
		names = append(names, "Config.HoldRefused")
	}
	if cfg.LoadHint {
		names = append(names, "Config.LoadHint")
	}
	return names
}

// orDefault is d, or def when d is zero; a negative d means none (0 for
// net/http).
func orDefault(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// limitBody answers 413 to a request whose Content-Length exceeds limit
// (server.DefaultMaxBodyBytes when 0; none when negative) and makes a body
// read past it fail with *http.MaxBytesError, as the sluice server does.
func limitBody(next http.Handler, limit int64) http.Handler {
	if limit == 0 {
		limit = server.DefaultMaxBodyBytes
	}
	if limit < 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			w.Header().Set("Connection", "close")
			http.Error(w, "request body larger than Config.MaxBodyBytes ("+strconv.FormatInt(limit, 10)+" bytes)", http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		next.ServeHTTP(w, r)
	})
}

// stop shuts the server down gracefully until ctx ends, then closes what
// is left, and closes the admission pipeline. It may be called again. It returns nil after a clean
// shutdown, ctx's error if requests had to be cut.
func (s *netHTTP) stop(ctx context.Context) error {
	err := s.hs.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		err = errors.Join(err, s.hs.Close())
	}
	s.gate.Close()
	<-s.served
	if !errors.Is(s.serveErr, http.ErrServerClosed) {
		err = errors.Join(err, fmt.Errorf("sluice: net/http: %w", s.serveErr))
	}
	return err
}

// addr returns the listener's address.
func (s *netHTTP) addr() net.Addr { return s.l.Addr() }

// stats returns the admission counters.
func (s *netHTTP) stats() admit.Stats { return s.gate.Stats() }
