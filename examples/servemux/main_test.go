package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluice-go/sluice"
	srt "github.com/sluice-go/sluice/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestMuxOnSluice runs the example's mux, unchanged, on a sluice server.
func TestMuxOnSluice(t *testing.T) {
	srv, err := sluice.Listen("127.0.0.1:0", logRequests(newMux()), sluice.Config{
		Runtime: srt.Config{Workers: 1, Pinning: srt.PinOff, GOMAXPROCS: -1},
	})
	require.NoError(t, err)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, srv.Stop(ctx))
	}()
	base := "http://" + srv.Addr().String()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	get := func(method, path, body string) (int, string) {
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, body := get("GET", "/hello/tester", "")
	assert.Equal(t, 200, code)
	assert.Equal(t, "Hello, tester!\n", body)
	code, body = get("POST", "/echo", `{"a":[1,2]}`)
	assert.Equal(t, 200, code)
	assert.JSONEq(t, `{"a":[1,2]}`, body)
	code, _ = get("POST", "/echo", `{not json`)
	assert.Equal(t, 400, code)
	code, body = get("GET", "/slow", "")
	assert.Equal(t, 200, code)
	assert.Equal(t, "done waiting\n", body)
}
