package gate

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
)

// scriptedSched is a GoSched Reader with settable counts.
type scriptedSched struct {
	running, runnable atomic.Int64
	reads             atomic.Int64
}

func (s *scriptedSched) set(running, runnable int) {
	s.running.Store(int64(running))
	s.runnable.Store(int64(runnable))
}

func (s *scriptedSched) read() (int, int) {
	s.reads.Add(1)
	return int(s.running.Load()), int(s.runnable.Load())
}

func TestGoSchedMetricsExist(t *testing.T) {
	names := map[string]metrics.ValueKind{}
	for _, d := range metrics.All() {
		names[d.Name] = d.Kind
	}
	for _, n := range []string{metricRunning, metricRunnable} {
		k, ok := names[n]
		require.True(t, ok, "runtime/metrics has no %s", n)
		assert.Equal(t, metrics.KindUint64, k, n)
	}
}

func TestGoSchedLimits(t *testing.T) {
	cases := []struct {
		procs    int
		fraction float64
		limit    int
	}{
		{2, 0, 1},
		{2, 0.5, 1},
		{2, 1, 2},
		{16, 0, 8},
		{16, 1, 16},
		{16, 1.5, 24}, // a runnable backlog of 8 is allowed
		{16, 0.01, 1}, // at least 1
		{1, 0, 1},
		{3, 0, 1},
		{100, 0.29, 29},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d procs at %v", c.procs, c.fraction), func(t *testing.T) {
			s := &scriptedSched{}
			g := newGoSched(t, GoSchedConfig{Fraction: c.fraction, Procs: c.procs, Reader: s.read, MaxAge: Manual})
			require.Equal(t, c.limit, g.Limit())
			for load := 1; load <= c.limit+2; load++ {
				for runnable := 0; runnable <= 1 && runnable < load; runnable++ {
					s.set(load-runnable, runnable)
					g.Refresh()
					assert.Equal(t, load <= c.limit, acquire(g), "Acquire at load %d", load)
					// A spare caller is admitted iff one more fits, and counted.
					ok := acquireSpare(g)
					assert.Equal(t, load+1 <= c.limit, ok, "spare at load %d", load)
				}
			}
		})
	}
}

// On 2 Ps at 0.5 the reader counts itself: a request is admitted while it
// is the only goroutine running or runnable.
func TestGoSchedTwoProcsHalf(t *testing.T) {
	s := &scriptedSched{}
	s.set(1, 0) // the reader alone
	g := newGoSched(t, GoSchedConfig{Procs: 2, Reader: s.read, MaxAge: Manual})
	assert.True(t, acquire(g))
	release(g, time.Second) // a no-op
	assert.True(t, acquire(g))

	s.set(2, 0) // another goroutine on the other P
	g.Refresh()
	assert.False(t, acquire(g))

	s.set(1, 1) // one waiting for a P: overload
	g.Refresh()
	assert.False(t, acquire(g))

	s.set(1, 0)
	g.Refresh()
	assert.True(t, acquire(g))
	// Starting a parked goroutine makes two: over the limit.
	assert.False(t, acquireSpare(g))
	assert.Equal(t, "gosched", g.Name())
}

// Spare admissions count the goroutines they start until the next reading, so
// a queue pumping on a cached reading starts no more than fit.
func TestGoSchedStartedAccounting(t *testing.T) {
	s := &scriptedSched{}
	s.set(1, 0)
	g := newGoSched(t, GoSchedConfig{Procs: 8, Reader: s.read, MaxAge: Manual}) // limit 4
	n := 0
	for acquireSpare(g) {
		n++
		require.Less(t, n, 100)
	}
	assert.Equal(t, 3, n, "the reader and 3 started goroutines fill a limit of 4")
	assert.Equal(t, 3, g.Stats().Started)
	assert.True(t, acquire(g), "a counted caller still fits: 1 + 3 <= 4")
	s.set(2, 1) // the started ones show up, two have already blocked
	g.Refresh()
	st := g.Stats()
	assert.Equal(t, 0, st.Started, "a reading forgets what it includes")
	assert.Equal(t, 3, st.Running+st.Runnable)
	assert.True(t, acquireSpare(g))
	assert.False(t, acquireSpare(g))
}

// A reading older than MaxAge is replaced by the next decision; a fresher
// one is reused.
func TestGoSchedMaxAge(t *testing.T) {
	s := &scriptedSched{}
	var now atomic.Int64
	s.set(1, 0)
	g := newGoSched(t, GoSchedConfig{
		Procs: 2, Reader: s.read, MaxAge: 50 * time.Microsecond,
		Clock: now.Load,
	})
	require.EqualValues(t, 1, s.reads.Load())
	assert.True(t, acquire(g))

	s.set(2, 3)
	now.Add(int64(50 * time.Microsecond))
	assert.True(t, acquire(g), "a reading exactly MaxAge old is still used")
	assert.EqualValues(t, 1, s.reads.Load())

	now.Add(1)
	assert.False(t, acquire(g), "an older one is replaced")
	assert.EqualValues(t, 2, s.reads.Load())
	assert.False(t, acquire(g))
	assert.EqualValues(t, 2, s.reads.Load())
	st := g.Stats()
	assert.Equal(t, GoSchedStats{Running: 2, Runnable: 3, Procs: 2, Limit: 1, Readings: 2}, st)

	s.set(1, 0)
	now.Add(int64(time.Millisecond))
	assert.True(t, acquire(g), "the first decision after a pause reads afresh")
}

