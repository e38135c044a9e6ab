//go:build linux

package server

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/schedtest"
	srt "github.com/sluice-go/sluice/runtime"
)

// A route that blocks its thread is refused, not started, once no spare
// thread is left for it: one worker and two spare threads, two handlers of
// /block blocked (the book learns the route from them, and they hold the
// spares), then a third /block is answered 503 "spares", not started,
// while /info on the same worker is served, over HTTP/1.1 and HTTP/2.
// Without the refusal the third handler blocked the worker's own thread,
// and /info waited for it.
func TestBlockingRoutePastTheSparesIsRefused(t *testing.T) {
	t.Run("HTTP/1.1", func(t *testing.T) {
		checkRefusedPastTheSpares(t, &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second})
	})
	t.Run("HTTP/2", func(t *testing.T) {
		client := h2cClient(t)
		client.Timeout = 5 * time.Second
		checkRefusedPastTheSpares(t, client)
	})
}

func checkRefusedPastTheSpares(t *testing.T, client *http.Client) {
	rt := schedtest.RuntimeWith(t, srt.Config{Workers: 1, MaxSpares: 2})
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			<-release // blocks the thread: no Await
		}
		_, _ = io.WriteString(w, "ok")
	})
	_, addr := serveNativeOn(t, rt, HTTPHandler(h), Config{})
	get := func(path string) (int, http.Header, error) {
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header, nil
	}

	var wg sync.WaitGroup
	defer func() {
		close(release)
		wg.Wait()
	}()
	for i := range 2 {
		wg.Go(func() {
			code, _, err := get("/block")
			assert.NoError(t, err)
			assert.Equal(t, http.StatusOK, code)
		})
		// Found blocked by the watchdog: the book learns the route (once
		// a suspect, twice a blocking one).
		require.Eventually(t, func() bool { return rt.Snapshot().Blocked >= int64(i+1) }, 5*time.Second, time.Millisecond)
	}

	code, hdr, err := get("/block")
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, SparesReason, hdr.Get(ReasonHeader))
	assert.Equal(t, "1", hdr.Get(NotStartedHeader))
	for range 5 {
		code, _, err := get("/info")
		require.NoError(t, err, "the worker serves the other routes")
		assert.Equal(t, http.StatusOK, code)
	}
	assert.Equal(t, int64(2), rt.Snapshot().Blocked, "no third handler blocked")
}
