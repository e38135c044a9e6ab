//go:build linux

package server

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClosedBodyIsDiscarded: a handler that closes the request body
// without reading it (or after reading part of it) gets
// http.ErrBodyReadAfterClose from later reads, and the server still
// discards the rest of the body, so that the next request on the
// connection is read from where it begins.
func TestClosedBodyIsDiscarded(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			var first [3]byte
			if r.URL.Path == "/part" {
				_, _ = io.ReadFull(r.Body, first[:])
			}
			assert.NoError(t, r.Body.Close())
			_, err := r.Body.Read(make([]byte, 1))
			assert.ErrorIs(t, err, http.ErrBodyReadAfterClose)
			_, _ = io.WriteString(w, "closed "+string(first[:]))
			return
		}
		_, _ = io.WriteString(w, "next "+r.URL.Path)
	})
	_, addr := serveHTTP(t, h, Config{})
	for _, c := range []struct{ name, raw string }{
		{"unread", "POST /none HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789" +
			"GET /after HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"part read", "POST /part HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789" +
			"GET /after HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"chunked", "POST /none HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n01234\r\n0\r\n\r\n" +
			"GET /after HTTP/1.1\r\nHost: x\r\n\r\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resps, bodies, closed := rawExchange(t, addr, c.raw, "POST")
			require.Len(t, resps, 2, "%q", bodies)
			assert.Equal(t, http.StatusOK, resps[0].StatusCode)
			assert.Equal(t, http.StatusOK, resps[1].StatusCode, "%q", bodies)
			assert.Equal(t, "next /after", bodies[1])
			assert.False(t, closed, "the connection is kept")
		})
	}
}
