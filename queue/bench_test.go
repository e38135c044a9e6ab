package queue

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// benchEntry is a request struct with the Entry embedded and its callbacks
// bound once, as the server will have.
type benchEntry struct {
	e      Entry
	start  func()
	reject func(Reason)
}

func newBenchEntry() *benchEntry {
	b := &benchEntry{}
	b.start = func() {}
	b.reject = func(Reason) {}
	return b
}

// BenchmarkPushPump: a request refused by the gate is pushed, then the gate
// opens and Pump starts it (real clock, empty queue otherwise).
func BenchmarkPushPump(b *testing.B) {
	for _, o := range []Order{FIFO, LIFO, CoDel} {
		b.Run(o.String(), func(b *testing.B) {
			q := New(Config{Order: o})
			be := newBenchEntry()
			b.ReportAllocs()
			for b.Loop() {
				q.Push(&be.e, Default, be.start, be.reject)
				q.Pump(always)
			}
		})
	}
}

// BenchmarkPushPumpStanding: the same with a standing queue of n entries in
// three classes, so that each Push and Pump works on a long queue (the new
// entry, of the most important class, is the one started).
func BenchmarkPushPumpStanding(b *testing.B) {
	for _, o := range []Order{FIFO, CoDel} {
		for _, n := range []int{100, 4000} {
			b.Run(fmt.Sprintf("%s/%d", o, n), func(b *testing.B) {
				q := New(Config{Order: o, Timeout: time.Hour, Interval: time.Nanosecond})
				for i := range n {
					be := newBenchEntry()
					q.Push(&be.e, Class(1+i%2), be.start, be.reject)
				}
				be := newBenchEntry()
				b.ReportAllocs()
				for b.Loop() {
					q.Push(&be.e, Critical, be.start, be.reject)
					q.Pump(budget(1))
				}
				q.Close()
			})
		}
	}
}

// BenchmarkPushPumpParallel: every goroutine pushes its own entry and pumps,
// all on one queue: the cost under contention for its lock.
func BenchmarkPushPumpParallel(b *testing.B) {
	q := New(Config{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		// Another goroutine's Pump may have taken this goroutine's entry
		// and not yet called its start: an entry is reused only once its
		// callback has run, so each goroutine keeps a few.
		var es [4]struct {
			benchEntry
			free atomic.Bool
		}
		for i := range es {
			e := &es[i]
			e.free.Store(true)
			e.start = func() { e.free.Store(true) }
			e.reject = func(Reason) { e.free.Store(true) }
		}
		i := 0
		for pb.Next() {
			for !es[i%len(es)].free.Load() {
				i++
				runtime.Gosched()
			}
			e := &es[i%len(es)]
			e.free.Store(false)
			q.Push(&e.e, Default, e.start, e.reject)
			q.Pump(always)
		}
	})
	q.Close()
}

// BenchmarkPushRemove: a waiting request whose client goes away.
func BenchmarkPushRemove(b *testing.B) {
	q := New(Config{})
	be := newBenchEntry()
	b.ReportAllocs()
	for b.Loop() {
		q.Push(&be.e, Default, be.start, be.reject)
		q.Remove(&be.e)
	}
}

// BenchmarkPumpEmpty: the call made on every request end when nothing
// waits (one atomic load).
func BenchmarkPumpEmpty(b *testing.B) {
	q := New(Config{})
	b.ReportAllocs()
	for b.Loop() {
		q.Pump(always)
	}
}

// BenchmarkExpire: a timer tick that finds nothing due in a queue of 4000
// entries spread over the three named classes.
func BenchmarkExpire(b *testing.B) {
	q := New(Config{Timeout: time.Hour, Order: CoDel})
	for i := range 4000 {
		be := newBenchEntry()
		q.Push(&be.e, Class(i%3), be.start, be.reject)
	}
	b.ReportAllocs()
	for b.Loop() {
		q.Expire()
	}
	q.Close()
}

// BenchmarkWaitAdmitted: Wait with Config.Admit open, so it is started by
// its own Pump: the pool, the channel and the queue, no other goroutine.
func BenchmarkWaitAdmitted(b *testing.B) {
	q := New(Config{Admit: always})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := q.Wait(ctx, Default); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStats: reading the counters.
func BenchmarkStats(b *testing.B) {
	q := New(Config{})
	b.ReportAllocs()
	for b.Loop() {
		_ = q.Stats()
	}
}
