package shed

import (
	"testing"
	"time"

	"github.com/sluice-go/sluice/admit"
)

// benchShedder is a shedder under benchmark.
type benchShedder struct {
	name string
	s    *Shedder
}

// BenchmarkShed measures one decision and, when admitted, its Done, on one
// goroutine and on every P at once, for each shedder: below its band
// (nothing shed: the common case) and in the middle of it (half refused:
// a clock read and a random draw more).
func BenchmarkShed(b *testing.B) {
	mk := func(s *Shedder, err error) *Shedder {
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	half := func(s *Shedder) *Shedder { s.thr.Store(1 << 63); s.next.Store(1 << 62); return s }
	mean := mk(NewLatency(LatencyConfig{}))
	p99 := mk(NewLatency(LatencyConfig{Percentile: 0.99}))
	errs := mk(NewErrorRate(ErrorRateConfig{}))
	conc := mk(NewConcurrency(ConcurrencyConfig{Lower: 1 << 30, Upper: 1 << 31}))
	custom := mk(NewCustom(CustomConfig{Value: func() float64 { return 0 }}))
	concHalf := mk(NewConcurrency(ConcurrencyConfig{Lower: 0, Upper: 2}))
	concHalf.inflight.Store(1)
	for _, bs := range []benchShedder{
		{"latency-mean", mean}, {"latency-p99", p99}, {"errors", errs}, {"concurrency", conc}, {"custom", custom},
		{"latency-mean-band", half(mk(NewLatency(LatencyConfig{})))},
		{"latency-p99-band", half(mk(NewLatency(LatencyConfig{Percentile: 0.99})))},
		{"concurrency-band", concHalf},
	} {
		b.Run(bs.name, func(b *testing.B) {
			var a admit.Attempt
			b.ReportAllocs()
			for b.Loop() {
				if bs.s.Admit(&a) == nil {
					bs.s.Done(&a, admit.Outcome{Latency: time.Millisecond, Status: 200})
				}
			}
		})
		b.Run(bs.name+"-parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var a admit.Attempt
				for pb.Next() {
					if bs.s.Admit(&a) == nil {
						bs.s.Done(&a, admit.Outcome{Latency: time.Millisecond, Status: 200})
					}
				}
			})
		})
	}
}
