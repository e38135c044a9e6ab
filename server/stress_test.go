//go:build linux

package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/sched"
)

// TestStressMixedClients runs many clients at once, each doing a random mix
// of what the server must get right together: kept-alive and pipelined
// requests, bodies of both framings, handlers that await and stream, and
// clients that vanish mid-request. Every completed exchange is checked, and
// the server must end with no connection open.
func TestStressMixedClients(t *testing.T) {
	h := HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return // the client went away
		}
		if r.URL.Query().Has("wait") {
			if err := sched.Sleep(r.Context(), time.Millisecond); err != nil {
				return
			}
		}
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("X-Sum", strconv.Itoa(len(b)))
		chunk := bytes.Repeat([]byte{'x'}, 1000)
		for i := 0; i < n; i += len(chunk) {
			w.Write(chunk[:min(len(chunk), n-i)])
		}
	}))
	// The exchanges are under test, not admission: without an age limit a
	// loaded machine cannot turn answers into 503s.
	srv, addr := serveNative(t, h, Config{Admission: admit.Config{MaxAge: -1, Target: -1}})
	const clients, rounds = 16, 30
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			nc, err := net.Dial("tcp", addr)
			if !assert.NoError(t, err) {
				return
			}
			defer func() { nc.Close() }()
			br := bufio.NewReader(nc)
			for range rounds {
				if rng.IntN(20) == 0 { // vanish mid-request, then reconnect
					fmt.Fprintf(nc, "POST /?wait HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
					nc.Close()
					if nc, err = net.Dial("tcp", addr); !assert.NoError(t, err) {
						return
					}
					br = bufio.NewReader(nc)
					continue
				}
				pipeline := 1 + rng.IntN(3)
				var sent []int
				var buf bytes.Buffer
				for range pipeline {
					size, n := rng.IntN(20_000), rng.IntN(30_000)
					q := fmt.Sprintf("/?n=%d", n)
					if rng.IntN(2) == 0 {
						q += "&wait"
					}
					body := bytes.Repeat([]byte{'b'}, size)
					if rng.IntN(2) == 0 {
						fmt.Fprintf(&buf, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", q, size, body)
					} else {
						fmt.Fprintf(&buf, "POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", q)
						for len(body) > 0 {
							k := min(len(body), 1+rng.IntN(5000))
							fmt.Fprintf(&buf, "%x\r\n%s\r\n", k, body[:k])
							body = body[k:]
						}
						buf.WriteString("0\r\n\r\n")
					}
					sent = append(sent, size, n)
				}
				go func(p []byte) { nc.Write(p) }(buf.Bytes()) // write while reading: no deadlock on big pipelines
				_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
				for i := 0; i < len(sent); i += 2 {
					resp, err := http.ReadResponse(br, nil)
					if !assert.NoError(t, err) {
						return
					}
					got, err := io.ReadAll(resp.Body)
					if !assert.NoError(t, err) {
						return
					}
					assert.Equal(t, 200, resp.StatusCode, resp.Header.Get(ReasonHeader))
					assert.Equal(t, strconv.Itoa(sent[i]), resp.Header.Get("X-Sum"))
					assert.Equal(t, sent[i+1], len(got))
				}
			}
		}()
	}
	wg.Wait()
	require.Eventually(t, func() bool { return srv.OpenConns() == 0 }, 10*time.Second, 10*time.Millisecond,
		"connections left open: %d", srv.OpenConns())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(ctx))
}
