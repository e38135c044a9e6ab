//go:build linux

package server

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// framingHandler sets a Transfer-Encoding of its own, with or without a
// Content-Length, as handlers written for net/http may.
func framingHandler(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/chunked":
		w.Header().Set("Transfer-Encoding", "chunked")
	case "/chunked-and-length":
		w.Header().Set("Content-Length", "5")
		w.Header().Set("Transfer-Encoding", "chunked")
	case "/identity":
		w.Header().Set("Transfer-Encoding", "identity")
	case "/identity-and-length":
		w.Header().Set("Content-Length", "5")
		w.Header().Set("Transfer-Encoding", "identity")
	case "/length-after-status":
		// Too late to be one: a second, conflicting Content-Length must
		// not go out beside the server's.
		w.WriteHeader(http.StatusOK)
		w.Header().Set("Content-Length", "3")
	case "/length-before-status":
		w.Header().Set("Content-Length", "5")
		w.WriteHeader(http.StatusOK)
	case "/keep-alive-field":
		w.Header().Set("Connection", "keep-alive")
	case "/close-field":
		w.Header().Set("Connection", "close")
	case "/not-modified":
		w.Header().Set("Content-Length", "5")
		w.WriteHeader(http.StatusNotModified)
	}
	_, _ = io.WriteString(w, "hello")
}

// framing is what a client makes of a response's framing.
type framing struct {
	Status           int
	TransferEncoding []string
	ContentLength    int64
	Body             string
	Lengths          []string // the Content-Length fields
	Connection       []string // the Connection fields (less a "close" that ReadResponse takes out)
	SaysClose        bool     // the response announces the close
	Close            bool     // the server closed the connection after it
}

func readFraming(t *testing.T, addr, method, path, proto string, fields ...string) framing {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(10*time.Second)))
	head := method + " " + path + " " + proto + "\r\nHost: x\r\n"
	for _, f := range fields {
		head += f + "\r\n"
	}
	resp, br := roundTripOn(t, nc, head+"\r\n", method)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	f := framing{Status: resp.StatusCode, TransferEncoding: resp.TransferEncoding, ContentLength: resp.ContentLength, Body: string(b),
		Lengths: resp.Header.Values("Content-Length"), Connection: resp.Header.Values("Connection"), SaysClose: resp.Close}
	// Closed, or kept: nothing more comes either way, but a closed
	// connection reads EOF at once.
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(300*time.Millisecond)))
	_, err = br.Peek(1)
	f.Close = err == io.EOF
	return f
}

// TestHandlerFramingFields: a Transfer-Encoding the handler set is
// framed as net/http frames it: chunked wins over a Content-Length and is
// sent as chunks, identity is delimited by the close (or by the handler's
// Content-Length), and the field never goes out beside a Content-Length,
// which would leave the client to guess (RFC 9112 section 6.3). A
// Content-Length set after WriteHeader is not one (it would go out beside
// the server's own), and a 304 carries none, as in net/http.
func TestHandlerFramingFields(t *testing.T) {
	_, addr := serveHTTP(t, http.HandlerFunc(framingHandler), Config{})
	ref := httptest.NewServer(http.HandlerFunc(framingHandler))
	defer ref.Close()
	refAddr := ref.Listener.Addr().String()
	for _, path := range []string{"/chunked", "/chunked-and-length", "/identity", "/identity-and-length",
		"/length-after-status", "/length-before-status", "/not-modified"} {
		for _, method := range []string{"GET", "HEAD"} {
			for _, proto := range []string{"HTTP/1.1", "HTTP/1.0"} {
				name := strings.Join([]string{method, path, proto}, " ")
				want := readFraming(t, refAddr, method, path, proto)
				got := readFraming(t, addr, method, path, proto)
				assert.Equal(t, want, got, name)
			}
		}
	}
}

// TestHandlerConnectionField: the Connection field says what the server
// does with the connection, whatever the handler set, as in net/http: a
// handler's keep-alive on a connection that closes is replaced, and is not
// said twice on one that stays.
func TestHandlerConnectionField(t *testing.T) {
	_, addr := serveHTTP(t, http.HandlerFunc(framingHandler), Config{})
	ref := httptest.NewServer(http.HandlerFunc(framingHandler))
	defer ref.Close()
	refAddr := ref.Listener.Addr().String()
	for _, path := range []string{"/keep-alive-field", "/close-field", "/plain"} {
		for _, c := range []struct {
			proto string
			field []string
		}{
			{"HTTP/1.1", nil},
			{"HTTP/1.1", []string{"Connection: close"}},
			{"HTTP/1.0", nil},
			{"HTTP/1.0", []string{"Connection: keep-alive"}},
		} {
			name := strings.Join(append([]string{path, c.proto}, c.field...), " ")
			want := readFraming(t, refAddr, "GET", path, c.proto, c.field...)
			got := readFraming(t, addr, "GET", path, c.proto, c.field...)
			assert.Equal(t, want, got, name)
		}
	}
}
