package await

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
)

// The Transport sends the time left before the context's deadline, keeps a
// field the caller set, sends nothing without a deadline, and leaves the
// caller's request alone.
func TestTransportForwardsTimeLeft(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get(admit.TimeoutHeader)
	}))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	do := func(tr *Transport, ctx context.Context, set string) string {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		if set != "" {
			req.Header.Set(admit.TimeoutHeader, set)
		}
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		if set == "" {
			assert.Empty(t, req.Header.Get(admit.TimeoutHeader), "the caller's request is not modified")
		}
		return <-got
	}
	tr := &Transport{Base: base}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	left, ok := admit.ParseTimeout(do(tr, ctx, ""))
	require.True(t, ok)
	assert.LessOrEqual(t, left, 500*time.Millisecond)
	assert.Positive(t, left)
	assert.Equal(t, "7m", do(tr, ctx, "7m"), "the caller's own field is kept")
	assert.Empty(t, do(tr, context.Background(), ""))
	assert.Empty(t, do(&Transport{Base: base, NoDeadlineHeader: true}, ctx, ""))
}
