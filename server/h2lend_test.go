//go:build linux

package server

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/sched"
)

// lendHandler answers with whether it ran as a coroutine on a worker.
// With ?flush=1 it flushes a first byte (a stream); with ?hold=1 it says
// where it runs on started, then waits for a value on release.
func lendHandler(started chan<- bool, release <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		on := sched.InCoroutine(r.Context())
		if r.URL.Query().Get("hold") == "1" {
			started <- on
			<-release
		}
		if r.URL.Query().Get("flush") == "1" {
			_, _ = w.Write([]byte("-"))
			w.(http.Flusher).Flush()
		}
		fmt.Fprintf(w, "coroutine=%v", on)
	}
}

// lendServer serves lendHandler over h2c on a runtime of one worker, and
// returns its scheduler, a client and the server's URL.
func lendServer(t *testing.T, started chan<- bool, release <-chan struct{}) (*sched.Scheduler, *http.Client, string) {
	rt := schedtest.Runtime(t, 1)
	_, addr := serveNativeOn(t, rt, HTTPHandler(lendHandler(started, release)), Config{})
	return rt.Scheduler, h2cClient(t), "http://" + addr
}

// lends is the number of leases the runtime's only worker has made, and
// of those the watchdog took back.
func lends(s *sched.Scheduler) (lent, taken int64) {
	w := s.Snapshot().Workers[0]
	return w.Lends, w.LendsTaken
}

// A stream of a route seen to be quick runs on its own goroutine, on a
// lease of its idle worker's CPU, not as a coroutine; one of a route not
// seen yet goes to the worker.
func TestH2QuickRouteRunsOnAnIdleWorkersLease(t *testing.T) {
	s, c, base := lendServer(t, nil, nil)

	_, body := getBody(t, c, base+"/q")
	assert.Equal(t, "coroutine=true", body, "the route's first stream runs on the worker")
	lent, _ := lends(s)
	assert.Zero(t, lent)

	// The next ones run on a lease whenever the worker is parked by then.
	require.Eventually(t, func() bool {
		_, body := getBody(t, c, base+"/q")
		return body == "coroutine=false"
	}, schedtest.WaitFor, time.Millisecond)
	lent, taken := lends(s)
	assert.Positive(t, lent)
	assert.Zero(t, taken)

	_, body = getBody(t, c, base+"/new")
	assert.Equal(t, "coroutine=true", body, "a route not seen yet goes to the worker")
}

// A stream that flushes on a lease gives it back, and its route is not
// lent for again: a stream's waits must not hold the worker's queue.
func TestH2RouteThatStreamsOnALeaseIsNotLentAgain(t *testing.T) {
	s, c, base := lendServer(t, nil, nil)

	_, body := getBody(t, c, base+"/r")
	require.Equal(t, "coroutine=true", body)
	require.Eventually(t, func() bool {
		_, body := getBody(t, c, base+"/r?flush=1")
		return body == "-coroutine=false"
	}, schedtest.WaitFor, time.Millisecond)
	lent, taken := lends(s)
	for range 20 {
		_, body := getBody(t, c, base+"/r")
		assert.Equal(t, "coroutine=true", body)
	}
	lentAfter, takenAfter := lends(s)
	assert.Equal(t, lent, lentAfter, "no lease for the route once it streamed")
	assert.Equal(t, taken, takenAfter, "given back, not taken")
}

// A handler that holds its lease (it blocks) has it taken back by the
// watchdog: the worker serves the streams queued behind it meanwhile. A
// route with h2LongMax such leases in a row is not lent for again.
func TestH2LeaseHeldTooLongIsTakenBack(t *testing.T) {
	started := make(chan bool)
	release := make(chan struct{})
	s, c, base := lendServer(t, started, release)

	_, body := getBody(t, c, base+"/b")
	require.Equal(t, "coroutine=true", body)
	// holdOnLease sends held streams until one runs on a lease, and
	// serves a stream of another route while that one holds it.
	holdOnLease := func() {
		deadline := time.Now().Add(schedtest.WaitFor)
		for {
			require.True(t, time.Now().Before(deadline), "no stream of the route ran on a lease")
			req, err := http.NewRequest(http.MethodGet, base+"/b?hold=1", nil)
			require.NoError(t, err)
			done := doAsync(c, req)
			if onWorker := schedtest.Recv(t, started, "the held handler's start"); onWorker {
				release <- struct{}{}
				assert.Equal(t, "coroutine=true", schedtest.Recv(t, done, "the held stream's answer"))
				continue
			}
			// On a lease, and holding it: a stream of another route,
			// which goes to the worker, is served all the same.
			_, body := getBody(t, c, base+"/other")
			assert.Equal(t, "coroutine=true", body)
			release <- struct{}{}
			assert.Equal(t, "coroutine=false", schedtest.Recv(t, done, "the held stream's answer"))
			return
		}
	}
	for i := 1; i <= h2LongMax; i++ {
		holdOnLease()
		_, taken := lends(s)
		assert.Equal(t, int64(i), taken)
	}
	lent, _ := lends(s)
	for range 20 {
		_, body = getBody(t, c, base+"/b")
		assert.Equal(t, "coroutine=true", body, "the route is not lent for again")
	}
	lentAfter, _ := lends(s)
	assert.Equal(t, lent, lentAfter)
}

// Long leases in a row make a route slow; a quick one starts the count
// again: a quick route held long now and then (a busy machine) stays
// lent for. A stream is slow at once.
func TestH2RouteStateCountsLongLeasesInARow(t *testing.T) {
	var st h2RouteState
	for range h2LongMax - 1 {
		st.ended(true, false)
	}
	assert.False(t, st.slow.Load())
	st.ended(false, false)
	for range h2LongMax - 1 {
		st.ended(true, false)
	}
	assert.False(t, st.slow.Load(), "a quick lease starts the count again")
	st.ended(true, false)
	assert.True(t, st.slow.Load())

	var streams h2RouteState
	streams.ended(false, true)
	assert.True(t, streams.slow.Load(), "a stream is slow at once")
}

// The set of routes stops learning at h2MaxRoutes, and keeps what it
// knows: a route learned is quick, one never seen is unknown.
func TestH2RoutesAreBounded(t *testing.T) {
	var q h2Routes
	for i := range h2MaxRoutes + 10 {
		q.learn(http.MethodGet, fmt.Sprintf("/users/%d", i))
	}
	m := q.m.Load()
	require.NotNil(t, m)
	assert.Len(t, *m, h2MaxRoutes)
	st := q.lookup(http.MethodGet, "/users/0")
	require.NotNil(t, st)
	assert.False(t, st.slow.Load())
	assert.Nil(t, q.lookup(http.MethodGet, fmt.Sprintf("/users/%d", h2MaxRoutes)))
	q.learn(http.MethodGet, "/users/0")
	assert.Same(t, st, q.lookup(http.MethodGet, "/users/0"), "learning a known route keeps its state")
}
