//go:build linux

package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/internal/gatetest"
	"github.com/sluice-go/sluice/internal/schedtest"
	srt "github.com/sluice-go/sluice/runtime"
)

// The age limit is on by default, and its reads carry the kernel's stamps
// only while it is.
func TestAgeSettingsFromConfig(t *testing.T) {
	rt := schedtest.Runtime(t, 1)
	h := HTTPHandler(http.NotFoundHandler())
	for _, tc := range []struct {
		name   string
		adm    admit.Config
		maxAge time.Duration
	}{
		{"default", admit.Config{}, admit.DefaultMaxAge},
		{"explicit", admit.Config{MaxAge: 50 * time.Millisecond}, 50 * time.Millisecond},
		{"queue", admit.Config{Gates: []admit.Policy{gatetest.Concurrency(t, 1)}, Queue: &admit.QueueConfig{}, MaxAge: 30 * time.Millisecond},
			30 * time.Millisecond},
		{"off", admit.Config{MaxAge: -1}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := Listen(rt, "127.0.0.1:0", h, Config{Admission: tc.adm})
			require.NoError(t, err)
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				assert.NoError(t, srv.Close(ctx))
			}()
			assert.Equal(t, tc.maxAge, srv.Stats().MaxAge)
			assert.Equal(t, tc.maxAge > 0, srv.stamps, "stamped reads exactly when the age limit applies")
		})
	}
}

// A configuration that cannot work is refused by Listen, naming the
// problem.
func TestListenRefusesAdmissionThatCannotWork(t *testing.T) {
	rt := schedtest.Runtime(t, 1)
	h := HTTPHandler(http.NotFoundHandler())
	_, err := Listen(rt, "127.0.0.1:0", h, Config{Admission: admit.Config{Queue: &admit.QueueConfig{}}})
	assert.ErrorContains(t, err, "a queue needs a gate")

	other := schedtest.Runtime(t, 2)
	busy := gatetest.Busy(t, gate.BusyConfig{})
	srv, err := Listen(rt, "127.0.0.1:0", h, Config{Admission: admit.Config{Gates: []admit.Policy{busy}}})
	require.NoError(t, err)
	defer srv.Close(context.Background())
	_, err = Listen(other, "127.0.0.1:0", h, Config{Admission: admit.Config{Gates: []admit.Policy{busy}}})
	assert.ErrorContains(t, err, "another executor")

	_, err = Listen(nil, "127.0.0.1:0", h, Config{})
	assert.ErrorContains(t, err, "nil runtime")
	_, err = Listen(rt, "127.0.0.1:0", nil, Config{})
	assert.ErrorContains(t, err, "nil Handler")
	_, err = Listen(rt, "127.0.0.1:0", h, Config{Runtime: srt.Config{Workers: 4}})
	assert.ErrorContains(t, err, "Config.Runtime configures the runtime that sluice.Listen starts")
}

// A request's age counts from when its head was all there: a head sent in
// two writes far apart, on an idle server, is served, on a fresh
// connection and on a kept one, and a run of them does not make the line
// stand.
func TestSplitHeadIsNotOld(t *testing.T) {
	srv, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{})
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(30*time.Second)))
	br := bufio.NewReader(nc)
	for i := range 3 {
		_, err := io.WriteString(nc, "GET /split HTTP/1.1\r\nHost: x\r\n")
		require.NoError(t, err)
		// Longer than the age limit (100 ms), the gap a slow client or
		// Nagle's algorithm can leave between two segments of one head.
		time.Sleep(150 * time.Millisecond)
		_, err = io.WriteString(nc, "X-Late: 1\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "split head %d: %s", i, resp.Header.Get("Sluice-Reject-Reason"))
	}
	st := srv.Stats()
	assert.False(t, st.Standing)
	assert.Equal(t, admit.DefaultMaxAge, st.MaxAge)
	assert.Zero(t, st.Rejected)
}

// A pipelined request's age counts from when the requests before it on
// its connection had ended, the earliest the server could start it: a
// client that pipelines more work than the age limit holds (50 requests
// of 4 ms each, 200 ms in all) is served in full, as net/http serves it,
// and the line does not stand. Whether the requests wait in the server's
// read buffer (small heads) or in the socket's (heads of 2 KB, more than
// the buffer holds), their age is the same.
func TestPipelinedRequestsAreNotOld(t *testing.T) {
	spin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for end := time.Now().Add(4 * time.Millisecond); time.Now().Before(end); {
		}
		_, _ = io.WriteString(w, r.URL.Path)
	})
	for _, pad := range []int{0, 2048} {
		t.Run(fmt.Sprintf("pad=%d", pad), func(t *testing.T) {
			srv, addr := serveHTTP(t, spin, Config{})
			nc, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer nc.Close()
			require.NoError(t, nc.SetDeadline(time.Now().Add(30*time.Second)))
			const n = 50
			var reqs strings.Builder
			for i := range n {
				fmt.Fprintf(&reqs, "GET /%d HTTP/1.1\r\nHost: x\r\nX-Pad: %s\r\n\r\n", i, strings.Repeat("p", pad))
			}
			_, err = io.WriteString(nc, reqs.String())
			require.NoError(t, err)
			br := bufio.NewReader(nc)
			refused := 0
			for i := range n {
				resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
				require.NoError(t, err)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					refused++
					t.Logf("request %d: %s (%s)", i, resp.Status, resp.Header.Get("Sluice-Reject-Reason"))
				}
			}
			assert.Zero(t, refused, "pipelined requests refused")
			st := srv.Stats()
			assert.Zero(t, st.Rejected)
			assert.Equal(t, admit.DefaultMaxAge, st.MaxAge)
		})
	}
}

