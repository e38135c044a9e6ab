package queue

import (
	"context"
	"errors"
	"sync"
)

// ErrRejected matches, with [errors.Is], every error that [Queue.Wait]
// returns for a rejection.
var ErrRejected = errors.New("queue: request rejected")

// RejectedError is the error [Queue.Wait] returns when its entry is
// rejected; Reason says why. Use [errors.As] to read it. Wait returns one
// shared value per reason: do not modify it.
type RejectedError struct {
	Reason Reason
}

// Error returns "queue: request rejected: " and the reason.
func (e *RejectedError) Error() string { return "queue: request rejected: " + e.Reason.String() }

// Is reports whether target is [ErrRejected].
func (e *RejectedError) Is(target error) bool { return target == ErrRejected }

var rejectedErrors = func() (errs [numReasons]*RejectedError) {
	for i := range errs {
		errs[i] = &RejectedError{Reason: Reason(i)}
	}
	return errs
}()

const waitStarted = 255

// waiter is what Wait pushes: an Entry and a channel its callbacks signal,
// with the callbacks bound once, so that a pooled waiter costs no allocation.
type waiter struct {
	e      Entry
	ch     chan uint8
	start  func()
	reject func(Reason)
}

var waiters = sync.Pool{New: func() any {
	w := &waiter{ch: make(chan uint8, 1)}
	w.start = func() { w.ch <- waitStarted }
	w.reject = func(r Reason) { w.ch <- uint8(r) }
	return w
}}

// Wait is the blocking form of [Queue.Push] for goroutine-per-request
// servers (net/http). It pushes an entry of class c and blocks until:
//
//   - the entry is started by a Pump: Wait returns nil, and the caller owns
//     whatever the gate reserved when it admitted the entry;
//   - the entry is rejected: Wait returns a [*RejectedError] with the
//     reason (it matches [ErrRejected]);
//   - ctx ends first: Wait removes the entry and returns ctx.Err(). If the
//     entry had already left the queue, Wait returns its outcome instead
//     (nil when it was started), so that an admission is never lost.
//
// Wait returns ctx.Err() without pushing if ctx has already ended. With
// [Config.Admit] set, Wait calls Pump(Admit) right after pushing. Deadlines
// are enforced by whoever calls [Queue.Expire] (see [Config.Arm]), not by
// Wait. Wait allocates nothing in steady state: its entries are pooled.
func (q *Queue) Wait(ctx context.Context, c Class) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w := waiters.Get().(*waiter)
	q.Push(&w.e, c, w.start, w.reject)
	if q.admit != nil {
		q.Pump(q.admit)
	}
	var r uint8
	select {
	case r = <-w.ch:
	case <-ctx.Done():
		if q.Remove(&w.e) {
			waiters.Put(w)
			return ctx.Err()
		}
		r = <-w.ch
	}
	waiters.Put(w)
	if r == waitStarted {
		return nil
	}
	return rejectedErrors[r]
}
