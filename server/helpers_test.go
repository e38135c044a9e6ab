//go:build linux

package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluice-go/sluice/internal/schedtest"
	srt "github.com/sluice-go/sluice/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serveHTTP serves h on a fresh two-worker runtime and returns the server
// and its address; the server is closed when the test ends.
func serveHTTP(t testing.TB, h http.Handler, cfg Config) (*Server, string) {
	t.Helper()
	return serveNative(t, HTTPHandler(h), cfg)
}

func serveNative(t testing.TB, h Handler, cfg Config) (*Server, string) {
	t.Helper()
	return serveNativeOn(t, schedtest.Runtime(t, 2), h, cfg)
}

// serveHTTPOn serves echoPath on rt.
func serveHTTPOn(t testing.TB, rt *srt.Runtime, cfg Config) (*Server, string) {
	t.Helper()
	return serveNativeOn(t, rt, HTTPHandler(http.HandlerFunc(echoPath)), cfg)
}

func serveNativeOn(t testing.TB, rt *srt.Runtime, h Handler, cfg Config) (*Server, string) {
	t.Helper()
	srv, err := Listen(rt, "127.0.0.1:0", h, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, srv.Close(ctx))
	})
	return srv, srv.Addr().String()
}

// rawExchange sends raw bytes on a new connection and returns the responses
// read with net/http's parser, and whether the server closed the
// connection after them.
func rawExchange(t testing.TB, addr, raw string, method string) ([]*http.Response, []string, bool) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	_, err = io.WriteString(nc, raw)
	require.NoError(t, err)
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(nc)
	var resps []*http.Response
	var bodies []string
	for {
		if len(resps) > 0 {
			// More responses only if more bytes come soon; a quiet open
			// connection means the exchange is over and it is kept.
			_ = nc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			if _, err := br.Peek(1); err != nil {
				return resps, bodies, !isTimeout(err)
			}
			_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			return resps, bodies, !isTimeout(err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return resps, bodies, !isTimeout(err)
		}
		resps = append(resps, resp)
		bodies = append(bodies, string(b))
	}
}

// roundTripOn writes raw on nc and reads one response to method with
// net/http's parser; the reader goes on with what follows.
func roundTripOn(t testing.TB, nc net.Conn, raw, method string) (*http.Response, *bufio.Reader) {
	t.Helper()
	_, err := io.WriteString(nc, raw)
	require.NoError(t, err)
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	require.NoError(t, err)
	return resp, br
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
