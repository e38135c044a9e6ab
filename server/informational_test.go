//go:build linux

package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInformationalResponses: a 103 Early Hints goes out at once with the
// handler's fields so far, but never Content-Length or Transfer-Encoding,
// which a 1xx must not carry (RFC 9110 section 8.6), and the final
// response follows with its own; an HTTP/1.0 client gets no 1xx at all.
func TestInformationalResponses(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.Header().Set("Content-Length", "2")
		w.Header().Set("Transfer-Encoding", "identity")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Transfer-Encoding")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "ok")
	})
	_, addr := serveHTTP(t, h, Config{})

	for _, c := range []struct {
		proto string
		hints bool
	}{{"HTTP/1.1", true}, {"HTTP/1.0", false}} {
		t.Run(c.proto, func(t *testing.T) {
			nc, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer nc.Close()
			require.NoError(t, nc.SetDeadline(time.Now().Add(30*time.Second)))
			_, err = io.WriteString(nc, "GET / "+c.proto+"\r\nHost: x\r\n\r\n")
			require.NoError(t, err)
			br := bufio.NewReader(nc)
			if c.hints {
				hints, err := http.ReadResponse(br, nil)
				require.NoError(t, err)
				assert.Equal(t, http.StatusEarlyHints, hints.StatusCode)
				assert.Equal(t, "</style.css>; rel=preload", hints.Header.Get("Link"))
				assert.NotContains(t, hints.Header, "Content-Length")
				assert.Empty(t, hints.TransferEncoding)
			}
			resp, err := http.ReadResponse(br, nil)
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, http.StatusAccepted, resp.StatusCode)
			assert.Equal(t, "</style.css>; rel=preload", resp.Header.Get("Link"))
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, "ok", string(b))
			assert.Equal(t, int64(2), resp.ContentLength)
			if c.proto == "HTTP/1.1" {
				// The connection is kept: nothing more in it.
				_, err = io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
				require.NoError(t, err)
				rest, err := io.ReadAll(br)
				require.NoError(t, err)
				assert.True(t, strings.HasPrefix(string(rest), "HTTP/1.1 103 Early Hints\r\n"), "%q", rest)
			}
		})
	}
}
