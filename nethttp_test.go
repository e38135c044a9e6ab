package sluice

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/internal/gatetest"
	"github.com/sluice-go/sluice/internal/syncbuf"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/server"
)

// These tests run the front door's net/http version (serveNetHTTP), which
// programs get off Linux, on every platform.

// serveNetHTTPForTest serves h with cfg on a loopback port, logging into
// the returned buffer, and stops the server when the test ends.
func serveNetHTTPForTest(t *testing.T, h http.Handler, cfg Config) (*netHTTP, string, *syncbuf.Buffer) {
	t.Helper()
	var logs syncbuf.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s, err := serveNetHTTP(l, h, cfg)
	if err != nil {
		_ = l.Close()
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.stop(ctx)
	})
	return s, "http://" + s.addr().String(), &logs
}

func TestNetHTTPServesBehindTheAdmission(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			entered <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "hello "+r.URL.Path)
	})
	cfg := Config{Admission: admit.Config{Gates: []admit.Policy{gatetest.Concurrency(t, 1)}}}
	s, url, logs := serveNetHTTPForTest(t, h, cfg)
	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	// The one place is taken by a request that blocks: the next one is
	// refused unstarted.
	blocked := make(chan *http.Response, 1)
	go func() {
		resp, err := client.Get(url + "/block")
		assert.NoError(t, err)
		blocked <- resp
	}()
	<-entered
	resp, err := client.Get(url + "/refused")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("Sluice-Not-Started"))
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	assert.Contains(t, string(body), "request not started")

	close(release)
	if resp := <-blocked; resp != nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "hello /block", string(b))
	}
	resp, err = client.Get(url + "/after")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "hello /after", string(b))

	st := s.stats()
	assert.EqualValues(t, 2, st.Admitted)
	assert.EqualValues(t, 1, st.Rejected)
	assert.Contains(t, logs.String(), "the executor is Linux-only; serving on net/http behind the admission pipeline")
	assert.Equal(t, 1, strings.Count(logs.String(), "Linux-only"), "one line at start")
}

func TestNetHTTPLimitsTheBody(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	_, url, _ := serveNetHTTPForTest(t, h, Config{MaxBodyBytes: 8})
	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	resp, err := client.Post(url, "text/plain", strings.NewReader("12345678"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	resp, err = client.Post(url, "text/plain", strings.NewReader("123456789"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
}

func TestNetHTTPStopCutsWhatOutlastsItsContext(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	entered := make(chan struct{}, 1)
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		entered <- struct{}{}
		<-release
	})
	s, url, _ := serveNetHTTPForTest(t, h, Config{})
	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	go func() {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, s.stop(ctx), context.DeadlineExceeded)
}

// What net/http cannot honour fails, naming the problem; what does not
// apply is named in the log line.
func TestNetHTTPConfig(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	busy := Config{Admission: admit.Config{Gates: []admit.Policy{gatetest.Busy(t, gate.BusyConfig{})}}}
	_, err = serveNetHTTP(l, http.NotFoundHandler(), busy)
	assert.ErrorContains(t, err, "sluice: on net/http")
	_, err = serveNetHTTP(l, nil, Config{})
	assert.ErrorContains(t, err, "nil http.Handler")

	assert.Empty(t, ignoredOffLinux(Config{}))
	cfg := Config{Lanes: server.Lanes{Routes: map[string]string{"/x": "slow"}}, HoldRefused: time.Second, LoadHint: true, Runtime: srt.Config{Workers: 2}}
	cfg.Listen.Shared = true
	assert.Equal(t, []string{"Config.Runtime", "Config.Lanes", "Config.Listen", "Config.HoldRefused", "Config.LoadHint"},
		ignoredOffLinux(cfg))

	_, _, logs := serveNetHTTPForTest(t, http.NotFoundHandler(), cfg)
	assert.Contains(t, logs.String(), `ignored="[Config.Runtime Config.Lanes Config.Listen Config.HoldRefused Config.LoadHint]"`)
}
