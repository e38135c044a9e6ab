//go:build linux

package chaos

import (
	"bytes"
	"context"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// largeAnswer is the size of the answers the no-read clients ask for in
// the tests: large enough that a few unread ones fill the server's socket
// buffer and block its writes.
const largeAnswer = 256 << 10

// chaosServer starts a loopback net/http server running h with the given
// header timeout (0: none), counting the connections it saw close, and
// closes it when the test ends.
func chaosServer(t *testing.T, h http.HandlerFunc, headerTimeout time.Duration) (url string, closed *atomic.Int64) {
	t.Helper()
	closed = new(atomic.Int64)
	s := httptest.NewUnstartedServer(h)
	s.Config.ReadHeaderTimeout = headerTimeout
	s.Config.ErrorLog = discardLog()
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closed.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s.URL + "/forecast?city=Lisbon", closed
}

// ok answers "ok".
func ok(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }

// discardLog is an error log that keeps nothing (net/http logs every
// garbage request and timed-out head).
func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }

// runChaos runs the chaos of cfg for d.
func runChaos(t *testing.T, cfg Config, d time.Duration) Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	st, err := Run(ctx, cfg)
	require.NoError(t, err)
	return st
}

func TestChaosSlowlorisIsCutByTheHeaderTimeout(t *testing.T) {
	t.Parallel()
	url, _ := chaosServer(t, ok, 150*time.Millisecond)
	st := runChaos(t, Config{URL: url, Mix: Mix{Slowloris: 2}, SlowGap: 20 * time.Millisecond, SlowHold: 5 * time.Second}, 700*time.Millisecond)
	require.Len(t, st, 1)
	c := st["slowloris"]
	require.NotNil(t, c)
	assert.GreaterOrEqual(t, c.ServerClosed, int64(2), "each client was cut at least once")
	assert.Zero(t, c.GaveUp)
	assert.GreaterOrEqual(t, c.CutMin, 100*time.Millisecond, "not before the header timeout")
	assert.Less(t, c.CutMax, time.Second)
	assert.LessOrEqual(t, c.CutMin, c.CutMax)
}

func TestChaosSlowlorisGivesUpOnAPatientServer(t *testing.T) {
	t.Parallel()
	url, _ := chaosServer(t, ok, 0)
	st := runChaos(t, Config{URL: url, Mix: Mix{Slowloris: 1}, SlowGap: 10 * time.Millisecond, SlowHold: 100 * time.Millisecond}, 450*time.Millisecond)
	c := st["slowloris"]
	assert.GreaterOrEqual(t, c.GaveUp, int64(2), "held to SlowHold, closed, started over")
	assert.Zero(t, c.ServerClosed)
	assert.GreaterOrEqual(t, c.Conns, c.GaveUp)
}

func TestChaosNoReadStallsTheServersWrites(t *testing.T) {
	t.Parallel()
	var served atomic.Int64
	big := bytes.Repeat([]byte("x"), largeAnswer)
	url, closed := chaosServer(t, func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		_, _ = w.Write(big)
	}, 0)
	st := runChaos(t, Config{URL: url, Mix: Mix{NoRead: 1}, NoReadHold: 100 * time.Millisecond}, 700*time.Millisecond)
	c := st["noread"]
	require.NotNil(t, c)
	assert.Positive(t, c.Stalled, "net/http stops reading requests while it cannot write its answers")
	assert.Zero(t, c.ServerClosed, "every request is written whole (a write cut by its deadline is continued): nothing to refuse")
	assert.GreaterOrEqual(t, c.Resets, c.Conns-1, "every connection but one cut by the end ends with a reset")
	assert.Less(t, served.Load(), c.Requests/2, "the server answered a small part of what was sent")
	assert.Less(t, c.Requests, int64(DefaultNoReadMax), "each stalled long before the cap")
	assert.Eventually(t, func() bool { return closed.Load() >= c.Conns }, 2*time.Second, 10*time.Millisecond,
		"the server saw every reset connection close")
}

