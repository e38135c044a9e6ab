//go:build linux

package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/internal/gatetest"
	"github.com/sluice-go/sluice/internal/schedtest"
)

// TestOverloadKeepsServingAndRejectsTheRest drives a real two-worker server
// behind the default busy-worker gate past its capacity: its handler spins
// 2 ms of CPU, so the server can answer at most about 1000 requests a second,
// and 32 clients on kept-alive connections each send 40 requests back to
// back. The bounds are loose on purpose (the figures belong to the
// benchmarks): the server must keep serving all along, reject the rest
// early with a well-formed, retriable 503 on a connection that stays usable,
// and its counters must add up. The only timed bounds are failure guards:
// deadlines that turn a hang into a failure, and a served rate ten times
// below what the run shows.
func TestOverloadKeepsServingAndRejectsTheRest(t *testing.T) {
	const (
		clients   = 32
		perClient = 40
		work      = 2 * time.Millisecond
		deadline  = 30 * time.Second // a failure guard, not a measurement
	)
	rt := schedtest.Runtime(t, 2)
	g := gatetest.Busy(t, gate.BusyConfig{})
	h := HandlerFunc(func(w *ResponseWriter, r *Request) {
		for start := time.Now(); time.Since(start) < work; {
		}
		_, _ = w.WriteString("done " + r.URL.Path)
	})
	srv, err := Listen(rt, "127.0.0.1:0", h, Config{Admission: admit.Config{Gates: []admit.Policy{g}}})
	require.NoError(t, err)
	require.Equal(t, 1, g.Limit(), "2 workers at 50%: admit while the other worker is idle")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, srv.Close(ctx))
	})
	addr := srv.Addr().String()

	// outcome is what one client saw.
	type outcome struct {
		ok, rejected      int
		afterRejection    int         // responses after its first rejection, on the same connection
		okAt              []time.Time // when each 200 arrived
		err               error
		firstRejectionIdx int
	}
	results := make([]outcome, clients)
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := &results[c]
			o.firstRejectionIdx = -1
			o.err = func() error {
				nc, err := net.Dial("tcp", addr)
				if err != nil {
					return err
				}
				defer nc.Close()
				_ = nc.SetDeadline(time.Now().Add(deadline))
				br := bufio.NewReader(nc)
				for i := range perClient {
					path := fmt.Sprintf("/c%d/r%d", c, i)
					if _, err := io.WriteString(nc, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
						return fmt.Errorf("request %d: write: %w", i, err)
					}
					resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
					if err != nil {
						return fmt.Errorf("request %d: read: %w", i, err)
					}
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil {
						return fmt.Errorf("request %d: body: %w", i, err)
					}
					if resp.Close {
						return fmt.Errorf("request %d: the server closes the connection (status %d)", i, resp.StatusCode)
					}
					if o.firstRejectionIdx >= 0 {
						o.afterRejection++
					}
					switch resp.StatusCode {
					case http.StatusOK:
						if string(body) != "done "+path {
							return fmt.Errorf("request %d: 200 with body %q", i, body)
						}
						o.ok++
						o.okAt = append(o.okAt, time.Now())
					case http.StatusServiceUnavailable:
						// Refused by the gate, or too old by the time
						// its head was read (the default age limit).
						why := resp.Header.Get(ReasonHeader)
						if resp.Header.Get(NotStartedHeader) != "1" ||
							(why != "busy" && why != "queue-timeout") ||
							resp.Header.Get("Retry-After") != "1" ||
							string(body) != "request not started: "+why+"\n" {
							return fmt.Errorf("request %d: malformed rejection: %v %q", i, resp.Header, body)
						}
						o.rejected++
						if o.firstRejectionIdx < 0 {
							o.firstRejectionIdx = i
						}
					default:
						return fmt.Errorf("request %d: status %d, body %q", i, resp.StatusCode, body)
					}
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	var ok, rejected, reusedAfterRejection int
	var okAt []time.Time
	for c, o := range results {
		require.NoError(t, o.err, "client %d", c)
		assert.Equal(t, perClient, o.ok+o.rejected, "client %d", c)
		ok += o.ok
		rejected += o.rejected
		okAt = append(okAt, o.okAt...)
		if o.afterRejection > 0 {
			reusedAfterRejection++
		}
	}
	sent := clients * perClient
	t.Logf("%d requests from %d clients in %v: %d served (%.0f/s), %d rejected (%.0f%%); %d connections answered again after a rejection",
		sent, clients, elapsed.Round(time.Millisecond), ok, float64(ok)/elapsed.Seconds(),
		rejected, 100*float64(rejected)/float64(sent), reusedAfterRejection)

	// It keeps serving: some served in every quarter of the run (no stall,
	// no livelock of rejections), at a rate that is a fair part of one
	// worker's capacity. The share of requests served is not a stable
	// figure: the worker that runs the handlers keeps admitting the requests
	// of its own connections (it decides just after a handler, when the
	// other worker has often parked), while the clients of the other worker
	// are refused almost every time and use their 40 requests up within
	// milliseconds; how many requests the served clients still have then
	// sets the share, from about 5% to 70% here. The served rate, ~480/s on
	// a 2-vCPU machine (one worker's 500/s: on 2 workers the busy gate lets
	// one handler run at a time), is what stays; 50/s is a failure guard,
	// ten times below it.
	assert.GreaterOrEqual(t, ok, max(1, sent/50), "served share")
	assert.Greater(t, float64(ok)/elapsed.Seconds(), 50.0, "served per second (a failure guard)")
	var quarters [4]int
	for _, at := range okAt {
		q := int(4 * at.Sub(start) / elapsed)
		quarters[min(q, 3)]++
	}
	t.Logf("200s per quarter of the run: %v", quarters)
	for q, n := range quarters {
		assert.Positive(t, n, "200s in quarter %d of the run", q+1)
	}
	// It rejects the rest, on connections that stay usable.
	assert.Positive(t, rejected, "rejections")
	assert.Positive(t, reusedAfterRejection, "connections answered after a rejection")

	// The counters add up; nothing is left in flight.
	st := srv.Stats()
	assert.Equal(t, int64(sent), st.Admitted+st.Rejected, "admitted + rejected")
	assert.Equal(t, int64(ok), st.Admitted)
	assert.Equal(t, int64(rejected), st.Rejected)
	assert.Equal(t, int64(rejected), st.RejectedBy["busy"]+st.RejectedBy["queue-timeout"])
	for why := range st.RejectedBy {
		assert.Contains(t, []string{"busy", "queue-timeout"}, why)
	}
	assert.Positive(t, st.RejectedBy["busy"], "the gate refused some")
	assert.Equal(t, int64(0), st.InFlight)
}
