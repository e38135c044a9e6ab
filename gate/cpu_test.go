package gate

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
)

// fakeStat is a /proc/stat under a test root whose counters the test
// advances.
type fakeStat struct {
	t          *testing.T
	path       string
	busy, idle uint64
}

func newFakeStat(t *testing.T) *fakeStat {
	root := t.TempDir()
	s := &fakeStat{t: t, path: filepath.Join(root, "proc/stat"), busy: 1000, idle: 5000}
	require.NoError(t, os.MkdirAll(filepath.Dir(s.path), 0o755))
	s.write()
	return s
}

func (s *fakeStat) root() string { return filepath.Dir(filepath.Dir(s.path)) }

// write spreads busy ticks over user, system, irq, softirq and steal, idle
// ticks over idle and iowait, and adds guest time (already in user) and
// the lines that follow the aggregate one.
func (s *fakeStat) write() {
	b, i := s.busy, s.idle
	line := fmt.Sprintf("cpu  %d 0 %d %d %d %d %d %d 77 0\n", b-b/2-3, b/2, i-i/4, i/4, 1, 1, 1)
	rest := "cpu0 1 2 3 4 5 6 7 8 9 10\nintr 12345 0 0 0\nctxt 99\n"
	assert.NoError(s.t, os.WriteFile(s.path, []byte(line+rest), 0o644))
}

// advance adds 1000 ticks, a fraction u of them busy.
func (s *fakeStat) advance(u float64) {
	busy := uint64(u * 1000)
	s.busy += busy
	s.idle += 1000 - busy
	s.write()
}

func seeded() func() uint64 { return rand.New(rand.NewPCG(1, 2)).Uint64 }

// refusals counts refusals among n decisions.
func refusals(g admit.Policy, n int) int {
	r := 0
	for range n {
		if !acquire(g) {
			r++
		}
	}
	return r
}

func TestCPUThresholds(t *testing.T) {
	s := newFakeStat(t)
	c := newCPU(t, CPUConfig{Root: s.root(), Interval: Manual, Window: 1, Rand: seeded()})
	defer c.Close()
	assert.Equal(t, "cpu", c.Name())
	assert.Equal(t, 0, c.Stats().Span, "one reading: no utilisation yet")
	assert.Zero(t, refusals(c, 1000))

	woke := attach(t, c, nil)

	s.advance(0.5)
	st := c.Refresh()
	require.NoError(t, st.Err)
	assert.InDelta(t, 0.5, st.Utilisation, 1e-9)
	assert.Equal(t, 1, st.Span)
	assert.Zero(t, st.Reject)
	assert.Zero(t, refusals(c, 1000), "below Lower: admit all")

	s.advance(0.7)
	st = c.Refresh()
	assert.InDelta(t, 0.7, st.Utilisation, 1e-9)
	assert.InDelta(t, 0.5, st.Reject, 1e-9)
	r := refusals(c, 20000)
	assert.InDelta(t, 10000, r, 600, "half refused between the thresholds")
	release(c, time.Millisecond) // a no-op

	s.advance(0.65)
	st = c.Refresh()
	assert.InDelta(t, 0.25, st.Reject, 1e-9)
	assert.InDelta(t, 5000, refusals(c, 20000), 600)
	assert.Equal(t, int64(1), woke.count(), "the probability fell")

	s.advance(0.9)
	st = c.Refresh()
	assert.Equal(t, 1.0, st.Reject)
	assert.Equal(t, 1000, refusals(c, 1000), "above Upper: refuse all")

	s.advance(0.8)
	assert.Equal(t, 1.0, c.Refresh().Reject, "at Upper: refuse all")
	assert.Equal(t, int64(1), woke.count())

	s.advance(0.1)
	c.Refresh()
	assert.Zero(t, refusals(c, 1000))
	assert.Equal(t, int64(2), woke.count())
}

// The utilisation is averaged over Window intervals, so it lags.
func TestCPUWindow(t *testing.T) {
	s := newFakeStat(t)
	c := newCPU(t, CPUConfig{Root: s.root(), Interval: Manual, Window: 3, Lower: 0.5, Upper: 0.9})
	for _, step := range []struct {
		u, avg float64
		span   int
	}{
		{1, 1, 1},
		{1, 1, 2},
		{1, 1, 3},
		{0, 2.0 / 3, 3},
		{0, 1.0 / 3, 3},
		{0, 0, 3},
		{0.6, 0.2, 3},
	} {
		s.advance(step.u)
		st := c.Refresh()
		assert.InDelta(t, step.avg, st.Utilisation, 1e-9)
		assert.Equal(t, step.span, st.Span)
	}
}

func TestCPUEqualThresholds(t *testing.T) {
	s := newFakeStat(t)
	c := newCPU(t, CPUConfig{Root: s.root(), Interval: Manual, Window: 1, Lower: 0.5, Upper: 0.5})
	s.advance(0.5)
	assert.Zero(t, c.Refresh().Reject)
	s.advance(0.501)
	assert.Equal(t, 1.0, c.Refresh().Reject)
}

func TestCPUErrorsKeepState(t *testing.T) {
	s := newFakeStat(t)
	c := newCPU(t, CPUConfig{Root: s.root(), Interval: Manual, Window: 1})
	s.advance(0.95)
	require.Equal(t, 1.0, c.Refresh().Reject)
	require.NoError(t, os.WriteFile(s.path, []byte("garbage\n"), 0o644))
	st := c.Refresh()
	assert.Error(t, st.Err)
	assert.Equal(t, 1.0, st.Reject)
	assert.False(t, acquire(c))
	require.NoError(t, os.Remove(s.path))
	assert.Error(t, c.Refresh().Err)

	missing := newCPU(t, CPUConfig{Root: t.TempDir(), Interval: Manual})
	assert.Error(t, missing.Stats().Err)
	assert.True(t, acquire(missing), "fails open")

}

func TestCPURefresher(t *testing.T) {
	s := newFakeStat(t)
	c := newCPU(t, CPUConfig{Root: s.root(), Interval: time.Millisecond, Window: 1})
	defer c.Close()
	require.True(t, acquire(c))
	require.Eventually(t, func() bool { s.advance(1); return !acquire(c) }, 10*time.Second, time.Millisecond)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
}

// skipWithoutProc skips a test that reads the machine it runs on through
// /proc and the cgroup file system: only Linux has them.
func skipWithoutProc(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("reads /proc and the cgroups, which only Linux has; this is %s", runtime.GOOS)
	}
}

// The machine the tests run on.
func TestCPUThisMachine(t *testing.T) {
	skipWithoutProc(t)
	c := newCPU(t, CPUConfig{Interval: Manual})
	time.Sleep(20 * time.Millisecond)
	st := c.Refresh()
	require.NoError(t, st.Err)
	assert.GreaterOrEqual(t, st.Utilisation, 0.0)
	assert.LessOrEqual(t, st.Utilisation, 1.0)
	t.Logf("%+v", st)
}