func TestChaosResetsMidRequest(t *testing.T) {
	t.Parallel()
	url, closed := chaosServer(t, ok, 0)
	st := runChaos(t, Config{URL: url, Mix: Mix{Reset: 2}}, 300*time.Millisecond)
	c := st["reset"]
	require.NotNil(t, c)
	assert.GreaterOrEqual(t, c.Conns, int64(4))
	assert.GreaterOrEqual(t, c.Resets, c.Conns-2, "every connection but those cut by the end ends with a reset")
	assert.Eventually(t, func() bool { return closed.Load() >= c.Conns }, 2*time.Second, 10*time.Millisecond)
}

func TestChaosGarbageIsRefused(t *testing.T) {
	t.Parallel()
	url, _ := chaosServer(t, ok, 0)
	st := runChaos(t, Config{URL: url, Mix: Mix{Garbage: 2}, Seed: 7, Timeout: 100 * time.Millisecond}, 500*time.Millisecond)
	c := st["garbage"]
	require.NotNil(t, c)
	assert.Positive(t, c.Conns)
	// net/http answers what it cannot parse with 400 and closes; a
	// head that never ends it waits for, until the client gives up.
	assert.Positive(t, c.Status[http.StatusBadRequest]+c.GaveUp)
	assert.Zero(t, c.Status[http.StatusOK], "garbage is never served")
}

func TestChaosFloodIsAnsweredInOrder(t *testing.T) {
	t.Parallel()
	var served atomic.Int64
	url, _ := chaosServer(t, func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		ok(w, r)
	}, 0)
	st := runChaos(t, Config{URL: url, Mix: Mix{Flood: 1}, FloodRequests: 40}, 200*time.Millisecond)
	c := st["flood"]
	require.NotNil(t, c)
	assert.GreaterOrEqual(t, c.Requests, int64(10))
	assert.LessOrEqual(t, c.Status[http.StatusOK], c.Requests)
	assert.GreaterOrEqual(t, c.Status[http.StatusOK], c.Requests-40, "all but the last burst, cut by the end, answered")
	assert.GreaterOrEqual(t, served.Load(), c.Status[http.StatusOK])
}

func TestChaosStopsWithItsContext(t *testing.T) {
	t.Parallel()
	url, _ := chaosServer(t, ok, 0)
	ctx, cancel := context.WithCancel(context.Background())
	every := Mix{Slowloris: 16, NoRead: 4, Reset: 4, Garbage: 4, Flood: 4}
	done := make(chan Stats, 1)
	go func() {
		// Long holds and timeouts: only the end of ctx stops them.
		st, _ := Run(ctx, Config{URL: url, Mix: every, SlowHold: time.Minute, NoReadHold: time.Minute, Timeout: time.Minute})
		done <- st
	}()
	time.Sleep(200 * time.Millisecond)
	cancel()
	select {
	case st := <-done:
		assert.Len(t, st, len(Kinds()), "every kind of the mix ran")
		assert.Equal(t, int64(every.Slowloris), st["slowloris"].Conns)
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return promptly after its context ended")
	}
}

func TestChaosConfigErrors(t *testing.T) {
	t.Parallel()
	_, err := Run(context.Background(), Config{URL: "http://192.0.2.1:80/"})
	assert.ErrorContains(t, err, "not a loopback address")
	_, err = Run(context.Background(), Config{URL: "https://127.0.0.1:1/"})
	assert.ErrorContains(t, err, "plain http")
	_, err = Run(context.Background(), Config{URL: "http://127.0.0.1:1/", Mix: Mix{Flood: -1}})
	assert.ErrorContains(t, err, "negative count of flood clients")
}

func TestChaosWithoutClientsReturnsAtOnce(t *testing.T) {
	t.Parallel()
	url, _ := chaosServer(t, ok, 0)
	start := time.Now()
	st, err := Run(context.Background(), Config{URL: url})
	require.NoError(t, err)
	assert.Empty(t, st)
	assert.Less(t, time.Since(start), time.Second, "nothing to wait for")
}

