//go:build linux

package server

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sluice-go/sluice/internal/schedtest"
	srt "github.com/sluice-go/sluice/runtime"
)

// Requests that wait behind their worker's work while the other worker has
// none move there with their connections: four connections of one worker
// each send a request that computes for 20 ms, at once. Without the move
// all four run on that worker, one after another; with it, the other worker
// takes some, and a moved connection stays usable where it went.
func TestWaitingRequestsMoveToAnIdleWorker(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testMoves(t, false) })
	t.Run("TLS", func(t *testing.T) { testMoves(t, true) })
}

func testMoves(t *testing.T, overTLS bool) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ms, err := strconv.Atoi(r.URL.Query().Get("spin")); err == nil {
			// On the CPU, so that the worker is busy throughout.
			for end := time.Now().Add(time.Duration(ms) * time.Millisecond); time.Now().Before(end); {
			}
		}
		_, _ = io.WriteString(w, strconv.Itoa(unix.Gettid()))
	})
	// The rescue off, so that a spinning handler keeps its thread: the
	// thread tells the worker.
	rt := schedtest.RuntimeWith(t, srt.Config{Workers: 2, BlockedAfter: -1})
	cfg := Config{}
	var ccfg *tls.Config
	if overTLS {
		cfg.TLS, ccfg = testTLS(t)
		ccfg.NextProtos, ccfg.ServerName = []string{"http/1.1"}, "127.0.0.1"
	}
	srv, addr := serveNativeOn(t, rt, HTTPHandler(h), cfg)
	type client struct {
		nc net.Conn
		br *bufio.Reader
	}
	get := func(c client, path string) string {
		t.Helper()
		_, err := io.WriteString(c.nc, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(c.br, &http.Request{Method: "GET"})
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		return string(b)
	}
	// Four connections that the kernel gave the same worker.
	byThread := map[string][]client{}
	var same []client
	var home string
	for i := 0; i < 64 && same == nil; i++ {
		nc, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		if overTLS {
			nc = tls.Client(nc, ccfg)
		}
		t.Cleanup(func() { nc.Close() })
		require.NoError(t, nc.SetDeadline(time.Now().Add(30*time.Second)))
		c := client{nc, bufio.NewReader(nc)}
		tid := get(c, "/")
		byThread[tid] = append(byThread[tid], c)
		if len(byThread[tid]) == 4 {
			same, home = byThread[tid], tid
		}
	}
	require.NotNil(t, same, "four connections on one worker")
	// On a loaded machine a request of the set-up may have waited, and
	// moved (its answer then names the worker it moved to): count from
	// here.
	before := srv.Moves()

	var wg sync.WaitGroup
	ran := make([]string, len(same))
	for i, c := range same {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ran[i] = get(c, "/?spin=20")
		}()
	}
	wg.Wait()
	moved := 0
	for i, tid := range ran {
		if tid != home {
			moved++
			// It stays usable where it went, and stays there unless its
			// next request waited again (a loaded machine may leave the
			// worker's thread off the CPU past moveAfter): then it moved
			// again, and the count says so.
			again := srv.Moves()
			if next := get(same[i], "/"); next != tid {
				assert.Greater(t, srv.Moves(), again, "the moved connection is served on its new worker (%s), or moved again: served on %s", tid, next)
			}
		}
	}
	assert.Positive(t, moved, "ran on %v, all on the connections' worker %s", ran, home)
	assert.GreaterOrEqual(t, srv.Moves()-before, int64(moved))
	assert.Less(t, moved, len(same), "the first one starts where it is")
}

// Pipelined requests, and requests that arrive while the one before is
// answered, on the connections of a two-worker server whose requests
// wait behind each other: every request is answered once, in order, while
// connections move between the workers (a moved connection whose
// pipelined bytes were still queued on its old worker would be served
// twice at once).
func TestMovesKeepPipelinedRequestsInOrder(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for end := time.Now().Add(time.Millisecond); time.Now().Before(end); {
		}
		_, _ = io.WriteString(w, r.URL.Query().Get("n"))
	})
	rt := schedtest.RuntimeWith(t, srt.Config{Workers: 2, BlockedAfter: -1})
	srv, addr := serveNativeOn(t, rt, HTTPHandler(h), Config{})
	const conns, rounds = 8, 30
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			nc, err := net.Dial("tcp", addr)
			if !assert.NoError(t, err) {
				return
			}
			defer nc.Close()
			_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
			br := bufio.NewReader(nc)
			n := 0
			get := func() string {
				n++
				return "GET /?n=" + strconv.Itoa(n) + " HTTP/1.1\r\nHost: x\r\n\r\n"
			}
			for range rounds {
				first := n + 1
				_, err := io.WriteString(nc, get()+get())
				if !assert.NoError(t, err) {
					return
				}
				time.Sleep(time.Duration(first%3) * time.Millisecond)
				_, err = io.WriteString(nc, get())
				if !assert.NoError(t, err) {
					return
				}
				for want := first; want <= n; want++ {
					resp, err := http.ReadResponse(br, nil)
					if !assert.NoError(t, err) {
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if !assert.Equal(t, strconv.Itoa(want), string(b), "answered once, in order") {
						return
					}
				}
			}
		})
	}
	wg.Wait()
	t.Logf("moves: %d", srv.Moves())
}
