// Package dashboard_test drives the dashboard's page in a real browser
// (Chromium, through chromedp) against a server under load.
package dashboard_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/schedtest"
	srt "github.com/sluice-go/sluice/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testServer starts a sluice server on two workers, behind cfg, serving
// h, and stops it at the end of the test. Off Linux it skips the test: the
// front door serves on net/http there, with no runtime or sluice server
// for the dashboard to show.
func testServer(t *testing.T, cfg sluice.Config, h http.Handler) *sluice.Server {
	t.Helper()
	schedtest.SkipWithoutExecutor(t)
	quiet := slog.New(slog.DiscardHandler) // a loaded test machine makes the executor warn
	cfg.Logger = quiet
	cfg.Runtime = srt.Config{Workers: 2, Logger: quiet}
	srv, err := sluice.Listen("127.0.0.1:0", h, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, srv.Stop(ctx))
	})
	return srv
}
