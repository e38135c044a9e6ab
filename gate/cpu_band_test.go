package gate

import (
	"math"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ladder returns a Rand that walks the midpoints of n equal steps of the
// 64-bit range, over and over: of n decisions at drop probability p it
// refuses exactly round(p × n).
func ladder(n uint64) func() uint64 {
	step := math.MaxUint64 / n
	var k atomic.Uint64
	return func() uint64 { return (k.Add(1)-1)%n*step + step/2 }
}

// The CPU gate is loadshed's CPU option: in the middle of its band it
// refuses half of the decisions, as the shedders of package shed do.
func TestCPUProbability(t *testing.T) {
	const n = 1000
	stat := newFakeStat(t)
	c := newCPU(t, CPUConfig{Root: stat.root(), Interval: Manual, Window: 1, Rand: ladder(n)})
	stat.advance(0.7) // 70% busy: the middle of the default 60% to 80%
	assert.InDelta(t, 0.5, c.Refresh().Reject, 1e-9)
	refused := 0
	for range n {
		if acquire(c) {
			undo(c)
		} else {
			refused++
		}
	}
	assert.Equal(t, n/2, refused)
}

// Why the busy gate reacts faster than loadshed's CPU option, on scripted
// readings: a server at 35% of its CPU steps to 100% (every worker busy),
// then, ten seconds later, down to 10%. The busy count closes the gate at
// the next decision and opens it at the next one after the step down. The
// CPU gate with loadshed's settings (a reading a second, averaged over 10)
// sheds nothing for 3 s, not everything until 7 s, and goes on shedding,
// everything for 2 s more, for 4 s after the load has fallen.
func TestCPULagsAStep(t *testing.T) {
	ex := newFakeExecutor(4, 1)
	busy := newBusy(t, BusyConfig{}) // limit 2 of 4 workers
	attach(t, busy, ex)
	stat := newFakeStat(t)
	cpu := newCPU(t, CPUConfig{Root: stat.root(), Interval: Manual}) // 0.6 to 0.8, 10 readings
	for range 10 {
		stat.advance(0.35)
		require.Zero(t, cpu.Refresh().Reject)
	}
	assert.True(t, acquire(busy))
	release(busy, 0)

	ex.set(4) // the step up: every worker busy
	assert.False(t, acquire(busy), "the busy gate: at the next decision")
	var rejects []float64
	for range 10 { // ten seconds of overload, a reading a second
		stat.advance(1)
		rejects = append(rejects, math.Round(cpu.Refresh().Reject*100)/100)
	}
	assert.Equal(t, []float64{0, 0, 0, 0.05, 0.38, 0.7, 1, 1, 1, 1}, rejects,
		"the CPU gate: the 10 s average crosses 0.6 in the 4th second and 0.8 in the 7th")

	ex.set(1) // the step down
	assert.True(t, acquire(busy), "the busy gate: open at the next decision")
	release(busy, 0)
	rejects = rejects[:0]
	for range 6 {
		stat.advance(0.1)
		rejects = append(rejects, math.Round(cpu.Refresh().Reject*100)/100)
	}
	assert.Equal(t, []float64{1, 1, 0.65, 0.2, 0, 0}, rejects,
		"the CPU gate refuses all for 2 s more, and some for 4 s")
}
