//go:build linux

package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/lanes"
)

// A worker's lists of connections: the latest added first, any one
// removed from anywhere, each list through its own links, so that a
// connection is in both at once.
func TestConnList(t *testing.T) {
	all, parked := connList{which: linkAll}, connList{which: linkParked}
	a, b, c := &conn{}, &conn{}, &conn{}
	for _, x := range []*conn{a, b, c} {
		all.add(x)
		parked.add(x)
	}
	assert.Same(t, c, parked.head)
	assert.Same(t, a, parked.tail, "the oldest is last")
	parked.remove(b)
	assert.Same(t, c, parked.head)
	assert.Same(t, a, c.links[linkParked].next)
	assert.Same(t, b, c.links[linkAll].next, "the other list is untouched")
	parked.remove(c)
	assert.Same(t, a, parked.head)
	assert.Same(t, a, parked.tail)
	assert.Nil(t, a.links[linkParked].prev)
	parked.add(b)
	assert.Same(t, b, parked.head)
	parked.remove(a)
	assert.Same(t, b, parked.tail, "the tail moves up when the last goes")
	parked.remove(b)
	assert.Nil(t, parked.head)
	assert.Nil(t, parked.tail)
	assert.Same(t, c, all.head)
	all.remove(c)
	all.remove(a)
	assert.Same(t, b, all.head)
	assert.Nil(t, b.links[linkAll].next)
}

// closedLoop runs clients connections that each send a GET the moment the
// last answer is in, as wrk does, for warm then d; it returns the answers
// by status in d, and the most connections seen parked at once then. It
// calls probe, if not nil, every 5 ms during d.
func closedLoop(t *testing.T, srv *Server, addr string, clients int, warm, d time.Duration, probe func()) (ok, refused int64, parked int) {
	t.Helper()
	var nOK, nRefused atomic.Int64
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), warm+d)
	defer cancel()
	for range clients {
		nc, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer nc.Close()
			stop := context.AfterFunc(ctx, func() { nc.Close() })
			defer stop()
			br := bufio.NewReader(nc)
			for ctx.Err() == nil {
				if _, err := io.WriteString(nc, "GET /work HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
					return
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					nOK.Add(1)
				case http.StatusServiceUnavailable:
					nRefused.Add(1)
				}
			}
		}()
	}
	time.Sleep(warm)
	ok0, refused0 := nOK.Load(), nRefused.Load()
	for ctx.Err() == nil {
		parked = max(parked, srv.ParkedConns())
		if probe != nil {
			probe()
		}
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	return nOK.Load() - ok0, nRefused.Load() - refused0, parked
}

// A closed loop of more clients than one worker serves within the age
// limit: without holds (HoldRefused negative), the clients refused resend
// at once and the server spends its time refusing them again and again;
// with them (the default), the clients beyond what it serves in time wait
// out their Retry-After unread, and the refusals fall several times.
// Shutdown then serves or closes the parked connections like idle ones.
func TestClosedLoopBeyondCapacityIsHeld(t *testing.T) {
	if raceEnabled {
		// It compares rates of a closed loop a second long, which the
		// race detector's cost per request turns into another load:
		// on CI it refused more with holds than without. Parking
		// itself runs under the race detector in
		// TestHeldConnectionKeepsItsAnswer.
		t.Skip("rates of a closed loop: not under the race detector")
	}
	work := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for start := time.Now(); time.Since(start) < time.Millisecond; {
		}
		io.WriteString(w, "ok")
	})
	run := func(hold time.Duration) (ok, refused int64, parked int, holds int64) {
		rt := schedtest.Runtime(t, 1)
		srv, err := Listen(rt, "127.0.0.1:0", HTTPHandler(work), Config{
			HoldRefused: hold,
		})
		require.NoError(t, err)
		ok, refused, parked = closedLoop(t, srv, srv.Addr().String(), 200, time.Second, time.Second, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, srv.Shutdown(ctx))
		assert.Zero(t, srv.ParkedConns())
		return ok, refused, parked, srv.Holds()
	}
	okOff, refusedOff, parkedOff, holdsOff := run(-1)
	require.Zero(t, parkedOff)
	require.Zero(t, holdsOff)
	require.Greater(t, refusedOff, okOff, "premise: without holds, the clients refused resend and are refused again (%d served)", okOff)

	ok, refused, parked, holds := run(0)
	t.Logf("in the second second, without holds: %d served, %d refused; with: %d served, %d refused, up to %d parked",
		okOff, refusedOff, ok, refused, parked)
	assert.Positive(t, parked)
	assert.GreaterOrEqual(t, holds, int64(parked), "every connection parked at once was a hold")
	// 3.0 to 8.8 times fewer in six runs on a loaded machine (load
	// average 5 to 7), where three times failed one run in five.
	assert.Less(t, 2*refused, refusedOff, "holds refuse several times fewer")
	assert.Greater(t, ok, refused, "most answers are served")
}

// A held connection keeps its refusal's answer until the hold ends: its
// client, which sends only once answered, has sent nothing more, so no
// request waits in a parked socket. (Parking after the answer, as holds
// first did, left the next request of a pool that reuses its latest
// connection in the socket until the hold ended, past its deadline, while
// the pool's other connections could have carried it.) Every parked
// connection a worker task finds during a closed loop has an empty
// socket.
func TestHeldConnectionKeepsItsAnswer(t *testing.T) {
	work := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for start := time.Now(); time.Since(start) < time.Millisecond; {
		}
		io.WriteString(w, "ok")
	})
	rt := schedtest.Runtime(t, 1)
	srv, err := Listen(rt, "127.0.0.1:0", HTTPHandler(work), Config{HoldRefused: time.Second})
	require.NoError(t, err)
	var seen, waiting atomic.Int64
	probe := func() {
		done := make(chan struct{})
		err := srv.s.Worker(0).Submit(lanes.Continuation, func() {
			defer close(done)
			for c := srv.ws[0].parked.head; c != nil; c = c.links[linkParked].next {
				seen.Add(1)
				if c.inputWaiting() {
					waiting.Add(1)
				}
			}
		})
		if err == nil {
			<-done
		}
	}
	// The premise is a line longer than the age limit, which the clients
	// of a loaded machine (the race detector's CI, every package's tests
	// at once) may not build in a second: up to three loops, until some
	// connection was parked.
	for i := 0; i < 3 && seen.Load() == 0; i++ {
		ok, refused, parked := closedLoop(t, srv, srv.Addr().String(), 200, time.Second, time.Second, probe)
		t.Logf("loop %d: %d served, %d refused, up to %d parked; %d seen by the probes, %d with a request in the socket",
			i+1, ok, refused, parked, seen.Load(), waiting.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(ctx))
	require.Positive(t, seen.Load(), "premise: connections were parked")
	assert.Zero(t, waiting.Load(), "no request waits in a parked socket")
}
