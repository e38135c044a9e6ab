//go:build linux

package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/lanes"
)

// takeOver takes its connection over, answers 101 and waits until the
// client leaves, as a WebSocket served inside its handler does.
func takeOver(w http.ResponseWriter, _ *http.Request) {
	nc, brw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer nc.Close()
	_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n")
	_ = brw.Flush()
	_, _ = brw.ReadByte() // until the client leaves
}

// TestMeasureBurstHeap measures what a burst of WebSockets leaves on the
// heap: a thousand connections opened at once, each taken over by its
// handler and kept. It logs the live heap per connection and the entries
// of the workers' free lists just after the burst (a trim may have come
// already) and once they have been trimmed (docs/design.md, "Buffers"). The clients are in the same process: they count alike in
// both figures. Run it with SLUICE_MEASURE_BURST=1 go test -run
// TestMeasureBurstHeap -v ./server.
func TestMeasureBurstHeap(t *testing.T) {
	if os.Getenv("SLUICE_MEASURE_BURST") == "" {
		t.Skip("a measurement: set SLUICE_MEASURE_BURST=1")
	}
	srv, addr := serveHTTP(t, http.HandlerFunc(takeOver), Config{})
	// held returns the entries of the workers' free lists, read on them.
	held := func() (n int) {
		for i, ws := range srv.ws {
			got := make(chan int, 1)
			require.NoError(t, srv.s.Worker(i).Submit(lanes.Continuation, func() {
				got <- len(ws.bufs.free) + len(ws.outs.free) + len(ws.heads.free)
			}))
			n += <-got
		}
		return n
	}
	heap := func() float64 {
		runtime.GC()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		metrics.Read(s)
		return float64(s[0].Value.Uint64())
	}
	before := heap()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	for range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			_, _ = fmt.Fprintf(c, "GET /ws HTTP/1.1\r\nHost: x\r\n\r\n")
			if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
				_ = c.Close()
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	require.NotEmpty(t, conns)
	per := func(h float64) float64 { return (h - before) / float64(len(conns)) / 1024 }
	t.Logf("%d connections, just after the burst: live heap %.2f KiB per connection, %d entries in the free lists",
		len(conns), per(heap()), held())
	time.Sleep(3 * trimEvery)
	t.Logf("%d connections, %v later: live heap %.2f KiB per connection, %d entries in the free lists",
		len(conns), 3*trimEvery, per(heap()), held())
}

// TestBurstBuffersAreLetGo leaves on a worker what a burst of connections
// does (read and output buffers and header maps put back by hundreds, as a
// thousand WebSockets opened at once left them) on a serving server: its
// free lists must not hold them for good.
func TestBurstBuffersAreLetGo(t *testing.T) {
	srv, addr := serveHTTP(t, http.HandlerFunc(echoPath), Config{})
	ws, w := srv.ws[0], srv.s.Worker(0)
	onWorker := func(fn func()) {
		done := make(chan struct{})
		require.NoError(t, w.Submit(lanes.Continuation, func() { fn(); close(done) }))
		<-done
	}
	onWorker(func() {
		for range 300 {
			ws.putBuf(make([]byte, readBufSize))
			ws.putOut(make([]byte, 0, outBufSize))
			ws.putHeader(make(http.Header))
		}
	})
	longest := func() (n int) {
		onWorker(func() { n = max(len(ws.bufs.free), len(ws.outs.free), len(ws.heads.free)) })
		return n
	}
	require.Greater(t, longest(), keepFree)

	// The server goes on serving meanwhile, from the lists.
	for range 20 {
		resp, err := http.Get("http://" + addr + "/x")
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	}
	assert.Eventually(t, func() bool { return longest() <= keepFree }, 10*trimEvery, trimEvery/4,
		"the free lists back to keepFree")
}

// TestBurstOfANewRouteTakesFewThreads opens a burst of connections to a
// route the workers do not know yet, each taken over by its handler and
// kept, as WebSockets are. The first requests start alone, each on a
// thread of its own, until one has shown the route to wait without
// holding its thread (its Hijack); the rest of the burst, queued by then,
// must start on the workers' threads, not keep a thread each for the
// life of their connections.
func TestBurstOfANewRouteTakesFewThreads(t *testing.T) {
	srv, addr := serveHTTP(t, http.HandlerFunc(takeOver), Config{})
	const n = 400
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			<-start // every connection open: the heads come together
			_, _ = fmt.Fprintf(c, "GET /ws HTTP/1.1\r\nHost: x\r\n\r\n")
			line, err := bufio.NewReader(c).ReadString('\n')
			assert.NoError(t, err)
			assert.Contains(t, line, "101")
		}()
	}
	for {
		mu.Lock()
		k := len(conns)
		mu.Unlock()
		if k == n || t.Failed() {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(start)
	wg.Wait()
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	snap := srv.s.Snapshot()
	t.Logf("%d connections taken over: %d spare threads (peak %d)", len(conns), snap.Spares, snap.SparesPeak)
	assert.LessOrEqual(t, snap.Spares, n/10, "a thread for a few of the burst, not for each")
}
