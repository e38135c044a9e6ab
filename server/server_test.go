//go:build linux

package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/internal/gatetest"
	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/netpoll"
)

func TestHelloThroughNetHTTPClient(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello/{name}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello, %s", r.PathValue("name"))
	})
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Len", fmt.Sprint(len(b)))
		w.Write(b)
	})
	_, addr := serveHTTP(t, mux, Config{})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	for i := range 20 {
		resp, err := client.Get("http://" + addr + fmt.Sprintf("/hello/n%d", i))
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, fmt.Sprintf("hello, n%d", i), string(b))
		assert.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	}
	big := strings.Repeat("0123456789", 100_000)
	resp, err := client.Post("http://"+addr+"/echo", "text/plain", strings.NewReader(big))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, fmt.Sprint(len(big)), resp.Header.Get("X-Len"))
	assert.Equal(t, big, string(b))
	resp, err = client.Get("http://" + addr + "/nope")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 404, resp.StatusCode)
}

// Serve serves on a listener opened elsewhere, as with systemd's socket
// activation: the caller may close its own listener at once.
func TestServeOnAnInheritedListener(t *testing.T) {
	rt := schedtest.Runtime(t, 2)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv, err := Serve(rt, l, HTTPHandler(http.HandlerFunc(echoPath)), Config{})
	require.NoError(t, err)
	require.NoError(t, l.Close(), "the server has its own duplicate")
	assert.Equal(t, l.Addr().String(), srv.Addr().String())
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for i := range 5 {
		resp, err := client.Get(fmt.Sprintf("http://%s/i%d", srv.Addr(), i))
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, fmt.Sprintf("GET /i%d", i), string(b))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(ctx))
	_, err = net.DialTimeout("tcp", srv.Addr().String(), time.Second)
	assert.Error(t, err, "closed with the server")

	_, err = Serve(rt, nil, HTTPHandler(http.NotFoundHandler()), Config{})
	assert.ErrorContains(t, err, "nil net.Listener")
	ul, err := net.Listen("unix", filepath.Join(t.TempDir(), "sock"))
	require.NoError(t, err)
	defer ul.Close()
	_, err = Serve(rt, ul, HTTPHandler(http.NotFoundHandler()), Config{})
	assert.ErrorContains(t, err, "not a listening TCP socket")
}

// A server shut down on a runtime that keeps running leaves nothing of
// itself behind: its idle hook is gone from the executor, its wake-ups are
// gone from the gates (which outlive it), and its admission pipeline can be
// collected.
func TestShutdownOnALiveRuntimeLeavesNothingBehind(t *testing.T) {
	rt := schedtest.Runtime(t, 2)
	busy := gatetest.Busy(t, gate.BusyConfig{Fraction: 1})
	conc := gatetest.Concurrency(t, 64)
	hooks := rt.IdleHooks()
	pipeline := func() weak.Pointer[admit.Pipeline] {
		srv, err := Listen(rt, "127.0.0.1:0", HTTPHandler(http.HandlerFunc(echoPath)), Config{Admission: admit.Config{
			Gates: []admit.Policy{busy, conc},
			Queue: &admit.QueueConfig{},
		}})
		require.NoError(t, err)
		assert.Equal(t, hooks+2, rt.IdleHooks(), "the busy gate wakes the server's queue; the server ends holds (park.go)")
		client := &http.Client{Transport: &http.Transport{}}
		for i := range 5 {
			resp, err := client.Get(fmt.Sprintf("http://%s/%d", srv.Addr(), i))
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		client.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, srv.Shutdown(ctx))
		return weak.Make(srv.Pipeline())
	}()
	assert.Equal(t, hooks, rt.IdleHooks(), "the idle hooks are removed")
	assert.Eventually(t, func() bool {
		runtime.GC()
		return pipeline.Value() == nil
	}, 10*time.Second, 10*time.Millisecond, "nothing keeps the stopped server's admission reachable")

	// The runtime and the gates go on serving another server.
	srv, _ := serveHTTPOn(t, rt, Config{Admission: admit.Config{Gates: []admit.Policy{busy, conc}}})
	resps, _, _ := rawExchange(t, srv.Addr().String(), "GET /again HTTP/1.1\r\nHost: x\r\n\r\n", "GET")
	require.Len(t, resps, 1)
	assert.Equal(t, 200, resps[0].StatusCode)
}

func TestSharedListener(t *testing.T) {
	_, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{Listen: netpoll.Config{Shared: true}})
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for i := range 10 {
		resp, err := client.Get(fmt.Sprintf("http://%s/s%d", addr, i))
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, fmt.Sprintf("GET /s%d", i), string(b))
	}
}
