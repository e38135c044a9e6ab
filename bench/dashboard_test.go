//go:build linux

package bench

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/examples/weather"
)

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// A sluice target given a dashboard address serves the dashboard there
// while it runs, and lets the address go when it stops, for the next one.
func TestSluiceTargetServesItsDashboard(t *testing.T) {
	addr := freeAddr(t)
	tg, ok := targetByName("sluice", serveOptions{dashboard: addr})
	require.True(t, ok)
	c := &http.Client{Timeout: 5 * time.Second}
	defer c.CloseIdleConnections()
	for range 2 {
		rn, err := tg.Serve(weather.Handler(weather.Config{CPU: 100 * time.Microsecond}))
		require.NoError(t, err)
		resp, err := c.Get("http://" + addr + DashboardPath + "data")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		var data struct {
			Title    string `json:"title"`
			Controls bool   `json:"controls"`
		}
		require.NoError(t, json.Unmarshal(body, &data))
		assert.Contains(t, data.Title, "sluice")
		assert.False(t, data.Controls, "read-only during a benchmark")
		require.NoError(t, rn.Stop())
		c.CloseIdleConnections()
	}
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err, "the address is free once the target stopped")
	require.NoError(t, l.Close())
}

// DashboardLauncher adds the address to the children's environment.
func TestDashboardLauncher(t *testing.T) {
	launch := DashboardLauncher(func() (*exec.Cmd, error) { return exec.Command("true"), nil }, "localhost:8090")
	cmd, err := launch()
	require.NoError(t, err)
	assert.Contains(t, cmd.Env, DashboardEnv+"=localhost:8090")
}
