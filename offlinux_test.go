package sluice_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/dashboard"
	"github.com/sluice-go/sluice/metrics"
)

// Off Linux the front door serves on net/http, with no runtime and no
// sluice server: the metrics of a Server and its dashboard show its
// admission there, rather than dereferencing what it does not have.
func TestMetricsAndDashboardOfANetHTTPServer(t *testing.T) {
	srv := sluice.NetHTTPServerForTest(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}), sluice.Config{})
	require.Nil(t, srv.Runtime(), "premise: no runtime")
	require.Nil(t, srv.Server(), "premise: no sluice server")
	require.NotNil(t, srv.Pipeline())

	col, err := metrics.New(metrics.Config{}, metrics.Server("api", srv))
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(col))
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Positive(t, n, "the admission's metrics")

	dash, err := dashboard.New(dashboard.Config{Server: srv})
	require.NoError(t, err)
	defer dash.Close()
	rec := httptest.NewRecorder()
	dash.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://localhost/debug/sluice/data", nil))
	assert.Equal(t, http.StatusOK, rec.Code, "%s", rec.Body.String())
}
