//go:build linux

package server

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReqCtxEnds(t *testing.T) {
	type key struct{}
	x := &reqCtx{parent: context.WithValue(context.Background(), key{}, "v")}
	assert.Equal(t, "v", x.Value(key{}))
	_, ok := x.Deadline()
	assert.False(t, ok)
	assert.NoError(t, x.Err())
	done := x.Done()
	assert.True(t, done == x.Done(), "one channel")
	select {
	case <-done:
		t.Fatal("done before end")
	default:
	}
	x.end()
	x.end() // a second end does nothing
	<-done
	assert.ErrorIs(t, x.Err(), context.Canceled)
	assert.ErrorIs(t, context.Cause(x), context.Canceled)

	// Done asked for only after the end: closed.
	y := &reqCtx{parent: context.Background()}
	y.end()
	<-y.Done()
}

func TestReqCtxEndsWhatDerivesFromIt(t *testing.T) {
	x := &reqCtx{parent: context.Background()}
	child, cancel := context.WithTimeout(x, time.Hour)
	defer cancel()
	grandchild, cancel2 := context.WithCancel(child)
	defer cancel2()
	ran := make(chan struct{})
	context.AfterFunc(x, func() { close(ran) })
	stopped := false
	stop := context.AfterFunc(x, func() { stopped = true })
	assert.True(t, stop(), "stopped before the end")
	assert.False(t, stop(), "a second stop reports false")
	assert.Len(t, x.after, 2, "the child and the first AfterFunc, without a goroutine each")

	x.end()
	<-child.Done()
	<-grandchild.Done()
	<-ran
	assert.ErrorIs(t, child.Err(), context.Canceled)
	assert.False(t, stopped)

	// Derived after the end: ended at once.
	late, cancel3 := context.WithCancel(x)
	defer cancel3()
	<-late.Done()
	lateRan := make(chan struct{})
	stop = context.AfterFunc(x, func() { close(lateRan) })
	<-lateRan
	assert.False(t, stop())
}

func TestReqCtxCancelledChildLeaves(t *testing.T) {
	x := &reqCtx{parent: context.Background()}
	for range 100 {
		_, cancel := context.WithCancel(x)
		cancel()
	}
	require.Empty(t, x.after, "a child cancelled on its own no longer waits for the end")
}

// A context derived from one that has already ended (a handler's goroutine
// that outlives the request) is ended at once.
func TestReqCtxDerivedAfterTheEnd(t *testing.T) {
	x := &reqCtx{parent: context.Background()}
	x.end()
	child, cancel := context.WithCancel(x)
	defer cancel()
	select {
	case <-child.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a context derived after the end did not end")
	}
	assert.ErrorIs(t, child.Err(), context.Canceled)
	ran := make(chan struct{})
	stop := context.AfterFunc(x, func() { close(ran) })
	<-ran
	assert.False(t, stop(), "nothing left to stop")
}
