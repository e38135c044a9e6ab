package gate

import (
	"testing"
	"time"

	"github.com/sluice-go/sluice/admit"
)

// BenchmarkShed measures one decision and, when admitted, its Done, on one
// goroutine and on every P at once, for each shedder: below its band
// (nothing shed: the common case) and in the middle of it (half refused:
// a clock read and a random draw more).
func BenchmarkShed(b *testing.B) {
	mk := func(s *Shed, err error) *Shed {
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	half := func(s *Shed) *Shed { s.thr.Store(1 << 63); s.next.Store(1 << 62); return s }
	mean := mk(NewLatencyShed(LatencyShedOptions{}))
	p99 := mk(NewLatencyShed(LatencyShedOptions{Percentile: 0.99}))
	errs := mk(NewErrorRateShed(ErrorRateShedOptions{}))
	conc := mk(NewConcurrencyShed(ConcurrencyShedOptions{Lower: 1 << 30, Upper: 1 << 31}))
	custom := mk(NewCustomShed(CustomShedOptions{Value: func() float64 { return 0 }}))
	concHalf := mk(NewConcurrencyShed(ConcurrencyShedOptions{Lower: 0, Upper: 2}))
	concHalf.inflight.Store(1)
	for _, bg := range []benchGate{
		{"latency-mean", mean}, {"latency-p99", p99}, {"errors", errs}, {"concurrency", conc}, {"custom", custom},
		{"latency-mean-band", half(mk(NewLatencyShed(LatencyShedOptions{})))},
		{"latency-p99-band", half(mk(NewLatencyShed(LatencyShedOptions{Percentile: 0.99})))},
		{"concurrency-band", concHalf},
	} {
		b.Run(bg.name, func(b *testing.B) {
			var a admit.Attempt
			b.ReportAllocs()
			for b.Loop() {
				if bg.g.Admit(&a) == nil {
					bg.g.Done(&a, admit.Outcome{Latency: time.Millisecond, Status: 200})
				}
			}
		})
		b.Run(bg.name+"-parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var a admit.Attempt
				for pb.Next() {
					if bg.g.Admit(&a) == nil {
						bg.g.Done(&a, admit.Outcome{Latency: time.Millisecond, Status: 200})
					}
				}
			})
		})
	}
}
