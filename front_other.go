//go:build !linux

package sluice

import (
	"errors"
	"fmt"
	"net"
	"net/http"
)

// Off Linux the executor cannot run (sched.New fails there): the front
// door serves on net/http, behind the same admission pipeline, through
// serveNetHTTP (nethttp.go). Config.Runtime does not apply; the log line
// at start names it, with the other settings left unused.

func listen(addr string, h http.Handler, cfg Config) (*Server, error) {
	if h == nil {
		return nil, errors.New("sluice: nil http.Handler")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("sluice: %w", err)
	}
	return newServer(l, h, cfg)
}

func newServer(l net.Listener, h http.Handler, cfg Config) (*Server, error) {
	nh, err := serveNetHTTP(l, h, cfg)
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	return &Server{nh: nh}, nil
}
