package sluice

import (
	"net/http"
	"testing"
)

// NetHTTPServerForTest returns a Server as the front door makes it off
// Linux (net/http behind the admission pipeline, no runtime and no sluice
// server), serving h with cfg on a loopback port, for the external tests
// of what programs build on a Server (metrics, the dashboard).
func NetHTTPServerForTest(t *testing.T, h http.Handler, cfg Config) *Server {
	s, _, _ := serveNetHTTPForTest(t, h, cfg)
	return &Server{nh: s}
}
