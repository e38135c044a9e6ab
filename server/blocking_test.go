package server

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/schedtest"
)

// A handler that blocks its worker's thread without Await (a plain
// http.Get, here a channel) does not stall the other connections of that
// worker: on a one-worker runtime they are served while it blocks, and the
// blocked handler's own response arrives whole once it returns.
func TestBlockingHandlerDoesNotStallItsWorker(t *testing.T) {
	rt := schedtest.Runtime(t, 1)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	body := strings.Repeat("slow answer ", 2000) // larger than one write buffer
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/plain" {
			entered <- struct{}{}
			<-release
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, body)
			return
		}
		_, _ = io.WriteString(w, "info")
	})
	_, addr := serveNativeOn(t, rt, HTTPHandler(h), Config{})

	slow := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/plain")
		if err != nil {
			slow <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		slow <- string(b)
	}()
	<-entered

	// While /plain blocks, requests on other connections are answered.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
			for range 5 {
				resp, err := c.Get("http://" + addr + "/info")
				if !assert.NoError(t, err) {
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Equal(t, "info", string(b))
			}
		}()
	}
	wg.Wait()
	select {
	case got := <-slow:
		t.Fatalf("the blocked handler answered early: %.40q", got)
	default:
	}
	snap := rt.Snapshot()
	assert.GreaterOrEqual(t, snap.Handovers, int64(1))

	close(release)
	select {
	case got := <-slow:
		require.Equal(t, body, got)
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked handler never answered")
	}
	require.Eventually(t, func() bool { return rt.Snapshot().Spares == 0 }, 10*time.Second, 10*time.Millisecond,
		"the spare thread retires")
}
