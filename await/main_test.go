package await

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/sched"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor bounds every wait of the tests; it is only there so that a broken
// build fails rather than hangs, and is never expected to be reached.
const waitFor = 10 * time.Second

const tick = time.Millisecond

// goCoroutines starts n coroutines running fn(ctx, i) and returns a
// function that waits for them all to return.
func goCoroutines(t *testing.T, s *sched.Scheduler, n int, fn func(ctx context.Context, i int)) (wait func()) {
	t.Helper()
	return goCoroutinesCtx(t, s, context.Background(), n, fn)
}

// goCoroutinesCtx is goCoroutines with coroutine contexts derived from
// parent.
func goCoroutinesCtx(t *testing.T, s *sched.Scheduler, parent context.Context, n int, fn func(ctx context.Context, i int)) (wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		require.NoError(t, s.Go(parent, lanes.Upstream, func(ctx context.Context) {
			defer wg.Done()
			fn(ctx, i)
		}))
	}
	return func() {
		t.Helper()
		schedtest.Recv(t, waitDone(&wg), "coroutines to return")
	}
}

// inCoroutine runs fn as one coroutine and waits for it. fn must not call
// t.FailNow (require); assert is fine.
func inCoroutine(t *testing.T, s *sched.Scheduler, fn func(ctx context.Context)) {
	t.Helper()
	goCoroutines(t, s, 1, func(ctx context.Context, _ int) {
		if !sched.InCoroutine(ctx) {
			t.Error("not in a coroutine")
		}
		fn(ctx)
	})()
}

func waitDone(wg *sync.WaitGroup) <-chan struct{} {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

// gate holds the calls that pass it until it is opened, and counts them.
type gate struct {
	target  int32 // reached closes when this many are in at once
	in, max atomic.Int32

	reached     chan struct{}
	reachedOnce sync.Once
	open        chan struct{}
	openOnce    sync.Once
}

func newGate(target int) *gate {
	return &gate{target: int32(target), reached: make(chan struct{}), open: make(chan struct{})}
}

// pass waits for the gate to open, or for ctx to end (then returning its
// error); a nil gate lets everything through.
func (g *gate) pass(ctx context.Context) error {
	if g == nil {
		return nil
	}
	n := g.in.Add(1)
	defer g.in.Add(-1)
	for m := g.max.Load(); n > m && !g.max.CompareAndSwap(m, n); m = g.max.Load() {
	}
	if n >= g.target {
		g.reachedOnce.Do(func() { close(g.reached) })
	}
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Open lets every call through, now and later; it may be called again.
func (g *gate) Open() { g.openOnce.Do(func() { close(g.open) }) }
