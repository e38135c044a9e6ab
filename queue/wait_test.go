package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// armed returns a queue whose Arm hook signals on the returned channel, so
// that a test learns without polling that Wait has pushed its entry into an
// empty queue.
func armed(t *testing.T, o Config) (*Queue, *fakeClock, <-chan int64) {
	ch := make(chan int64, 16)
	o.Arm = func(d int64) {
		select {
		case ch <- d:
		default:
			t.Error("Arm channel full")
		}
	}
	q, clk := newQueue(o)
	return q, clk, ch
}

func goWait(ctx context.Context, q *Queue, c Class) <-chan error {
	done := make(chan error, 1)
	go func() { done <- q.Wait(ctx, c) }()
	return done
}

func TestWaitStarted(t *testing.T) {
	q, _, pushed := armed(t, Config{})
	done := goWait(context.Background(), q, Default)
	<-pushed
	assert.Equal(t, 1, q.Len())
	assert.Equal(t, 1, q.Pump(always))
	require.NoError(t, <-done)
	assert.Equal(t, 0, q.Len())
}

func TestWaitTimeout(t *testing.T) {
	q, clk, pushed := armed(t, Config{})
	done := goWait(context.Background(), q, Sheddable)
	deadline := <-pushed
	assert.Equal(t, 100*ms, deadline)
	clk.set(deadline - 1)
	q.Expire()
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v before the deadline", err)
	default:
	}
	clk.set(deadline)
	q.Expire()
	err := <-done
	var re *RejectedError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, Timeout, re.Reason)
	assert.ErrorIs(t, err, ErrRejected)
	assert.EqualError(t, err, "queue: request rejected: timeout")
}

func TestWaitCancelled(t *testing.T) {
	q, _, pushed := armed(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := goWait(ctx, q, Default)
	<-pushed
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	assert.Equal(t, 0, q.Len())
	assert.Equal(t, 0, q.Pump(always), "the removed entry is gone")
	st := q.Stats()
	assert.Equal(t, uint64(1), st.Removed)
	assert.Equal(t, uint64(0), st.Started)

	// A context that ended already: nothing is pushed.
	assert.ErrorIs(t, q.Wait(ctx, Default), context.Canceled)
	assert.Equal(t, uint64(1), q.Stats().Pushes)

	dctx, dcancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer dcancel()
	<-dctx.Done()
	assert.ErrorIs(t, q.Wait(dctx, Default), context.DeadlineExceeded)
}

// TestWaitCancelledAfterStart: the context ends after the entry was
// started; Wait reports the start, so the admission is not lost.
func TestWaitCancelledAfterStart(t *testing.T) {
	for range 50 {
		ctx, cancel := context.WithCancel(context.Background())
		q, _ := newQueue(Config{Admit: func(*Entry) bool { cancel(); return true }})
		require.NoError(t, q.Wait(ctx, Default))
		assert.Equal(t, uint64(1), q.Stats().Started)
		assert.Equal(t, uint64(0), q.Stats().Removed)
	}
}

func TestWaitAdmitPumpsAfterPush(t *testing.T) {
	// The gate refused before the caller pushed, then opened: with
	// Config.Admit the Wait starts at once instead of waiting its timeout.
	open := true
	q, _ := newQueue(Config{Admit: func(*Entry) bool { return open }})
	require.NoError(t, q.Wait(context.Background(), Default))
	assert.Equal(t, uint64(1), q.Stats().Started)
}

func TestWaitFullAndClosed(t *testing.T) {
	q, _ := newQueue(Config{MaxLen: 1})
	q.Push(new(Entry), Critical, func() {}, func(Reason) {})
	err := q.Wait(context.Background(), Default)
	var re *RejectedError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, Full, re.Reason)

	// A Wait evicted by a more important entry.
	q2, _, pushed := armed(t, Config{MaxLen: 1})
	done := goWait(context.Background(), q2, Sheddable)
	<-pushed
	q2.Push(new(Entry), Critical, func() {}, func(Reason) {})
	require.ErrorAs(t, <-done, &re)
	assert.Equal(t, Evicted, re.Reason)

	q.Close()
	q2.Close()
	require.ErrorAs(t, q.Wait(context.Background(), Default), &re)
	assert.Equal(t, Closed, re.Reason)
}

func TestWaitCloseWakesWaiters(t *testing.T) {
	q, _, pushed := armed(t, Config{})
	var dones []<-chan error
	for range 5 {
		dones = append(dones, goWait(context.Background(), q, Default))
	}
	<-pushed
	// Waiters that pushed before Close are rejected by it, the others by
	// their own Push: all end with Closed.
	q.Close()
	for _, d := range dones {
		var re *RejectedError
		require.ErrorAs(t, <-d, &re)
		assert.Equal(t, Closed, re.Reason)
	}
}
