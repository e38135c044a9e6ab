package await

import (
	"context"
	"sync/atomic"

	"github.com/sluice-go/sluice/sched"
)

// outcome tells how run ended.
type outcome uint8

const (
	ran       outcome = iota // op ran to the end; its results are returned
	skipped                  // the scheduler cancelled the caller before op started; it never will
	abandoned                // the scheduler cancelled the caller while op ran; late gets its results
)

// States of one run, moved by compare-and-swap between the caller and the
// goroutine that runs op, so that exactly one of them owns op's results.
const (
	opPending uint32 = iota
	opRunning
	opFinished
	opGivenUp
)

// run calls op through sched.Await, so that a coroutine releases its worker
// while op runs. sched.Await drops op's results when the scheduler cancels
// the caller; run keeps them where it can and says what happened:
//
//   - ran: op finished (possibly after the cancellation); its results are
//     returned as they are.
//   - skipped: op did not start and never will.
//   - abandoned: op is still running; when it returns, late (if not nil) is
//     called on op's goroutine with its results (zero ones if op panicked),
//     so that it can release them. An op that panicked after the
//     cancellation, whose panic sched.Await has dropped, is reported the same
//     way, late being called before run returns.
//
// A panic in op is raised again in the caller, as sched.Await does.
func run[T any](ctx context.Context, op func(context.Context) (T, error), late func(T, error)) (T, error, outcome) {
	if !sched.InCoroutine(ctx) {
		v, err := op(ctx) // sched.Await would run it in place
		return v, err, ran
	}
	var (
		state    atomic.Uint32
		v        T
		err      error
		returned bool // op returned rather than panicked
	)
	// The closure returns no error of its own: an error from Await is
	// Await's, never op's.
	_, aerr := sched.Await(ctx, func(ctx context.Context) (struct{}, error) {
		if !state.CompareAndSwap(opPending, opRunning) {
			return struct{}{}, nil // given up before it started
		}
		defer func() {
			if !state.CompareAndSwap(opRunning, opFinished) && late != nil {
				late(v, err)
			}
		}()
		v, err = op(ctx)
		returned = true
		return struct{}{}, nil
	})
	if aerr == nil {
		return v, err, ran
	}
	var zero T
	switch {
	case state.CompareAndSwap(opPending, opGivenUp):
		return zero, aerr, skipped
	case state.CompareAndSwap(opRunning, opGivenUp):
		return zero, aerr, abandoned
	case returned: // opFinished: the results are ours after all
		return v, err, ran
	default: // op panicked and Await dropped the panic
		if late != nil {
			late(zero, nil)
		}
		return zero, aerr, abandoned
	}
}
