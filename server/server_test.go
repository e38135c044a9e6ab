package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/netpoll"
	srt "github.com/sluice-go/sluice/runtime"
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

func TestListenAndServeStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// Port 0 cannot be learned from ListenAndServe: pick a free one.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	go func() {
		done <- ListenAndServe(ctx, addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("up"))
		}), Config{}, srt.WithWorkers(1), srt.WithPinning(false))
	}()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	require.Eventually(t, func() bool {
		resp, err := client.Get("http://" + addr)
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(b) == "up"
	}, 10*time.Second, 10*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("ListenAndServe did not return after its context ended")
	}
}

func TestSharedListener(t *testing.T) {
	_, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{Listen: netpoll.Options{Shared: true}})
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
