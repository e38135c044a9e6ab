//go:build linux

package load

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// leaveWatcher is a handler that holds each request until released and
// records whether the client left first (its connection closed).
type leaveWatcher struct {
	arrived chan string // each request's RemoteAddr
	release chan struct{}
	left    atomic.Int64 // requests whose client went away while held
}

func newLeaveWatcher() *leaveWatcher {
	return &leaveWatcher{arrived: make(chan string, 16), release: make(chan struct{})}
}

func (l *leaveWatcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.arrived <- r.RemoteAddr
	select {
	case <-l.release:
		_, _ = w.Write([]byte("late"))
	case <-r.Context().Done():
		l.left.Add(1)
	}
}

func TestRawReconnectClosesTimedOutConnection(t *testing.T) {
	l := newLeaveWatcher()
	s := newRawCountedServer(t, l.ServeHTTP)
	t.Cleanup(func() { close(l.release) }) // before the server's Close
	c := newTestRawClient(t, s.URL, 1)     // ClientReconnect: the default

	_, err := c.do(context.Background(), time.Now().Add(100*time.Millisecond), false, nil)
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	first := rawReceive(t, l.arrived, "the first request")
	// The server sees the client leave: net/http's server cancels the
	// request's context when its connection closes.
	require.Eventually(t, func() bool { return l.left.Load() == 1 }, 5*time.Second, 5*time.Millisecond, "the server saw the client leave")

	// The next request opens a new connection.
	done := goRawDo(context.Background(), c, time.Now().Add(100*time.Millisecond))
	second := rawReceive(t, l.arrived, "the second request")
	rawReceive(t, done, "the second request's timeout")
	assert.NotEqual(t, first, second, "a new connection")
	assert.Equal(t, int64(2), s.conns.Load())
	assert.Equal(t, int64(2), c.dials())
}

func TestRawKeepWaitsForLateAnswer(t *testing.T) {
	l := newLeaveWatcher()
	s := newRawCountedServer(t, l.ServeHTTP)
	c := newTestRawClient(t, s.URL, 1)
	c.keep = true

	start := time.Now()
	_, err := c.do(context.Background(), start.Add(100*time.Millisecond), false, nil)
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded, "failed at its deadline")
	assert.Less(t, time.Since(start), 5*time.Second)
	first := rawReceive(t, l.arrived, "the first request")

	// The connection stays open, waiting for the late answer: the next
	// request on the pool of one waits for it.
	done := goRawDo(context.Background(), c, rawSoon())
	time.Sleep(200 * time.Millisecond)
	assert.Zero(t, l.left.Load(), "the server never saw the client leave")
	select {
	case d := <-done:
		t.Fatalf("the second request did not wait for the connection: %+v", d)
	default:
	}
	close(l.release) // the late answer, then the second request's
	second := rawReceive(t, l.arrived, "the second request")
	d := rawReceive(t, done, "the second request")
	require.NoError(t, d.err)
	assert.Equal(t, http.StatusOK, d.res.Status)
	assert.Equal(t, first, second, "the same connection, after the late answer")
	assert.Equal(t, int64(1), s.conns.Load())
	assert.Equal(t, int64(1), c.dials())
	assert.Zero(t, l.left.Load())
	open, all, idle := rawPool(c)
	assert.Equal(t, [3]int{1, 1, 1}, [3]int{open, all, idle})
}

func TestRawKeepCloseEndsDrain(t *testing.T) {
	l := newLeaveWatcher()
	s := newRawCountedServer(t, l.ServeHTTP)
	t.Cleanup(func() { close(l.release) })
	u, err := url.Parse(s.URL)
	require.NoError(t, err)
	c, err := newRawClient(u, http.MethodGet, 1, 5*time.Second)
	require.NoError(t, err)
	c.keep = true
	_, err = c.do(context.Background(), time.Now().Add(50*time.Millisecond), false, nil)
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	rawReceive(t, l.arrived, "the request")
	// close ends the background read at once and waits for it (goleak
	// checks that nothing is left).
	closed := make(chan struct{})
	go func() { c.close(); close(closed) }()
	rawReceive(t, closed, "close")
	require.Eventually(t, func() bool { return l.left.Load() == 1 }, 5*time.Second, 5*time.Millisecond)
}

