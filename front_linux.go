package sluice

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/server"
)

// On Linux the front door serves on the sluice executor: a runtime of its
// own and a server.Server on it. front_other.go is the net/http version.

func listen(addr string, h http.Handler, cfg Config) (*Server, error) {
	return start(h, &cfg, func(rt *srt.Runtime, sh server.Handler) (*server.Server, error) {
		return server.Listen(rt, addr, sh, cfg)
	})
}

func newServer(l net.Listener, h http.Handler, cfg Config) (*Server, error) {
	s, err := start(h, &cfg, func(rt *srt.Runtime, sh server.Handler) (*server.Server, error) {
		return server.Serve(rt, l, sh, cfg)
	})
	_ = l.Close() // the server has its own duplicate of the socket
	return s, err
}

// start starts the runtime of cfg.Runtime and, on it, the server that
// serve starts with cfg, whose Runtime it clears: the server runs on the
// runtime it is given.
func start(h http.Handler, cfg *Config, serve func(*srt.Runtime, server.Handler) (*server.Server, error)) (*Server, error) {
	if h == nil {
		return nil, errors.New("sluice: nil http.Handler")
	}
	rt, err := srt.New(cfg.Runtime)
	cfg.Runtime = srt.Config{}
	if err != nil {
		return nil, fmt.Errorf("sluice: %w", err)
	}
	if err := rt.Start(); err != nil {
		return nil, fmt.Errorf("sluice: %w", err)
	}
	srv, err := serve(rt, server.HTTPHandler(h))
	if err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return nil, errors.Join(fmt.Errorf("sluice: %w", err), rt.Stop(ctx))
	}
	return &Server{rt: rt, srv: srv}, nil
}
