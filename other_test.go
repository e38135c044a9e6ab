//go:build !linux

package sluice

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/syncbuf"
	srt "github.com/sluice-go/sluice/runtime"
)

// Off Linux the front door serves on net/http, says so once, and has no
// runtime or sluice server to show.
func TestFrontDoorServesOnNetHTTP(t *testing.T) {
	var logs syncbuf.Buffer
	cfg := Config{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Runtime: srt.Config{Workers: 2}}
	s, err := Listen("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello "+r.URL.Path) }), cfg)
	require.NoError(t, err)
	assert.Nil(t, s.Runtime())
	assert.Nil(t, s.Server())
	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + s.Addr().String() + "/up")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "hello /up", string(b))
	assert.EqualValues(t, 1, s.Stats().Admitted)
	assert.Contains(t, logs.String(), "Linux-only")
	assert.Contains(t, logs.String(), "Config.Runtime")
	require.NoError(t, s.Stop(context.Background()))
	require.NoError(t, s.Stop(context.Background()), "a second Stop returns the first one's result")
}
