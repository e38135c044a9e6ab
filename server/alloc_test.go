//go:build linux

package server

import (
	"bytes"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRequestAllocations counts what a kept-alive request costs in
// allocations, the client's raw loop included (it allocates nothing): on
// the native path with SetHeader, the request (its body, writer, contexts
// and a few value slices in one), the head's copy, and the header map
// (two); through HTTPHandler, the *http.Request and the response's header
// map and values besides, fewer than net/http's own server.
func TestRequestAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates where a normal build does not")
	}
	body := []byte("Hello, World!")
	// A body of 100 bytes or more: its Content-Length is not one of the
	// small numbers strconv keeps, and is appended as digits.
	long := bytes.Repeat([]byte("0123456789"), 100)
	for _, c := range []struct {
		name string
		body []byte // what the response ends with
		h    Handler
		max  float64
	}{
		{"native", body, HandlerFunc(func(w *ResponseWriter, _ *Request) {
			w.SetHeader("Content-Type", "text/plain")
			_, _ = w.Write(body)
		}), 4},
		{"native, 1000 bytes", long, HandlerFunc(func(w *ResponseWriter, _ *Request) {
			w.SetHeader("Content-Type", "text/plain")
			_, _ = w.Write(long)
		}), 4},
		{"adapter", body, HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(body)
		})), 8},
		{"adapter, declared length", long, HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", "1000")
			_, _ = w.Write(long)
		})), 9}, // the handler's own value string for Content-Length
	} {
		t.Run(c.name, func(t *testing.T) {
			_, addr := serveNative(t, c.h, Config{})
			conn, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer conn.Close()
			require.NoError(t, conn.SetDeadline(time.Now().Add(time.Minute)))
			req := []byte("GET /hello?x=1 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t\r\nAccept: */*\r\n\r\n")
			buf := make([]byte, 4096)
			var failed error
			roundTrip := func() {
				if _, err := conn.Write(req); err != nil {
					failed = err
					return
				}
				n := 0
				for !bytes.HasSuffix(buf[:n], c.body) {
					m, err := conn.Read(buf[n:])
					if err != nil {
						failed = err
						return
					}
					n += m
				}
			}
			for range 200 { // the worker's pools warm up
				roundTrip()
			}
			require.NoError(t, failed)
			require.Contains(t, string(buf), "200 OK")
			allocs := testing.AllocsPerRun(2000, roundTrip)
			require.NoError(t, failed)
			assert.LessOrEqual(t, allocs, c.max)
			t.Logf("%s: %.0f allocations per request", c.name, allocs)
		})
	}
}
