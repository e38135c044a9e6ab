package server

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/lanes"
)

func TestFreeListTrimsWhatNoGetTook(t *testing.T) {
	var l freeList[int]
	for i := range 100 {
		long := l.put(i)
		assert.Equal(t, i+1 > keepFree, long, "put %d", i)
	}
	assert.True(t, l.trim(), "a first trim drops nothing: the list was never below 0 since the start")
	assert.Len(t, l.free, 100)

	// Ten taken: 90 stayed free the whole time, of which all but keepFree
	// go, the bottom of the stack first.
	for range 10 {
		_, ok := l.get()
		require.True(t, ok)
	}
	assert.False(t, l.trim())
	require.Len(t, l.free, keepFree)
	assert.Equal(t, 90-keepFree, l.free[0], "the entries no get reached went")
	assert.Equal(t, 89, l.free[keepFree-1], "the last put stays on top")

	// Emptied and filled again between two trims: nothing stayed free.
	for range keepFree {
		_, ok := l.get()
		require.True(t, ok)
	}
	_, ok := l.get()
	assert.False(t, ok, "empty")
	for i := range 200 {
		l.put(i)
	}
	assert.True(t, l.trim(), "every entry was taken or new since the last trim: all kept")
	assert.Len(t, l.free, 200)
	assert.False(t, l.trim(), "the next trim drops what stayed free")
	assert.Len(t, l.free, keepFree)

	// The list holds no reference past its length.
	for _, x := range l.free[len(l.free):cap(l.free)] {
		assert.Zero(t, x)
	}
	for range maxFreeBufs + 10 {
		l.put(1)
	}
	assert.Len(t, l.free, maxFreeBufs, "bounded")
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