// refuseAll refuses every request and notes, per path, what the server
// said it came after (admit.Ticket.Prior) and whether it was resent at
// once after a refusal (admit.Ticket.Resent).
type refuseAll struct {
	mu     sync.Mutex
	resent map[string]bool
	prior  map[string]admit.Prior
}

func (p *refuseAll) Admit(a *admit.Attempt) *admit.Refusal {
	t := &a.Request.(*Request).Body.(*body).c.t
	p.mu.Lock()
	p.resent[a.Path] = t.Resent()
	if p.prior != nil {
		p.prior[a.Path] = t.Prior
	}
	p.mu.Unlock()
	return &admit.Refusal{Reason: "test"}
}

func (*refuseAll) Done(*admit.Attempt, admit.Outcome) {}

// A request is resent at once when its client sent it after reading the
// refusal of the one before: one it had pipelined behind that one, sent
// before the refusal was, is not, however soon after the refusal it
// starts. (Counted as resent, a pipelining client made refusing look
// futile, and its connection could be held.)
func TestPipelinedRequestsAreNotResent(t *testing.T) {
	pol := &refuseAll{resent: make(map[string]bool), prior: make(map[string]admit.Prior)}
	_, addr := serveHTTP(t, http.NotFoundHandler(), Config{Admission: admit.Config{Policies: []admit.Policy{pol}}})
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(30*time.Second)))
	br := bufio.NewReader(nc)
	read := func() {
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	}

	// Pipelined: five heads in one write, all there before the first is
	// refused.
	const n = 5
	var reqs strings.Builder
	for i := range n {
		fmt.Fprintf(&reqs, "GET /p%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
	}
	_, err = io.WriteString(nc, reqs.String())
	require.NoError(t, err)
	for range n {
		read()
	}
	// Resent: each head written the moment the refusal before it is read,
	// as wrk does. Loopback answers well within admit.ResendWindow, but a
	// loaded machine may not: at least one of them must be seen as resent.
	const m = 20
	for i := range m {
		_, err = fmt.Fprintf(nc, "GET /r%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
		require.NoError(t, err)
		read()
	}

	// Sent a while after the answer before it: a client that does not
	// loop at once.
	time.Sleep(5 * admit.ResendWindow)
	_, err = io.WriteString(nc, "GET /later HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	read()

	pol.mu.Lock()
	defer pol.mu.Unlock()
	assert.Equal(t, admit.PriorNone, pol.prior["/p0"], "the connection's first request came after nothing")
	for i := range n {
		assert.False(t, pol.resent[fmt.Sprintf("/p%d", i)], "pipelined request %d counted as resent", i)
		assert.Equal(t, admit.PriorNone, pol.prior[fmt.Sprintf("/p%d", i)], "pipelined request %d counted as sent after an answer", i)
	}
	resent := 0
	for i := range m {
		if pol.resent[fmt.Sprintf("/r%d", i)] {
			resent++
		}
		assert.Equal(t, admit.PriorRefusal, pol.prior[fmt.Sprintf("/r%d", i)], "request %d sent after a refusal", i)
	}
	assert.Positive(t, resent, "none of the requests sent on a refusal's arrival was counted as resent")
	assert.Equal(t, admit.PriorRefusal, pol.prior["/later"])
	assert.False(t, pol.resent["/later"], "a request sent 5 ms after the refusal counted as resent at once")
}

// recordPriors admits every request and notes, per path, what the server
// said it came after (admit.Ticket.Prior) and how soon (Since).
type recordPriors struct {
	mu    sync.Mutex
	prior map[string]admit.Prior
	since map[string]time.Duration
}

func (p *recordPriors) Admit(a *admit.Attempt) *admit.Refusal {
	t := &a.Request.(*Request).Body.(*body).c.t
	p.mu.Lock()
	p.prior[a.Path], p.since[a.Path] = t.Prior, t.Since
	p.mu.Unlock()
	return nil
}

func (*recordPriors) Done(*admit.Attempt, admit.Outcome) {}

// A request sent after the answer to the one before it on its connection
// is known as such, with how soon it came (what tells a closed loop's
// client, admit.Config.LoopGrace): the first on a connection came after
// nothing, each one sent once the last answer was read came after an
// answer, one sent 5 ms later came 5 ms or more after it, and one
// pipelined behind another came after nothing.
func TestRequestsAfterAnAnswerAreKnown(t *testing.T) {
	pol := &recordPriors{prior: make(map[string]admit.Prior), since: make(map[string]time.Duration)}
	_, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{Admission: admit.Config{Policies: []admit.Policy{pol}}})
	nc, br := dialRaw(t, addr)
	get := func(paths ...string) {
		var reqs strings.Builder
		for _, p := range paths {
			fmt.Fprintf(&reqs, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", p)
		}
		_, err := io.WriteString(nc, reqs.String())
		require.NoError(t, err)
		readOK(t, br, len(paths))
	}
	get("/first")
	for i := range 5 {
		get(fmt.Sprintf("/next%d", i))
	}
	time.Sleep(5 * admit.ResendWindow)
	get("/later")
	get("/a", "/pipelined")

	pol.mu.Lock()
	defer pol.mu.Unlock()
	assert.Equal(t, admit.PriorNone, pol.prior["/first"])
	for i := range 5 {
		path := fmt.Sprintf("/next%d", i)
		assert.Equal(t, admit.PriorAnswer, pol.prior[path], path)
		assert.GreaterOrEqual(t, pol.since[path], time.Duration(0), path)
	}
	assert.Equal(t, admit.PriorAnswer, pol.prior["/later"])
	assert.GreaterOrEqual(t, pol.since["/later"], 5*admit.ResendWindow, "sent 5 ms after the answer")
	assert.Equal(t, admit.PriorAnswer, pol.prior["/a"])
	assert.Equal(t, admit.PriorNone, pol.prior["/pipelined"], "sent before the answer to the one before")
}

// A new connection's request waits in the Upstream lane once, in the order
// it arrived among the kept-alive connections' requests. One worker is held
// by a handler while kept-alive connections pipeline two requests each and
// then a new connection sends one; once released, the worker sees the
// kept-alive reads, then the listener. The accept runs ahead of the lane
// and queues the new connection's read behind the kept-alive ones; each of
// those queues its connection's second request behind it. So the new
// request starts after every first one, which arrived before it, and
// before every second one. (With the accept queued behind the lane, the
// read waited a second round, behind the second requests too: under a
// burst of pipelined work its age passed the limit where one round fit.
// With the read queued ahead of the lane, new connections overtook
// kept-alive ones that had arrived first, and under a standing overload
// the kept-alive ones were refused: 80 of them a second served against
// 592 new ones, at 5x in the mix scenario.)
func TestNewConnectionWaitsInTheLaneOnce(t *testing.T) {
	var (
		mu      sync.Mutex
		order   []string
		holding = make(chan struct{}, 1)
		release atomic.Bool
	)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" && r.URL.RawQuery == "spin" {
			holding <- struct{}{}
			// On the CPU, so that nothing takes the worker away.
			for end := time.Now().Add(5 * time.Second); !release.Load() && time.Now().Before(end); {
			}
		}
		mu.Lock()
		order = append(order, r.URL.Path)
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	})
	// The rescue off: on a loaded machine it could take the spinning
	// handler's thread for a blocked one and let a spare serve the
	// connections while the handler holds.
	rt := schedtest.RuntimeWith(t, srt.Config{Workers: 1, BlockedAfter: -1})
	_, addr := serveNativeOn(t, rt, HTTPHandler(h), Config{})
	get := func(path string) string { return "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n" }
	read := func(br *bufio.Reader, n int) { readOK(t, br, n) }
	dial := func() (net.Conn, *bufio.Reader) { return dialRaw(t, addr) }
	// Every connection but the new one is open and has been served once
	// (every route known), so that only their requests are left to read.
	const k = 8
	keep := make([]net.Conn, k)
	keepR := make([]*bufio.Reader, k)
	for i := range keep {
		keep[i], keepR[i] = dial()
		_, err := io.WriteString(keep[i], get("/a")+get("/b")+get("/new")+get("/hold"))
		require.NoError(t, err)
		read(keepR[i], 4)
	}
	hold, holdR := dial()
	_, err := io.WriteString(hold, get("/hold?spin"))
	require.NoError(t, err)
	<-holding
	mu.Lock()
	order = order[:0]
	mu.Unlock()
	for i := range keep {
		_, err := io.WriteString(keep[i], get("/a")+get("/b"))
		require.NoError(t, err)
	}
	time.Sleep(20 * time.Millisecond) // the kept-alive reads become ready first
	nc, ncR := dial()
	_, err = io.WriteString(nc, get("/new"))
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond)
	release.Store(true)
	read(holdR, 1)
	read(ncR, 1)
	for i := range keep {
		read(keepR[i], 2)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, order, 2*k+2, "%v", order)
	at := slices.Index(order, "/new")
	assert.Equal(t, k+1, at, "the new connection's request after the %d first requests and before every second one: %v", k, order)
}

// dialRaw opens a connection to addr for raw requests, closed when the test
// ends, with a reader for the answers.
func dialRaw(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	require.NoError(t, nc.SetDeadline(time.Now().Add(30*time.Second)))
	return nc, bufio.NewReader(nc)
}

// readOK reads n answers to GET requests from br, each a 200.
func readOK(t *testing.T, br *bufio.Reader, n int) {
	t.Helper()
	for range n {
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
}
