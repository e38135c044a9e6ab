package server

import (
	"time"

	"github.com/sluice-go/sluice/lanes"
)

// Bounds of a worker's free lists (freeList).
const (
	// maxFreeBufs bounds what a free list keeps: per worker and kind.
	maxFreeBufs = 1024
	// keepFree is what a free list keeps however long it goes unused: the
	// buffers of a quiet server's few requests.
	keepFree = 64
	// trimEvery is how often a free list longer than keepFree lets go of
	// what no request took since the last time.
	trimEvery = time.Second
)

// freeList is one of a worker's lists of free buffers of one kind, for
// reuse without allocating: a stack, the last put the first got. It keeps
// what the worker's requests take back and forth, and lets go of the rest
// over time (trim): a burst of connections fills it to maxFreeBufs, and a
// list that kept them would hold that memory for the life of the server,
// long after the burst (a thousand WebSockets opened at once left 4 MiB
// of read buffers on one worker). It is the worker's: touched only there.
type freeList[T any] struct {
	free []T
	low  int // the fewest entries free since the last trim
}

// get takes an entry; false when none is free.
func (l *freeList[T]) get() (T, bool) {
	var zero T
	n := len(l.free)
	if n == 0 {
		return zero, false
	}
	x := l.free[n-1]
	l.free[n-1] = zero // the list no longer holds it
	l.free = l.free[:n-1]
	l.low = min(l.low, n-1)
	return x, true
}

// put keeps x for a later get, unless the list is full. It reports
// whether the list is longer than keepFree, and so wants trimming.
func (l *freeList[T]) put(x T) (long bool) {
	if len(l.free) < maxFreeBufs {
		l.free = append(l.free, x)
	}
	return len(l.free) > keepFree
}

// trim lets go of the entries that stayed free since the last trim, all
// but keepFree of the list, and reports whether the list is still longer
// than keepFree.
func (l *freeList[T]) trim() (long bool) {
	n := len(l.free)
	if drop := min(l.low, n-keepFree); drop > 0 {
		// The bottom of the stack is what no get reached.
		copy(l.free, l.free[drop:])
		clear(l.free[n-drop:]) // the list no longer holds them
		l.free = l.free[:n-drop]
	}
	l.low = len(l.free)
	return len(l.free) > keepFree
}

// armTrim makes sure the worker trims its free lists within trimEvery,
// once one of them is longer than keepFree. Local: call it on ws's worker
// (a workerState made without one, in a test, never trims).
func (ws *workerState) armTrim() {
	switch {
	case ws.w == nil:
	case ws.trimmer == nil:
		ws.trimmer = ws.w.AfterFunc(trimEvery, lanes.Continuation, ws.trim)
	case !ws.trimmer.Pending():
		ws.trimmer.Reset(trimEvery)
	}
}

// trim trims the worker's free lists, and comes back while one of them is
// still longer than keepFree.
func (ws *workerState) trim() {
	a, b, c := ws.bufs.trim(), ws.outs.trim(), ws.heads.trim()
	if a || b || c {
		ws.trimmer.Reset(trimEvery)
	}
}
