package await

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/stretchr/testify/assert"
)

// 100 coroutines on one worker all sleep at once: each Sleep has released
// the worker for the next one.
func TestSleepReleasesWorker(t *testing.T) {
	const n = 100
	s := schedtest.Start(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var asleep atomic.Int32
	allAsleep := make(chan struct{})
	errs := make(chan error, n)
	wait := goCoroutinesCtx(t, s, ctx, n, func(ctx context.Context, _ int) {
		if asleep.Add(1) == n {
			close(allAsleep)
		}
		errs <- Sleep(ctx, time.Hour)
	})
	schedtest.Recv(t, allAsleep, "all coroutines asleep")
	schedtest.WorkersIdle(t, s, 0)
	cancel()
	wait()
	for range n {
		assert.ErrorIs(t, <-errs, context.Canceled)
	}
}

// Short sleeps on one worker overlap, and end by themselves.
func TestSleepOverlaps(t *testing.T) {
	const n = 100
	s := schedtest.Start(t, 1)
	var asleep, most atomic.Int32
	start := time.Now()
	wait := goCoroutines(t, s, n, func(ctx context.Context, _ int) {
		// Only this coroutine's worker updates most, so no CAS is needed.
		if k := asleep.Add(1); k > most.Load() {
			most.Store(k)
		}
		assert.NoError(t, Sleep(ctx, 10*time.Millisecond))
		asleep.Add(-1)
	})
	wait()
	// Sleeping in turn would take n*10ms = 1s and never overlap; one pause
	// of 10ms between two starts is not enough to prevent all overlaps.
	assert.Greater(t, most.Load(), int32(1), "no two sleeps overlapped")
	t.Logf("%d sleeps of 10ms on one worker took %v, up to %d at once", n, time.Since(start), most.Load())
}

func TestSleepOutsideCoroutine(t *testing.T) {
	assert.NoError(t, Sleep(context.Background(), time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, Sleep(ctx, time.Hour), context.Canceled)
}
