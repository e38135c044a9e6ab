package await

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Outside a coroutine (everywhere off Linux, where there is no executor)
// the wrappers are plain calls on the calling goroutine.
func TestWrappersArePlainCallsOutsideACoroutine(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	require.NoError(t, Sleep(ctx, 5*time.Millisecond))
	assert.GreaterOrEqual(t, time.Since(start), 5*time.Millisecond)

	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "plain")
	}))
	defer ts.Close()
	client := NewClient(&http.Client{Transport: &http.Transport{}})
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL, nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, "plain", string(b))
}
