//go:build !linux

package sluice

import (
	"errors"
	"fmt"
	"net"
	"net/http"

	srt "github.com/sluice-go/sluice/runtime"
)

// Off Linux the executor cannot run (sched.New fails there): the front
// door serves on net/http, behind the same admission pipeline, through
// serveNetHTTP (nethttp.go). The runtime options do not apply; the log
// line at start names them, with the other settings left unused.

func listen(addr string, h http.Handler, cfg Config, opts []srt.Option) (*Server, error) {
	if h == nil {
		return nil, errors.New("sluice: nil http.Handler")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("sluice: %w", err)
	}
	return newServer(l, h, cfg, opts)
}

func newServer(l net.Listener, h http.Handler, cfg Config, opts []srt.Option) (*Server, error) {
	nh, err := serveNetHTTP(l, h, cfg, len(opts) > 0)
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	return &Server{nh: nh}, nil
}
