//go:build linux

package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/examples/weather"
	"github.com/sluice-go/sluice/laneadmin"
	"github.com/sluice-go/sluice/lanes"
)

// On net/http, Yield does nothing: the batch handler computes its slices
// in a row and logs each, and stops when its client has left.
func TestLanesHandlerOnNetHTTP(t *testing.T) {
	h, log := lanesHandler(200*time.Microsecond, weather.NewSpinner(), &LanesChild{Batch: 2 * time.Millisecond, Slice: 500 * time.Microsecond, Span: time.Minute})
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	for _, path := range []string{LanesBatchPath, LanesInteractivePath} {
		resp, err := client.Get(srv.URL + path)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
	ws := log.series()
	sum := func(xs []int64) (n int64) {
		for _, x := range xs {
			n += x
		}
		return n
	}
	assert.Equal(t, int64(2*time.Millisecond), sum(ws.Batch))
	assert.Equal(t, int64(200*time.Microsecond), sum(ws.Interactive))
	assert.Equal(t, 5*time.Millisecond, ws.Bucket)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, LanesBatchPath, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	assert.Empty(t, rec.Body.String(), "a request whose client left is not computed")
	assert.Equal(t, int64(2*time.Millisecond), sum(log.series().Batch))
}

// A sluice target of the live part, in a child process with the lanes
// hook, serves the batch with its lane registered, changes the lane's
// shares through the lane admin endpoint, for the run's token only, and
// reports its work log once stopped.
func TestLanesTargetChangesShares(t *testing.T) {
	child := &LanesChild{
		Batch: time.Millisecond, Slice: 250 * time.Microsecond, Span: time.Minute,
		Lane:  &lanes.Spec{Name: LanesBackground, Priority: 2, Shares: 10},
		Token: "0123456789abcdef0123",
	}
	cs := bench.ChildSpec{Target: "sluice", Handler: bench.HandlerSpec{CPU: 100 * time.Microsecond}}
	require.NoError(t, cs.SetHook((&Lanes{}).Name(), child))
	trial := &bench.Trial{Suite: &bench.SuiteConfig{}}
	proc, err := trial.Start(context.Background(), cs)
	require.NoError(t, err)
	stopped := false
	defer func() {
		if !stopped {
			assert.NoError(t, proc.Stop())
		}
	}()

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := client.Get(proc.URL + LanesBatchPath)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "done\n", string(body))

	// The admin endpoint has a listener of its own, outside the target's
	// admission; the target's path of the same name is its handler's.
	require.Eventually(t, func() bool { return proc.AdminURL() != "" }, 5*time.Second, 10*time.Millisecond, "the child reports its admin endpoint")
	admin := proc.AdminURL()
	assert.NotContains(t, admin, strings.TrimPrefix(proc.URL, "http://"))
	resp, err = client.Get(proc.URL + LanesAdminPath)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "the target's own handler, which has no such path")

	change := func(token string) int {
		body, err := json.Marshal(laneadmin.Change{Lane: LanesBackground, Shares: new(int64(50))})
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, admin, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusUnauthorized, change("not-the-token-of-this-run"))
	assert.Equal(t, http.StatusOK, change(child.Token))

	req, err := http.NewRequest(http.MethodGet, admin, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+child.Token)
	resp, err = client.Do(req)
	require.NoError(t, err)
	var st struct {
		Lanes []struct {
			Name     string `json:"name"`
			Priority int32  `json:"priority"`
			Shares   uint32 `json:"shares"`
		} `json:"lanes"`
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	require.NoError(t, err)
	require.NotEmpty(t, st.Lanes)
	last := st.Lanes[len(st.Lanes)-1]
	assert.Equal(t, LanesBackground, last.Name)
	assert.Equal(t, int32(2), last.Priority)
	assert.Equal(t, uint32(50), last.Shares)

	stopped = true
	require.NoError(t, proc.Stop())
	var work WorkSeries
	require.NoError(t, json.Unmarshal(proc.Report, &work), "the child reports its work log")
	var batch int64
	for _, ns := range work.Batch {
		batch += ns
	}
	assert.Equal(t, int64(time.Millisecond), batch, "four slices")
}
