//go:build linux

package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// trailerHandler sets response trailers both ways net/http knows: declared
// in a Trailer field before the body, and with http.TrailerPrefix after.
func trailerHandler(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/declared", "/flushed":
		w.Header().Set("Trailer", "X-Checksum, X-Count")
		_, _ = io.WriteString(w, "hello")
		if r.URL.Path == "/flushed" {
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, " world")
		}
		w.Header().Set("X-Checksum", "abc")
		w.Header().Add("X-Count", "1")
		w.Header().Add("X-Count", "2")
	case "/prefixed":
		_, _ = io.WriteString(w, "hello")
		w.Header().Set(http.TrailerPrefix+"X-Late", "late")
	}
}

// TestResponseTrailers: trailers reach the client after a chunked body, as
// net/http sends them, whichever way the handler set them; a prefixed key
// is never sent as a header field.
func TestResponseTrailers(t *testing.T) {
	_, addr := serveHTTP(t, http.HandlerFunc(trailerHandler), Config{})
	ref := httptest.NewServer(http.HandlerFunc(trailerHandler))
	defer ref.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for _, c := range []struct {
		path, body string
		want       http.Header
		ref        bool // net/http's server does the same
	}{
		{"/declared", "hello", http.Header{"X-Checksum": {"abc"}, "X-Count": {"1", "2"}}, true},
		{"/flushed", "hello world", http.Header{"X-Checksum": {"abc"}, "X-Count": {"1", "2"}}, true},
		// net/http decides the framing from the fields as they were at
		// the first Write, so it sends this body with a Content-Length and
		// drops the trailer; sluice decides when the header goes out.
		{"/prefixed", "hello", http.Header{"X-Late": {"late"}}, false},
	} {
		t.Run(c.path, func(t *testing.T) {
			bases := []string{"http://" + addr}
			if c.ref {
				// net/http's server first, as the reference.
				bases = append([]string{ref.URL}, bases...)
			}
			for _, base := range bases {
				resp, err := client.Get(base + c.path)
				require.NoError(t, err)
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.NoError(t, err)
				assert.Equal(t, c.body, string(b), base)
				assert.Equal(t, []string{"chunked"}, resp.TransferEncoding, base)
				assert.Equal(t, c.want, resp.Trailer, base)
				for k := range resp.Header {
					assert.NotContains(t, k, http.TrailerPrefix, "%s: sent as a header", base)
				}
			}
		})
	}

	// HTTP/1.0 has no trailers: the body comes whole, delimited by the close.
	resps, bodies, _ := rawExchange(t, addr, "GET /declared HTTP/1.0\r\n\r\n", "GET")
	require.Len(t, resps, 1)
	assert.Equal(t, "hello", bodies[0])
}