func TestRawKeepDeadlinePassedWhileWaiting(t *testing.T) {
	s, b := startRawBlocked(t)
	c := newTestRawClient(t, s.URL, 1)
	c.keep = true
	busy := goRawDo(context.Background(), c, rawSoon())
	b.waitArrival(t)
	// The pool's one connection is busy past this request's deadline:
	// it fails without touching the connection when it gets it.
	waiting := goRawDo(context.Background(), c, time.Now().Add(50*time.Millisecond))
	time.Sleep(150 * time.Millisecond)
	b.Release()
	require.NoError(t, rawReceive(t, busy, "the first request").err)
	assert.ErrorIs(t, rawReceive(t, waiting, "the late request").err, os.ErrDeadlineExceeded)
	assert.Equal(t, int64(1), s.conns.Load())
	open, all, idle := rawPool(c)
	assert.Equal(t, [3]int{1, 1, 1}, [3]int{open, all, idle}, "the connection back in the pool")
}

func TestRawKeepWaitsForConnectionUntilDeadline(t *testing.T) {
	s, b := startRawBlocked(t)
	c := newTestRawClient(t, s.URL, 1)
	c.keep = true
	busy := goRawDo(context.Background(), c, rawSoon())
	b.waitArrival(t)
	// The pool's one connection stays busy: a keeping client gives up
	// waiting for it at the request's deadline, without dialling.
	start := time.Now()
	_, err := c.do(context.Background(), start.Add(100*time.Millisecond), false, nil)
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)
	b.Release()
	require.NoError(t, rawReceive(t, busy, "the first request").err)
	assert.Equal(t, int64(1), s.conns.Load())
}

// TestRunClientModes runs the generator against a server slower than the
// deadline: every request times out. Reconnecting, each timeout closes its
// connection and the next request dials; keeping, the pool's connections
// wait for the late answers and are reused.
func TestRunClientModes(t *testing.T) {
	for _, mode := range ClientModes() {
		t.Run(mode.String(), func(t *testing.T) {
			s := newRawCountedServer(t, func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-time.After(150 * time.Millisecond):
				case <-r.Context().Done():
				}
			})
			res, err := Run(context.Background(), Config{
				URL: s.URL, Rate: 10, Duration: time.Second, Deadline: 100 * time.Millisecond,
				Conns: 2, ClientMode: mode, LateShare: 1, LagLimit: time.Second,
			})
			require.NoError(t, err)
			assert.Equal(t, int64(10), res.Offered)
			assert.Equal(t, res.Offered, res.Failed, "every request past its deadline")
			assert.Equal(t, s.conns.Load(), res.Dials, "the server accepted every connection dialled")
			if mode == ClientReconnect {
				assert.GreaterOrEqual(t, res.Dials, res.Sent, "a new connection for each request")
			} else {
				assert.LessOrEqual(t, res.Dials, int64(2), "the pool's connections only")
			}
		})
	}
}

func TestClientModeConfig(t *testing.T) {
	for _, m := range ClientModes() {
		got, err := ParseClientMode(m.String())
		require.NoError(t, err)
		assert.Equal(t, m, got)
	}
	_, err := ParseClientMode("polite")
	assert.Error(t, err)
	assert.Equal(t, ClientReconnect, Config{}.ClientMode, "the zero value is the generator's behaviour so far")

	base := Config{URL: "http://127.0.0.1:1/", Rate: 1, Duration: time.Second, ClientMode: ClientKeep}
	_, err = newPlan(base)
	assert.NoError(t, err)
	withClient := base
	withClient.Client = &http.Client{}
	_, err = newPlan(withClient)
	assert.ErrorContains(t, err, "ClientKeep")
	tls := base
	tls.URL = "https://127.0.0.1:1/"
	_, err = newPlan(tls)
	assert.NoError(t, err, "the raw client speaks TLS")
	bad := base
	bad.ClientMode = 9
	_, err = newPlan(bad)
	assert.Error(t, err)
}
