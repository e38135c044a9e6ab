//go:build linux

package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sluice-go/sluice/internal/schedtest"
	srt "github.com/sluice-go/sluice/runtime"
)

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
