package gate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func fakes(log *[]string, names ...string) []*fakeGate {
	gs := make([]*fakeGate, len(names))
	for i, n := range names {
		gs[i] = &fakeGate{name: n, open: true, log: log}
	}
	return gs
}

func TestChainOrderAndRelease(t *testing.T) {
	var log []string
	g := fakes(&log, "a", "b", "c")
	c := All(g[0], g[1], g[2])
	assert.Equal(t, "a+b+c", c.Name())
	refused, ok := c.Admit()
	require.True(t, ok)
	assert.Nil(t, refused)
	assert.Equal(t, []string{"acquire a", "acquire b", "acquire c"}, log)

	log = log[:0]
	c.Release(5 * time.Millisecond)
	assert.Equal(t, []string{"release c", "release b", "release a"}, log)
	for _, f := range g {
		assert.Equal(t, 0, f.acquired)
		assert.Equal(t, []time.Duration{5 * time.Millisecond}, f.released)
	}
}

// The first gate that refuses is reported; the ones before it are given back
// with Undo, the ones after it are not asked.
func TestChainFirstRefusal(t *testing.T) {
	var log []string
	g := fakes(&log, "a", "b", "c", "d")
	g[2].open = false
	g[3].open = false
	c := All(g[0], g[1], g[2], g[3])
	refused, ok := c.Admit()
	assert.False(t, ok)
	assert.Same(t, g[2], refused)
	assert.Equal(t, "c", refused.Name())
	assert.Equal(t, []string{"acquire a", "acquire b", "acquire c", "release b", "release a"}, log)
	assert.Equal(t, []time.Duration{Undo}, g[0].released)
	assert.Equal(t, []time.Duration{Undo}, g[1].released)
	assert.Equal(t, 0, g[0].acquired+g[1].acquired+g[2].acquired+g[3].acquired)
	assert.False(t, c.Acquire())
}

func TestChainFlattens(t *testing.T) {
	var log []string
	g := fakes(&log, "a", "b", "c")
	g[1].open = false
	c := All(All(g[0], g[1]), nil, g[2])
	assert.Len(t, c.Gates(), 3)
	assert.Equal(t, "a+b+c", c.Name())
	refused, ok := c.Admit()
	assert.False(t, ok)
	assert.Same(t, g[1], refused, "the member that decided, not the inner chain")
	empty := All()
	assert.True(t, empty.Acquire(), "no gate, no refusal")
	empty.Release(0)
}

// Real gates: an undone Concurrency acquisition leaves no count and wakes
// nobody, an undone Adaptive one teaches nothing.
func TestChainUndoesRealGates(t *testing.T) {
	src := newFakeSource(2, 2)
	conc := NewConcurrency(1)
	ad := NewAdaptive(AdaptiveOptions{Window: 1})
	busy := NewBusy(src, BusyOptions{})
	c := All(conc, ad, busy)
	fn, woke := counter()
	c.OnOpen(fn)

	refused, ok := c.Admit()
	assert.False(t, ok)
	assert.Equal(t, "busy", refused.Name())
	assert.Equal(t, 0, conc.InFlight())
	assert.Equal(t, 0, ad.InFlight())
	assert.Equal(t, int64(0), ad.Stats().Windows)
	assert.Equal(t, int64(0), woke.Load())

	src.set(1)
	_, ok = c.Admit()
	require.True(t, ok)
	refused, ok = c.Admit()
	assert.False(t, ok)
	assert.Same(t, conc, refused)
	c.Release(time.Millisecond)
	assert.Equal(t, 0, conc.InFlight())
	assert.Equal(t, int64(1), ad.Stats().Windows)
	assert.Equal(t, int64(2), woke.Load(), "both limits opened")
}

// AdmitIdle asks the busy gate for the caller that is not counted.
func TestChainAdmitIdle(t *testing.T) {
	src := newFakeSource(2, 1)
	conc := NewConcurrency(5)
	c := All(conc, NewBusy(src, BusyOptions{}))
	_, ok := c.Admit()
	require.True(t, ok, "on a worker: the deciding worker is the one busy")
	c.Release(time.Millisecond)
	refused, ok := c.AdmitIdle()
	assert.False(t, ok, "from an idle hook: another worker is busy")
	assert.Equal(t, "busy", refused.Name())
	assert.Equal(t, 0, conc.InFlight())
	assert.False(t, c.AcquireIdle())
	src.set(0)
	assert.True(t, c.AcquireIdle())
	c.Release(time.Millisecond)
}

// OnOpen reaches every member that can wake.
func TestChainWakerFanOut(t *testing.T) {
	var log []string
	src := newFakeSource(2, 2)
	conc := NewConcurrency(1)
	busy := NewBusy(src, BusyOptions{})
	plain := fakes(&log, "plain")[0]
	c := All(busy, plain, conc)
	fn, woke := counter()
	c.OnOpen(fn)

	src.goIdle()
	assert.Equal(t, int64(1), woke.Load(), "through the busy gate")
	require.True(t, conc.Acquire())
	conc.Release(time.Millisecond)
	assert.Equal(t, int64(2), woke.Load(), "through the concurrency gate")
	conc.SetLimit(2)
	assert.Equal(t, int64(3), woke.Load())
}
