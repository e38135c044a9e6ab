package gate

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluice-go/sluice/admit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// acquire asks g for a request whose own goroutine decides.
func acquire(g admit.Policy) bool { return g.Admit(&admit.Attempt{}) == nil }

// acquireSpare asks g for a waiting request started by another goroutine.
func acquireSpare(g admit.Policy) bool { return g.Admit(&admit.Attempt{Spare: true}) == nil }

// release ends an admitted request that ran for latency.
func release(g admit.Policy, latency time.Duration) {
	g.Done(&admit.Attempt{}, admit.Outcome{Latency: latency, Status: 200})
}

// undo gives back an admission that never ran.
func undo(g admit.Policy) { g.Done(&admit.Attempt{}, admit.Outcome{Canceled: true}) }

// fakeExecutor is an admit.Executor with a settable busy count and idle
// hooks that can be removed.
type fakeExecutor struct {
	busy    atomic.Int64
	workers int
	mu      sync.Mutex
	hooks   map[int]func()
	next    int
}

func newFakeExecutor(workers, busy int) *fakeExecutor {
	f := &fakeExecutor{workers: workers, hooks: map[int]func(){}}
	f.busy.Store(int64(busy))
	return f
}

func (f *fakeExecutor) Busy() int       { return int(f.busy.Load()) }
func (f *fakeExecutor) NumWorkers() int { return f.workers }
func (f *fakeExecutor) set(busy int)    { f.busy.Store(int64(busy)) }

func (f *fakeExecutor) NotifyIdle(fn func()) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.next
	f.next++
	f.hooks[id] = fn
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.hooks, id)
	}
}

func (f *fakeExecutor) numHooks() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.hooks)
}

// goIdle makes one worker idle and runs the hooks, as the executor does.
func (f *fakeExecutor) goIdle() {
	f.busy.Add(-1)
	f.mu.Lock()
	var hooks []func()
	for _, h := range f.hooks {
		hooks = append(hooks, h)
	}
	f.mu.Unlock()
	for _, h := range hooks {
		h()
	}
}

// wakes records what a gate tells the pipeline it is attached to.
type wakes struct {
	mu sync.Mutex
	ns []int
}

func (w *wakes) wake(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ns = append(w.ns, n)
}

// count returns how many wake-ups there were so far, each for any number
// of requests (n = 0).
func (w *wakes) count() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.ns {
		if n != 0 {
			panic("a refresh wakes for any number of requests")
		}
	}
	return int64(len(w.ns))
}

// take returns the wake-ups so far and forgets them.
func (w *wakes) take() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	ns := w.ns
	w.ns = nil
	return ns
}

// attach attaches g as a pipeline on ex would (ex may be nil) and returns
// the wake-ups it will record; the gate is detached when the test ends.
func attach(t testing.TB, g admit.Policy, ex admit.Executor) *wakes {
	t.Helper()
	w := &wakes{}
	a, ok := g.(admit.Attacher)
	require.True(t, ok, "%T attaches", g)
	detach, err := a.Attach(admit.Env{Executor: ex, Wake: w.wake, Now: func() int64 { return 0 }})
	require.NoError(t, err)
	t.Cleanup(detach)
	return w
}

// Compile-time checks of the interfaces.
var (
	_ admit.Policy   = (*Busy)(nil)
	_ admit.Attacher = (*Busy)(nil)
	_ admit.Policy   = (*Concurrency)(nil)
	_ admit.Attacher = (*Concurrency)(nil)
	_ admit.Policy   = (*Adaptive)(nil)
	_ admit.Attacher = (*Adaptive)(nil)
	_ admit.Policy   = (*Memory)(nil)
	_ admit.Attacher = (*Memory)(nil)
	_ admit.Policy   = (*CPU)(nil)
	_ admit.Attacher = (*CPU)(nil)
	_ admit.Policy   = (*GoSched)(nil)
)

// Detaching removes a pipeline's wake-up, and only its own.
func TestWakersDetach(t *testing.T) {
	c := newConcurrency(t, 1)
	var a, b wakes
	da, err := c.Attach(admit.Env{Wake: a.wake})
	require.NoError(t, err)
	db, err := c.Attach(admit.Env{Wake: b.wake})
	require.NoError(t, err)
	require.NoError(t, c.SetLimit(2))
	assert.Equal(t, []int{1}, a.take())
	assert.Equal(t, []int{1}, b.take())
	da()
	da() // twice is harmless
	require.NoError(t, c.SetLimit(4))
	assert.Empty(t, a.take(), "detached")
	assert.Equal(t, []int{2}, b.take())
	db()
	require.NoError(t, c.SetLimit(8))
	assert.Empty(t, b.take(), "detached too")
}
