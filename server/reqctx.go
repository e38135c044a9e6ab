package server

import (
	"context"
	"sync"
	"time"
)

// reqCtx is a request's context: its parent's values and deadline, ended by
// end (the client went away, a body read passed its deadline, the handler
// returned). It lives in the request's reqState, so that a request
// allocates nothing for it; its Done channel is made when first asked for.
// Its parent, the coroutine's context over the connection's, never ends.
//
// It implements the AfterFunc method that package context looks for, so
// that contexts derived from it (context.WithTimeout, context.AfterFunc)
// are ended by it without a goroutine each.
type reqCtx struct {
	parent context.Context

	mu     sync.Mutex
	done   chan struct{} // made by Done or end, closed by end
	err    error
	after  []afterFunc // what end calls, in the order registered
	nextID uint64
}

// afterFunc is a function that end calls, and the id its stop function
// removes it by.
type afterFunc struct {
	id uint64
	f  func()
}

func (x *reqCtx) Deadline() (time.Time, bool) { return x.parent.Deadline() }

func (x *reqCtx) Value(key any) any { return x.parent.Value(key) }

func (x *reqCtx) Done() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.done == nil {
		x.done = make(chan struct{})
		if x.err != nil {
			close(x.done)
		}
	}
	return x.done
}

func (x *reqCtx) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.err
}

func (x *reqCtx) String() string { return "sluice.requestContext" }

// end ends the context with context.Canceled, once; later calls do
// nothing. It calls the functions AfterFunc registered, on this goroutine,
// after letting go of the lock (they call Err).
func (x *reqCtx) end() {
	x.mu.Lock()
	if x.err != nil {
		x.mu.Unlock()
		return
	}
	x.err = context.Canceled
	if x.done != nil {
		close(x.done)
	}
	after := x.after
	x.after = nil
	x.mu.Unlock()
	for _, a := range after {
		a.f()
	}
}

// AfterFunc arranges for f to be called once the context ends, and returns
// a function that cancels that, reporting whether it did. Package context
// calls it to end the contexts derived from this one; as there, f is
// called at once, on its own goroutine, if the context has already ended.
func (x *reqCtx) AfterFunc(f func()) (stop func() bool) {
	x.mu.Lock()
	if x.err != nil {
		x.mu.Unlock()
		// The caller may hold a lock that f takes (package context
		// holds the child's): f must not run on this goroutine.
		go f()
		return func() bool { return false }
	}
	x.nextID++
	id := x.nextID
	x.after = append(x.after, afterFunc{id: id, f: f})
	x.mu.Unlock()
	return func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		for i, a := range x.after {
			if a.id == id {
				x.after = append(x.after[:i], x.after[i+1:]...)
				return true
			}
		}
		return false
	}
}

var _ context.Context = (*reqCtx)(nil)
