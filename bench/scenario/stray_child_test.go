//go:build linux

package scenario

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/examples/weather"
)

func TestStrayHandler(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(50 * time.Millisecond)
		_, _ = io.WriteString(w, "slow\n")
	}))
	defer slow.Close()
	cs := bench.ChildSpec{Handler: bench.HandlerSpec{CPU: 10 * time.Microsecond}}
	require.NoError(t, cs.SetHook("stray", strayChild{URL: slow.URL + "/slow"}))
	part, err := (&Stray{}).ChildHook().Open(cs, weather.Handler(cs.Handler.Options()))
	require.NoError(t, err)
	srv := httptest.NewServer(part.Handler)
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	get := func(path string) (int, string, time.Duration) {
		start := time.Now()
		resp, err := client.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b), time.Since(start)
	}
	code, body, took := get(StrayPath)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "done\n", body)
	assert.GreaterOrEqual(t, took, 50*time.Millisecond, "it waits for the slow service")
	code, body, _ = get(TrivialPath)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body)
	code, body, _ = get(bench.WeatherPath)
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"city":"Lisbon"`)

	// The slow service gone: the stray call fails with 502.
	slow.Close()
	code, _, _ = get(StrayPath)
	assert.Equal(t, http.StatusBadGateway, code)
}
