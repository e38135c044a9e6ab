package gate

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeSource is a BusySource with a settable count and an idle hook.
type fakeSource struct {
	busy    atomic.Int64
	workers int
	mu      sync.Mutex
	hooks   []func()
}

func newFakeSource(workers, busy int) *fakeSource {
	f := &fakeSource{workers: workers}
	f.busy.Store(int64(busy))
	return f
}

func (f *fakeSource) Busy() int       { return int(f.busy.Load()) }
func (f *fakeSource) NumWorkers() int { return f.workers }
func (f *fakeSource) set(busy int)    { f.busy.Store(int64(busy)) }

func (f *fakeSource) NotifyIdle(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hooks = append(f.hooks, fn)
}

// goIdle makes one worker idle and runs the hooks, as the executor does.
func (f *fakeSource) goIdle() {
	f.busy.Add(-1)
	f.mu.Lock()
	hooks := append([]func(){}, f.hooks...)
	f.mu.Unlock()
	for _, h := range hooks {
		h()
	}
}

// plainSource is a BusySource without an idle hook.
type plainSource struct{ busy, workers int }

func (p plainSource) Busy() int       { return p.busy }
func (p plainSource) NumWorkers() int { return p.workers }

// fakeGate is a scripted Gate that records what is done to it in a shared
// log.
type fakeGate struct {
	name     string
	open     bool
	log      *[]string
	acquired int
	released []time.Duration
	wake     wakers
}

func (g *fakeGate) Acquire() bool {
	*g.log = append(*g.log, "acquire "+g.name)
	if g.open {
		g.acquired++
	}
	return g.open
}

func (g *fakeGate) Release(l time.Duration) {
	*g.log = append(*g.log, "release "+g.name)
	g.acquired--
	g.released = append(g.released, l)
}

func (g *fakeGate) Name() string { return g.name }

// counter returns a callback that counts its calls, and the count.
func counter() (func(), *atomic.Int64) {
	var n atomic.Int64
	return func() { n.Add(1) }, &n
}

// Compile-time checks of the interfaces.
var (
	_ Gate         = (*Busy)(nil)
	_ Waker        = (*Busy)(nil)
	_ IdleAcquirer = (*Busy)(nil)
	_ Gate         = (*Concurrency)(nil)
	_ Waker        = (*Concurrency)(nil)
	_ Gate         = (*Adaptive)(nil)
	_ Waker        = (*Adaptive)(nil)
	_ Gate         = (*Memory)(nil)
	_ Waker        = (*Memory)(nil)
	_ Gate         = (*CPU)(nil)
	_ Waker        = (*CPU)(nil)
	_ Gate         = (*Chain)(nil)
	_ Waker        = (*Chain)(nil)
	_ IdleAcquirer = (*Chain)(nil)
)

func TestReserves(t *testing.T) {
	src := newFakeSource(2, 0)
	conc := NewConcurrency(4)
	busy := NewBusy(src, BusyOptions{})
	assert.True(t, Reserves(conc))
	assert.True(t, Reserves(NewAdaptive(AdaptiveOptions{})))
	assert.False(t, Reserves(busy))
	assert.False(t, Reserves(&fakeGate{name: "custom"}), "a gate without Reserver reads a measurement")
	assert.True(t, Reserves(All(conc, NewConcurrency(2))))
	assert.False(t, Reserves(All(conc, busy)), "one reading makes the chain's answer a reading")
}
