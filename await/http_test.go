package await

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/sched"
)

// newServer starts an httptest server for h, closed when the test ends,
// and a client through Transport whose idle connections are closed then.
func newServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *http.Client) {
	t.Helper()
	srv := httptest.NewServer(h)
	client := NewClient(&http.Client{Transport: &http.Transport{}})
	t.Cleanup(func() {
		client.CloseIdleConnections()
		srv.Close()
	})
	return srv, client
}

func get(ctx context.Context, client *http.Client, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return client.Do(req)
}

func TestTransportReleasesWorker(t *testing.T) {
	const n = 20
	s := schedtest.Start(t, 1)
	var inHandler, gotHeaders atomic.Int32
	allIn, allHeaders := make(chan struct{}), make(chan struct{})
	respond, sendBody := newGate(1), newGate(1)
	srv, client := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if inHandler.Add(1) == n {
			close(allIn)
		}
		if respond.pass(r.Context()) != nil {
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		if sendBody.pass(r.Context()) != nil {
			return
		}
		fmt.Fprintf(w, "hello %s", r.URL.Query().Get("i"))
	})
	t.Cleanup(func() { respond.Open(); sendBody.Open() })

	var mu sync.Mutex
	bodies := make(map[int]string)
	wait := goCoroutines(t, s, n, func(ctx context.Context, i int) {
		resp, err := get(ctx, client, fmt.Sprintf("%s/?i=%d", srv.URL, i))
		if !assert.NoError(t, err) {
			return
		}
		defer resp.Body.Close()
		if gotHeaders.Add(1) == n {
			close(allHeaders)
		}
		b, err := io.ReadAll(resp.Body)
		assert.NoError(t, err)
		mu.Lock()
		bodies[i] = string(b)
		mu.Unlock()
	})

	// All n requests are in the handler at once, sent from one worker,
	// which is idle: every round trip has released it.
	schedtest.Recv(t, allIn, "all requests in the handler")
	schedtest.WorkersIdle(t, s, n)
	respond.Open()

	// All n handlers have their response headers and wait in a body read
	// at once; the worker is idle again.
	schedtest.Recv(t, allHeaders, "all response headers")
	schedtest.WorkersIdle(t, s, n)
	sendBody.Open()

	wait()
	require.Len(t, bodies, n)
	for i := range n {
		assert.Equal(t, fmt.Sprintf("hello %d", i), bodies[i])
	}
}

func TestTransportOutsideCoroutine(t *testing.T) {
	srv, client := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "plain")
	})
	resp, err := client.Get(srv.URL)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, "plain", string(b))

	// The zero Transport and NewClient(nil) use http.DefaultTransport.
	for _, c := range []*http.Client{{Transport: &Transport{}}, NewClient(nil)} {
		resp, err := c.Get(srv.URL)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		assert.Equal(t, "plain", string(b))
		c.CloseIdleConnections() // through Transport to http.DefaultTransport
	}
}

func TestNewClient(t *testing.T) {
	base := &http.Client{Transport: &http.Transport{}}
	c := NewClient(base)
	require.IsType(t, (*Transport)(nil), c.Transport)
	assert.Same(t, base.Transport, c.Transport.(*Transport).Base)
	assert.IsType(t, (*http.Transport)(nil), base.Transport, "base modified")
	assert.Same(t, c.Transport, NewClient(c).Transport, "wrapped twice")
	assert.Nil(t, NewClient(&http.Client{}).Transport.(*Transport).Base)
}

func TestTransportCancel(t *testing.T) {
	s := schedtest.Start(t, 1)
	entered := make(chan struct{}, 2)
	srv, client := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/body" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
		}
		entered <- struct{}{}
		<-r.Context().Done()
	})

	// Cancelling the request's context, derived from the coroutine's, ends
	// the round trip with the context's error...
	cancels := make(chan context.CancelFunc, 1)
	errs := make(chan error, 2)
	wait := goCoroutines(t, s, 1, func(ctx context.Context, _ int) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		cancels <- cancel
		_, err := get(ctx, client, srv.URL+"/head")
		errs <- err
	})
	schedtest.Recv(t, entered, "the request in the handler")
	schedtest.WorkersIdle(t, s, 1)
	schedtest.Recv(t, cancels, "cancel")()
	assert.ErrorIs(t, schedtest.Recv(t, errs, "the round trip's error"), context.Canceled)
	wait()

	// ... and a body read likewise.
	wait = goCoroutines(t, s, 1, func(ctx context.Context, _ int) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		resp, err := get(ctx, client, srv.URL+"/body")
		if !assert.NoError(t, err) {
			errs <- err
			return
		}
		defer resp.Body.Close()
		cancels <- cancel
		_, err = io.ReadAll(resp.Body)
		errs <- err
	})
	schedtest.Recv(t, entered, "the request in the handler")
	cancel := schedtest.Recv(t, cancels, "cancel")
	schedtest.WorkersIdle(t, s, 1)
	cancel()
	assert.ErrorIs(t, schedtest.Recv(t, errs, "the body read's error"), context.Canceled)
	wait()
}

// A 101 Switching Protocols response's body stays an io.ReadWriteCloser,
// and hides io.WriterTo.
func TestTransportSwitchingProtocols(t *testing.T) {
	s := schedtest.Start(t, 1)
	srv, client := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		brw.Flush()
		io.Copy(conn, brw) // echo until the client closes
	})
	inCoroutine(t, s, func(ctx context.Context) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if !assert.NoError(t, err) {
			return
		}
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "echo")
		resp, err := client.Do(req)
		if !assert.NoError(t, err) {
			return
		}
		defer resp.Body.Close()
		assert.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
		_, isWriterTo := resp.Body.(io.WriterTo)
		assert.False(t, isWriterTo)
		rw, ok := resp.Body.(io.ReadWriteCloser)
		if !assert.True(t, ok, "body %T is not an io.ReadWriteCloser", resp.Body) {
			return
		}
		for _, msg := range []string{"ping", "pong"} {
			_, err = io.WriteString(rw, msg)
			assert.NoError(t, err)
			buf := make([]byte, len(msg))
			_, err = io.ReadFull(rw, buf)
			assert.NoError(t, err)
			assert.Equal(t, msg, string(buf))
		}
	})
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// closeRecorder is a response body that records its Close.
type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (b *closeRecorder) Close() error { b.closed.Store(true); return nil }

// A scheduler stopping during a round trip abandons it: the handler gets
// sched.ErrStopped at once, and the response that arrives later is closed.
func TestTransportStopAbandonsRoundTrip(t *testing.T) {
	schedtest.SkipWithoutExecutor(t)
	s, err := sched.New(sched.Config{Workers: 1})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	g := newGate(1)
	t.Cleanup(g.Open)
	body := &closeRecorder{Reader: strings.NewReader("late")}
	client := &http.Client{Transport: &Transport{Base: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		_ = g.pass(context.Background())
		return &http.Response{StatusCode: http.StatusOK, Body: body, Request: req}, nil
	})}}

	errs := make(chan error, 1)
	require.NoError(t, s.Go(context.Background(), 0, func(ctx context.Context) {
		resp, err := get(ctx, client, "http://example.invalid/")
		if err == nil {
			resp.Body.Close()
		}
		errs <- err
	}))
	schedtest.Recv(t, g.reached, "the round trip")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, s.Stop(ctx), context.Canceled)
	assert.ErrorIs(t, schedtest.Recv(t, errs, "the handler's error"), sched.ErrStopped)
	assert.False(t, body.closed.Load())
	g.Open()
	assert.Eventually(t, body.closed.Load, waitFor, tick, "abandoned response not closed")
}