func TestChaosDialErrorsDoNotSpin(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there any more
	st := runChaos(t, Config{URL: "http://" + addr + "/", Mix: Mix{Reset: 1}}, 250*time.Millisecond)
	c := st["reset"]
	assert.Zero(t, c.Conns)
	assert.Positive(t, c.DialErrors)
	assert.Contains(t, c.DialError, "connection refused")
	assert.LessOrEqual(t, c.DialErrors, int64(5), "a pause after each failed dial")
}

func TestChaosMix(t *testing.T) {
	t.Parallel()
	m := Mix{Slowloris: 1, NoRead: 2, Reset: 3, Garbage: 4, Flood: 5}
	for i, k := range Kinds() {
		assert.Equal(t, i+1, m.Of(k), k.String())
	}
	assert.Equal(t, 15, m.Total())
	assert.Equal(t, "chaos(9)", Kind(9).String())
	assert.Zero(t, m.Of(Kind(9)))
}

func TestChaosCountsAdd(t *testing.T) {
	t.Parallel()
	var total Counts
	total.add(&Counts{Conns: 1, Status: map[int]int64{200: 2}, CutMin: 3 * time.Second, CutMax: 4 * time.Second})
	total.add(&Counts{Conns: 2, Status: map[int]int64{200: 1, 400: 1}, CutMin: time.Second, CutMax: 2 * time.Second})
	total.add(&Counts{Conns: 1})
	assert.Equal(t, int64(4), total.Conns)
	assert.Equal(t, map[int]int64{200: 3, 400: 1}, total.Status)
	assert.Equal(t, time.Second, total.CutMin)
	assert.Equal(t, 4*time.Second, total.CutMax)
}

func TestSlowByteNeverEndsTheHead(t *testing.T) {
	head := []byte("GET / HTTP/1.1\r\nHost: h\r\n")
	var b []byte
	for i := range len(head) + 40 {
		b = append(b, slowByte(head, i))
	}
	assert.True(t, bytes.HasPrefix(b, head))
	lines := strings.Split(string(b[len(head):]), "\r\n")
	require.Len(t, lines, 6)
	for _, l := range lines[:5] {
		assert.Regexp(t, `^[a-z]{2}:[a-z]{3}$`, l, "a field line")
	}
	assert.NotContains(t, string(b), "\r\n\r\n")
}

// choppyConn takes what is written to it, but cuts every tenth write short
// with a deadline error, as a socket whose reader is slow does.
type choppyConn struct {
	net.Conn // nil: only the methods below are called
	got      []byte
	writes   int
}

func (c *choppyConn) Write(p []byte) (int, error) {
	c.writes++
	if c.writes%10 == 0 {
		n := min(len(p), 37*c.writes%len(p))
		c.got = append(c.got, p[:n]...)
		return n, os.ErrDeadlineExceeded
	}
	c.got = append(c.got, p...)
	return len(p), nil
}

func (c *choppyConn) SetWriteDeadline(time.Time) error { return nil }

// TestChaosNoReadKeepsRequestsWhole has a no-read client's writes cut
// short now and then: it continues each from where it stopped, so that the
// bytes sent are whole requests back to back, up to NoReadMax of them.
func TestChaosNoReadKeepsRequestsWhole(t *testing.T) {
	t.Parallel()
	u, err := url.Parse("http://127.0.0.1:1/unread")
	require.NoError(t, err)
	c, err := newRunner(u, Config{NoReadMax: 300, NoReadHold: time.Millisecond})
	require.NoError(t, err)
	conn := &choppyConn{}
	var n Counts
	reset := c.noRead(context.Background(), conn, rand.New(rand.NewPCG(1, 2)), &n)
	assert.True(t, reset)
	assert.Positive(t, conn.writes/10, "writes were cut")
	req := noReadRequest("/unread", "127.0.0.1:1")
	assert.True(t, bytes.Equal(bytes.Repeat(req, 300), conn.got), "300 whole requests back to back")
	assert.Equal(t, int64(300), n.Requests)
	assert.Zero(t, n.Stalled, "each window took more than the stall threshold")
}