// Many deciders on a stale reading: one reads, the others use the old one.
func TestGoSchedOneReaderAtATime(t *testing.T) {
	var inside, most atomic.Int64
	var now atomic.Int64
	var mu sync.Mutex
	reader := func() (int, int) {
		n := inside.Add(1)
		mu.Lock()
		most.Store(max(most.Load(), n))
		mu.Unlock()
		time.Sleep(time.Microsecond)
		inside.Add(-1)
		return 1, 0
	}
	g := newGoSched(t, GoSchedConfig{Procs: 4, Reader: reader, MaxAge: 1, Clock: now.Load})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				now.Add(10)
				assert.True(t, acquire(g))
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, 1, most.Load())
}

func TestGoSchedSetFraction(t *testing.T) {
	s := &scriptedSched{}
	s.set(3, 0)
	g := newGoSched(t, GoSchedConfig{Procs: 4, Reader: s.read, MaxAge: Manual})
	assert.False(t, acquire(g))
	require.NoError(t, g.SetFraction(1))
	assert.Equal(t, 4, g.Limit())
	assert.True(t, acquire(g))
}

// GoSched has nothing to wake a pipeline with, and needs nothing of it.
func TestGoSchedIsNotAnAttacher(t *testing.T) {
	var g admit.Policy = newGoSched(t, GoSchedConfig{MaxAge: Manual})
	_, attaches := g.(admit.Attacher)
	assert.False(t, attaches)
}

// The real runtime: the reader counts itself, spinning goroutines close the
// gate, and it opens again once they stop.
func TestGoSchedRealRuntime(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	g := newGoSched(t, GoSchedConfig{MaxAge: Manual})
	st := g.Refresh()
	assert.Equal(t, procs, st.Procs)
	assert.GreaterOrEqual(t, st.Running, 1, "the reader is running")
	assert.LessOrEqual(t, st.Running, procs)

	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 2 * procs {
		wg.Go(func() {
			for !stop.Load() {
			}
		})
	}
	// Spinners run or wait for a P: every reading sees at least procs of
	// them besides the reader, over any limit up to GOMAXPROCS.
	for range 20 {
		st = g.Refresh()
		assert.Greater(t, st.Running+st.Runnable, procs, "%+v", st)
		assert.False(t, acquire(g))
	}
	stop.Store(true)
	wg.Wait()
	assert.Eventually(t, func() bool {
		g.Refresh()
		return acquire(g)
	}, 10*time.Second, time.Millisecond)
}

// The default MaxAge reads the runtime by itself.
func TestGoSchedRealRuntimeRefreshes(t *testing.T) {
	g := newGoSched(t, GoSchedConfig{MaxAge: time.Nanosecond})
	n := g.Stats().Readings
	time.Sleep(time.Millisecond)
	acquire(g)
	assert.Greater(t, g.Stats().Readings, n)
}

// BenchmarkGoSched measures a GoSched decision on its cached reading (the
// gate as shipped: a clock read, and a new reading at most every 50 µs)
// against reading runtime/metrics on every decision, with one reused sample
// array or, for concurrent deciders, a sync.Pool'd one. "read" is one
// reading as the gate takes it (metrics and GOMAXPROCS). "busy-sched" is
// the executor's busy-worker gate over a real sched.Scheduler (Linux),
// side by side.
func BenchmarkGoSched(b *testing.B) {
	if src := newSchedSource(b, 16); src != nil {
		busy := newBusy(b, BusyConfig{})
		attach(b, busy, src)
		b.Run("busy-sched", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if acquire(busy) {
					release(busy, time.Millisecond)
				}
			}
		})
		b.Run("busy-sched-parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if acquire(busy) {
						release(busy, time.Millisecond)
					}
				}
			})
		})
	}
	// Fraction 1e6 keeps the gate open whatever the load.
	g := newGoSched(b, GoSchedConfig{Fraction: 1e6})
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if acquire(g) {
				release(g, time.Millisecond)
			}
		}
	})
	b.Run("cached-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if acquire(g) {
					release(g, time.Millisecond)
				}
			}
		})
	})
	b.Run("every-call", func(b *testing.B) {
		s := newGoSchedSamples()
		b.ReportAllocs()
		for b.Loop() {
			running, runnable := readSched(&s)
			_ = running+runnable <= 1<<20
		}
	})
	b.Run("every-call-pool-parallel", func(b *testing.B) {
		pool := sync.Pool{New: func() any {
			s := newGoSchedSamples()
			return &s
		}}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				s := pool.Get().(*[2]metrics.Sample)
				running, runnable := readSched(s)
				_ = running+runnable <= 1<<20
				pool.Put(s)
			}
		})
	})
	b.Run("read", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			g.mu.Lock()
			g.read()
			g.mu.Unlock()
		}
	})
	b.Run("clock", func(b *testing.B) {
		for b.Loop() {
			goSchedClock()
		}
	})
}
