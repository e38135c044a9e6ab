package httpgate

import (
	"net/http"
	"sync"

	"github.com/sluice-go/sluice/queue"
)

const waitStarted = 255

// waiter is a request waiting in the queue: an Entry and a channel its
// callbacks signal, the callbacks bound once, so that a pooled waiter costs
// no allocation. (queue.Wait does the same, but pumps with the queue's
// Admit after its push; the middleware pumps with its own rule, pumpOne.)
type waiter struct {
	e      queue.Entry
	ch     chan uint8
	start  func()
	reject func(queue.Reason)
}

var waiters = sync.Pool{New: func() any {
	w := &waiter{ch: make(chan uint8, 1)}
	w.start = func() { w.ch <- waitStarted }
	w.reject = func(r queue.Reason) { w.ch <- uint8(r) }
	return w
}}

// wait queues r until the queue starts it (ok: the caller owns the gate's
// admission) or rejects it, or r's context ends (reason "queue-canceled").
// If the context ends after the entry left the queue, wait returns the
// entry's outcome, so that an admission is never lost.
func (a *Admission) wait(r *http.Request) (reason string, ok bool) {
	ctx := r.Context()
	if ctx.Err() != nil {
		return ReasonQueueCanceled, false
	}
	c := a.classify(r)
	w := waiters.Get().(*waiter)
	a.q.Push(&w.e, c, w.start, w.reject)
	// The gate may have opened between the refusal and the push, and this
	// goroutine is about to park: its place goes to the head.
	a.pumpOne()
	var out uint8
	select {
	case out = <-w.ch:
	case <-ctx.Done():
		if a.q.Remove(&w.e) {
			waiters.Put(w)
			return ReasonQueueCanceled, false
		}
		out = <-w.ch
	}
	waiters.Put(w)
	if out == waitStarted {
		return "", true
	}
	return queueReason(queue.Reason(out)), false
}
