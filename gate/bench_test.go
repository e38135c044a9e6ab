package gate

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// benchGates returns the gates the decision benchmarks measure, each open.
func benchGates(b *testing.B) []struct {
	name string
	g    Gate
} {
	root := b.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc/meminfo"), []byte("MemTotal: 1000 kB\nMemAvailable: 900 kB\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc/stat"), []byte("cpu  1 0 1 100 0 0 0 0 0 0\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	mem := NewMemory(MemoryOptions{Root: root, Interval: Manual})
	cpu := NewCPU(CPUOptions{Root: root, Interval: Manual})
	src := newFakeSource(16, 1)
	gates := []struct {
		name string
		g    Gate
	}{
		{"busy", NewBusy(src, BusyOptions{})},
		{"concurrency", NewConcurrency(1 << 30)},
		{"adaptive", NewAdaptive(AdaptiveOptions{MaxLimit: 1 << 20, InitialLimit: 1 << 20})},
		{"memory", mem},
		{"cpu", cpu},
		{"chain(busy,concurrency)", All(NewBusy(src, BusyOptions{}), NewConcurrency(1<<30))},
	}
	if s := newSchedSource(b, 16); s != nil {
		gates = append(gates, struct {
			name string
			g    Gate
		}{"busy-sched", NewBusy(s, BusyOptions{})})
	}
	return gates
}

// BenchmarkAcquireRelease measures one admitted decision and its release,
// on one goroutine, for each gate.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, bg := range benchGates(b) {
		b.Run(bg.name, func(b *testing.B) {
			g := bg.g
			b.ReportAllocs()
			for b.Loop() {
				if g.Acquire() {
					g.Release(time.Millisecond)
				}
			}
		})
	}
}

// BenchmarkAcquireReleaseParallel is the same with every P deciding at once:
// the gates that count in-flight requests share one cache line.
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	for _, bg := range benchGates(b) {
		b.Run(bg.name, func(b *testing.B) {
			g := bg.g
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if g.Acquire() {
						g.Release(time.Millisecond)
					}
				}
			})
		})
	}
}

// BenchmarkRefused measures a refusal: the busy gate over its limit, the CPU
// gate in its proportional band, and a chain whose second member refuses
// (the first is undone).
func BenchmarkRefused(b *testing.B) {
	src := newFakeSource(16, 16)
	conc := NewConcurrency(0)
	for _, bg := range []struct {
		name string
		g    Gate
	}{
		{"busy", NewBusy(src, BusyOptions{})},
		{"concurrency", conc},
		{"chain(concurrency,busy)", All(NewConcurrency(1<<30), NewBusy(src, BusyOptions{}))},
	} {
		b.Run(bg.name, func(b *testing.B) {
			g := bg.g
			b.ReportAllocs()
			for b.Loop() {
				if g.Acquire() {
					b.Fatal("admitted")
				}
			}
		})
	}
	b.Run("cpu-band", func(b *testing.B) {
		c := &CPU{rnd: seeded()}
		c.thr.Store(1 << 63) // half refused
		b.ReportAllocs()
		for b.Loop() {
			if c.Acquire() {
				c.Release(0)
			}
		}
	})
}
