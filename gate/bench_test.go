package gate

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-go/sluice/admit"
)

// benchGate is a gate under benchmark.
type benchGate struct {
	name string
	g    admit.Policy
}

// benchGates returns the gates the decision benchmarks measure, each open
// and attached as a pipeline would attach it.
func benchGates(b *testing.B) []benchGate {
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
	mem := newMemory(b, MemoryConfig{Root: root, Interval: Manual})
	cpu := newCPU(b, CPUConfig{Root: root, Interval: Manual})
	busy := newBusy(b, BusyConfig{})
	attach(b, busy, newFakeExecutor(16, 1))
	gates := []benchGate{
		{"busy", busy},
		{"concurrency", newConcurrency(b, 1<<30)},
		{"adaptive", newAdaptive(b, AdaptiveConfig{MaxLimit: 1 << 20, InitialLimit: 1 << 20})},
		{"memory", mem},
		{"cpu", cpu},
	}
	if s := newSchedSource(b, 16); s != nil {
		real := newBusy(b, BusyConfig{})
		attach(b, real, s)
		gates = append(gates, benchGate{"busy-sched", real})
	}
	return gates
}

// decide is one decision and, if admitted, its end, with a reused Attempt
// as a pipeline passes it.
func decide(g admit.Policy, a *admit.Attempt) bool {
	if g.Admit(a) != nil {
		return false
	}
	g.Done(a, admit.Outcome{Latency: time.Millisecond, Status: 200})
	return true
}

// BenchmarkAdmitDone measures one admitted decision and its Done, on one
// goroutine, for each gate.
func BenchmarkAdmitDone(b *testing.B) {
	for _, bg := range benchGates(b) {
		b.Run(bg.name, func(b *testing.B) {
			var a admit.Attempt
			b.ReportAllocs()
			for b.Loop() {
				decide(bg.g, &a)
			}
		})
	}
}

// BenchmarkAdmitDoneParallel is the same with every P deciding at once: the
// gates that count in-flight requests share one cache line.
func BenchmarkAdmitDoneParallel(b *testing.B) {
	for _, bg := range benchGates(b) {
		b.Run(bg.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var a admit.Attempt
				for pb.Next() {
					decide(bg.g, &a)
				}
			})
		})
	}
}

// BenchmarkRefused measures a refusal: the busy gate over its limit, a
// concurrency limit of 0, and the CPU gate in its proportional band.
func BenchmarkRefused(b *testing.B) {
	busy := newBusy(b, BusyConfig{})
	attach(b, busy, newFakeExecutor(16, 16))
	for _, bg := range []benchGate{{"busy", busy}, {"concurrency", newConcurrency(b, 0)}} {
		b.Run(bg.name, func(b *testing.B) {
			var a admit.Attempt
			b.ReportAllocs()
			for b.Loop() {
				if decide(bg.g, &a) {
					b.Fatal("admitted")
				}
			}
		})
	}
	b.Run("cpu-band", func(b *testing.B) {
		c := &CPU{rnd: seeded(), refusal: &admit.Refusal{Reason: "cpu"}}
		c.thr.Store(1 << 63) // half refused
		var a admit.Attempt
		b.ReportAllocs()
		for b.Loop() {
			decide(c, &a)
		}
	})
}
