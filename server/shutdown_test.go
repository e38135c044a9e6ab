//go:build linux

package server

import (
	"bufio"
	"context"
	"errors"
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
	"github.com/sluice-go/sluice/internal/schedtest"
)

// shutdownTarget is a server under the shutdown test: its address, and its
// graceful shutdown.
type shutdownTarget struct {
	addr     string
	shutdown func(context.Context) error
}

// TestShutdownServesWhatWasSent: with every worker busy in a handler that
// holds it (blocking, or spinning on the CPU), 20 clients connect and send
// their requests, just before or just after the server begins its graceful
// shutdown. Every one is served, at least as many as net/http's Shutdown
// serves; none is reset. (Before, the connections queued in the kernel were
// reset when the busy workers closed their listening sockets, and those
// accepted but not read yet were closed as idle: 18 of 20 reset. net/http,
// since Go 1.25 or so, drops a request it reads after Shutdown began.)
func TestShutdownServesWhatWasSent(t *testing.T) {
	const clients, holders = 20, 4
	const hold = 80 * time.Millisecond
	shapes := map[string]func(){
		"blocking": func() { time.Sleep(hold) },
		"cpu": func() {
			for start := time.Now(); time.Since(start) < hold; {
			}
		},
	}
	for name, work := range shapes {
		for _, before := range []bool{true, false} {
			when := map[bool]string{true: "sent before", false: "sent after"}[before]
			t.Run(name+"/"+when, func(t *testing.T) {
				var entered sync.WaitGroup
				entered.Add(holders)
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/hold" {
						entered.Done()
						work()
					}
					fmt.Fprintf(w, "served %s", r.URL.Path)
				})
				sluiceServed := shutdownScenario(t, &entered, clients, holders, before, func() shutdownTarget {
					rt := schedtest.Runtime(t, 2)
					// No age limit: this is about shutdown, not admission.
					srv, err := Listen(rt, "127.0.0.1:0", HTTPHandler(h), Config{Admission: admit.Config{MaxAge: -1}})
					require.NoError(t, err)
					return shutdownTarget{srv.Addr().String(), srv.Shutdown}
				})
				entered = sync.WaitGroup{}
				entered.Add(holders)
				netServed := shutdownScenario(t, &entered, clients, holders, before, func() shutdownTarget {
					l, err := net.Listen("tcp", "127.0.0.1:0")
					require.NoError(t, err)
					hs := &http.Server{Handler: h}
					go func() { _ = hs.Serve(l) }()
					return shutdownTarget{l.Addr().String(), hs.Shutdown}
				})
				t.Logf("%s handlers, requests %s the shutdown began: sluice served %d of %d, net/http %d",
					name, when, sluiceServed, clients, netServed)
				assert.GreaterOrEqual(t, sluiceServed, netServed, "as many as net/http's Shutdown, or more")
				assert.Equal(t, clients, sluiceServed, "every request sent is served")
			})
		}
	}
}

// shutdownScenario starts a target, occupies it with holders requests that
// hold their handlers, connects clients, and begins the shutdown; the
// clients send one request each just before the shutdown (before set) or
// just after. It returns how many were answered 200 with the right body.
func shutdownScenario(t *testing.T, entered *sync.WaitGroup, clients, holders int, before bool, start func() shutdownTarget) int {
	t.Helper()
	tg := start()
	var held sync.WaitGroup
	for range holders {
		held.Add(1)
		go func() {
			defer held.Done()
			nc, err := net.Dial("tcp", tg.addr)
			if !assert.NoError(t, err) {
				return
			}
			defer nc.Close()
			_, _ = io.WriteString(nc, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
			_, _ = io.Copy(io.Discard, nc)
		}()
	}
	entered.Wait() // every holder is in its handler
	conns := make([]net.Conn, clients)
	for i := range conns {
		nc, err := net.Dial("tcp", tg.addr)
		require.NoError(t, err)
		defer nc.Close()
		conns[i] = nc
	}
	shut := make(chan error, 1)
	shutdown := func() {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			shut <- tg.shutdown(ctx)
		}()
		time.Sleep(10 * time.Millisecond) // the shutdown has begun
	}
	if !before {
		shutdown()
	}
	sent := make([]bool, clients)
	for i, nc := range conns {
		_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
		_, err := io.WriteString(nc, fmt.Sprintf("GET /c%d HTTP/1.1\r\nHost: x\r\n\r\n", i))
		sent[i] = err == nil
	}
	if before {
		time.Sleep(10 * time.Millisecond) // the requests are in the kernel's buffers
		shutdown()
	}
	served := make(chan bool, clients)
	for i, nc := range conns {
		go func() {
			path := fmt.Sprintf("/c%d", i)
			if !sent[i] {
				served <- false
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
			if err != nil {
				served <- false
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			served <- err == nil && resp.StatusCode == http.StatusOK && string(b) == "served "+path
		}()
	}
	n := 0
	for range clients {
		if <-served {
			n++
		}
	}
	err := <-shut
	assert.True(t, err == nil || errors.Is(err, http.ErrServerClosed), "shutdown: %v", err)
	held.Wait()
	return n
}
