//go:build linux

package server

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/await"
)

// The server honours the time its caller left: none left is a not-started
// rejection ("deadline"); otherwise the handler's context ends then, and
// await's client forwards what is left, less what was spent; the load
// hint is on its answers when asked for.
func TestDeadlinePropagation(t *testing.T) {
	down := make(chan string, 1)
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		down <- r.Header.Get(admit.TimeoutHeader)
	}))
	defer downstream.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	hc := await.NewClient(&http.Client{Transport: base})

	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dl, ok := r.Context().Deadline()
		w.Header().Set("X-Has-Deadline", strconv.FormatBool(ok))
		if ok {
			w.Header().Set("X-Left", time.Until(dl).String())
		}
		await.Sleep(r.Context(), 20*time.Millisecond) //nolint:errcheck // a pause, then the call
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, downstream.URL, nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
	})
	_, addr := serveHTTP(t, h, Config{LoadHint: true})
	get := func(left string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		require.NoError(t, err)
		if left != "" {
			req.Header.Set(admit.TimeoutHeader, left)
		}
		resp, err := base.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}

	out := get("0n")
	assert.Equal(t, http.StatusServiceUnavailable, out.StatusCode)
	assert.Equal(t, "1", out.Header.Get("Sluice-Not-Started"))
	assert.Equal(t, "deadline", out.Header.Get("Sluice-Reject-Reason"))

	resp := get("2S")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "true", resp.Header.Get("X-Has-Deadline"))
	left, err := time.ParseDuration(resp.Header.Get("X-Left"))
	require.NoError(t, err)
	assert.LessOrEqual(t, left, 2*time.Second)
	assert.Greater(t, left, time.Second)
	fwd, ok := admit.ParseTimeout(<-down)
	require.True(t, ok)
	assert.Less(t, fwd, left-15*time.Millisecond, "forwarded less what was spent (a 20 ms pause)")
	hint, err := strconv.ParseFloat(resp.Header.Get(admit.LoadHeader), 64)
	require.NoError(t, err)
	assert.Contains(t, []float64{0, 0.5}, hint, "at most itself, on two workers (a buffered answer is written after it ended)")

	none := get("")
	assert.Equal(t, "false", none.Header.Get("X-Has-Deadline"))
	assert.Empty(t, <-down, "no deadline, nothing forwarded")
}
