package gate

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The constructors build the gate their tests need, failing the test at
// once if the configuration is refused.

func newBusy(t testing.TB, cfg BusyConfig) *Busy {
	t.Helper()
	g, err := NewBusy(cfg)
	require.NoError(t, err)
	return g
}

func newConcurrency(t testing.TB, limit int) *Concurrency {
	t.Helper()
	g, err := NewConcurrency(ConcurrencyConfig{Limit: limit})
	require.NoError(t, err)
	return g
}

func newCPU(t testing.TB, cfg CPUConfig) *CPU {
	t.Helper()
	g, err := NewCPU(cfg)
	require.NoError(t, err)
	return g
}

func newGoSched(t testing.TB, cfg GoSchedConfig) *GoSched {
	t.Helper()
	g, err := NewGoSched(cfg)
	require.NoError(t, err)
	return g
}

func newAdaptive(t testing.TB, cfg AdaptiveConfig) *Adaptive {
	t.Helper()
	g, err := NewAdaptive(cfg)
	require.NoError(t, err)
	return g
}

func newMemory(t testing.TB, cfg MemoryConfig) *Memory {
	t.Helper()
	g, err := NewMemory(cfg)
	require.NoError(t, err)
	return g
}

// Each constructor refuses a value out of range with an error that names
// the constructor, the field and the value, and builds nothing; the live
// setters refuse the same values and change nothing.
func TestConfigOutOfRange(t *testing.T) {
	build := func(g any, err error) error {
		if err == nil {
			if c, ok := g.(interface{ Close() error }); ok {
				_ = c.Close()
			}
		}
		return err
	}
	root := t.TempDir() // no /proc there: the CPU and memory gates fail open
	cases := []struct {
		name string
		new  func() error
		want []string
	}{
		{"busy negative", func() error { return build(NewBusy(BusyConfig{Fraction: -0.1})) },
			[]string{"gate: NewBusy: BusyConfig.Fraction is -0.1: use a fraction in (0, 1], or 0 for 0.5"}},
		{"busy NaN", func() error { return build(NewBusy(BusyConfig{Fraction: math.NaN()})) },
			[]string{"BusyConfig.Fraction is NaN"}},
		{"concurrency", func() error { return build(NewConcurrency(ConcurrencyConfig{Limit: -1})) },
			[]string{"gate: NewConcurrency: ConcurrencyConfig.Limit is -1: use a count of requests, 0 or more"}},
		{"cpu order", func() error { return build(NewCPU(CPUConfig{Root: root, Interval: Manual, Lower: 0.9, Upper: 0.5})) },
			[]string{"gate: NewCPU: CPUConfig.Upper is 0.5, outside [Lower 0.9, 1]"}},
		{"cpu lower", func() error { return build(NewCPU(CPUConfig{Root: root, Interval: Manual, Lower: -0.1, Upper: 0.5})) },
			[]string{"CPUConfig.Lower is -0.1: use a utilisation in [0, 1]"}},
		{"cpu upper", func() error { return build(NewCPU(CPUConfig{Root: root, Interval: Manual, Upper: 1.5})) },
			[]string{"CPUConfig.Upper is 1.5"}},
		{"cpu window", func() error { return build(NewCPU(CPUConfig{Root: root, Interval: Manual, Window: -1})) },
			[]string{"CPUConfig.Window is -1: use a count of intervals"}},
		{"gosched fraction", func() error { return build(NewGoSched(GoSchedConfig{Fraction: math.Inf(1), MaxAge: Manual})) },
			[]string{"gate: NewGoSched: GoSchedConfig.Fraction is +Inf: use a positive fraction of GOMAXPROCS"}},
		{"gosched procs", func() error { return build(NewGoSched(GoSchedConfig{Procs: -1, MaxAge: Manual})) },
			[]string{"GoSchedConfig.Procs is -1: use a count of Ps, or 0 for the runtime's GOMAXPROCS"}},
		{"adaptive negative", func() error { return build(NewAdaptive(AdaptiveConfig{MinLimit: -1, QueueSize: -1})) },
			[]string{"gate: NewAdaptive: AdaptiveConfig.MinLimit is -1: use 0 (the default) or more", "AdaptiveConfig.QueueSize is -1"}},
		{"adaptive order", func() error { return build(NewAdaptive(AdaptiveConfig{MinLimit: 10, MaxLimit: 5})) },
			[]string{"AdaptiveConfig.MinLimit 10 is above MaxLimit 5"}},
		{"adaptive window", func() error { return build(NewAdaptive(AdaptiveConfig{Window: MaxAdaptiveWindow + 1})) },
			[]string{"AdaptiveConfig.Window is 4097: use at most MaxAdaptiveWindow (4096) samples"}},
		{"adaptive smoothing", func() error { return build(NewAdaptive(AdaptiveConfig{Smoothing: 1.5})) },
			[]string{"AdaptiveConfig.Smoothing is 1.5: use a fraction in (0, 1], or 0 for 0.2"}},
		{"adaptive smoothing NaN", func() error { return build(NewAdaptive(AdaptiveConfig{Smoothing: math.NaN()})) },
			[]string{"AdaptiveConfig.Smoothing is NaN"}},
		{"memory min free", func() error { return build(NewMemory(MemoryConfig{Root: root, Interval: Manual, MinFree: -1})) },
			[]string{"gate: NewMemory: MemoryConfig.MinFree is -1: use a number of bytes"}},
		{"memory fraction", func() error { return build(NewMemory(MemoryConfig{Root: root, Interval: Manual, MinFreeFraction: 2})) },
			[]string{"MemoryConfig.MinFreeFraction is 2: use a fraction in (0, 1], or 0 for 0.1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.new()
			require.Error(t, err)
			for _, w := range c.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}

	busy := newBusy(t, BusyConfig{Fraction: 0.5})
	assert.ErrorContains(t, busy.SetConfig(BusyConfig{Fraction: -1}), "gate: Busy.SetConfig: BusyConfig.Fraction is -1")
	assert.Equal(t, 0.5, math.Float64frombits(busy.fraction.Load()), "unchanged")

	conc := newConcurrency(t, 3)
	assert.ErrorContains(t, conc.SetLimit(-1), "gate: Concurrency.SetLimit: limit is -1")
	assert.Equal(t, 3, conc.Limit(), "unchanged")

	gs := newGoSched(t, GoSchedConfig{Fraction: 0.5, MaxAge: Manual})
	assert.ErrorContains(t, gs.SetFraction(-1), "gate: GoSched.SetFraction: fraction is -1")
	assert.ErrorContains(t, gs.SetFraction(math.NaN()), "fraction is NaN")
	assert.Equal(t, 0.5, math.Float64frombits(gs.fraction.Load()), "unchanged")
}
