//go:build linux

package sched

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-go/sluice/lanes"
)

func benchSched(b *testing.B) *Scheduler {
	b.Helper()
	s, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

// BenchmarkDispatch measures running b.N small tasks on a worker, queued
// there in batches of 64 by the last task of the batch before: the cost of one
// Push plus one dispatch (pick, pop, clock, counters, call, charge).
func BenchmarkDispatch(b *testing.B) {
	s := benchSched(b)
	w := s.Worker(0)
	done := make(chan struct{})
	const batch = 64
	n := 0
	var task func()
	task = func() {
		n++
		switch {
		case n == b.N:
			close(done)
		case n%batch == 0:
			for i := 0; i < batch && n+i < b.N; i++ {
				w.Push(lanes.Continuation, task)
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := w.Submit(lanes.Continuation, func() {
		n = -1 // this task counts as the first
		task()
		for i := 0; i < batch && i < b.N; i++ {
			w.Push(lanes.Continuation, task)
		}
	}); err != nil {
		b.Fatal(err)
	}
	<-done
}

// BenchmarkGoStatement is the baseline for BenchmarkDispatch: b.N tasks run
// with `go f()` and a WaitGroup.
func BenchmarkGoStatement(b *testing.B) {
	var wg sync.WaitGroup
	var n atomic.Int64
	task := func() { n.Add(1); wg.Done() }
	b.ReportAllocs()
	wg.Add(b.N)
	for i := 0; i < b.N; i++ {
		go task()
	}
	wg.Wait()
}

// BenchmarkSubmitWake measures one task submitted from another goroutine to
// a parked worker, until it has run: inbox, eventfd write, wakeup from
// epoll_wait, dispatch. The submitter spins on an atomic, so no Go channel
// wakeup is measured.
func BenchmarkSubmitWake(b *testing.B) {
	s := benchSched(b)
	w := s.Worker(0)
	var flag atomic.Int64
	task := func() { flag.Add(1) }
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := w.Submit(lanes.Upstream, task); err != nil {
			b.Fatal(err)
		}
		for flag.Load() == int64(i) {
		}
	}
}

// BenchmarkSubmitThroughput measures submissions from another goroutine to a
// worker that stays awake: the inbox without wakeups.
func BenchmarkSubmitThroughput(b *testing.B) {
	s := benchSched(b)
	w := s.Worker(0)
	var n atomic.Int64
	task := func() { n.Add(1) }
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Submit(lanes.Upstream, task); err != nil {
			b.Fatal(err)
		}
	}
	for n.Load() < int64(b.N) {
	}
}

func noop(context.Context) (int, error) { return 1, nil }

// BenchmarkAwait measures one coroutine awaiting a no-op b.N times in a row:
// the full round trip, in which the worker may park while the operation
// runs elsewhere.
func BenchmarkAwait(b *testing.B) {
	s := benchSched(b)
	done := make(chan struct{})
	b.ReportAllocs()
	if err := s.Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
		for i := 0; i < b.N; i++ {
			_, _ = Await(ctx, noop)
		}
		close(done)
	}); err != nil {
		b.Fatal(err)
	}
	<-done
}

// BenchmarkAwaitAwake keeps the worker awake with 64 coroutines awaiting at
// once, so the figure is the worker-side cost of one Await round trip
// (suspend, hand-off, resume) when the worker never parks.
func BenchmarkAwaitAwake(b *testing.B) {
	benchConcurrent(b, func(w *Worker, n int, wg *sync.WaitGroup) {
		w.Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
			for i := 0; i < n; i++ {
				_, _ = Await(ctx, noop)
			}
			wg.Done()
		})
	})
}

// BenchmarkOffloadAwake is the explicit-callback counterpart of
// BenchmarkAwaitAwake: 64 chains of Offload(op, then).
func BenchmarkOffloadAwake(b *testing.B) {
	benchConcurrent(b, func(w *Worker, n int, wg *sync.WaitGroup) {
		i := 0
		var step func()
		step = func() {
			if i == n {
				wg.Done()
				return
			}
			i++
			w.Offload(func() { _, _ = noop(nil) }, step)
		}
		step()
	})
}

func benchConcurrent(b *testing.B, startChain func(w *Worker, n int, wg *sync.WaitGroup)) {
	s := benchSched(b)
	w := s.Worker(0)
	const chains = 64
	per := max(1, b.N/chains)
	var wg sync.WaitGroup
	wg.Add(chains)
	b.ReportAllocs()
	b.ResetTimer()
	if err := w.Submit(lanes.Upstream, func() {
		for c := 0; c < chains; c++ {
			startChain(w, per, &wg)
		}
	}); err != nil {
		b.Fatal(err)
	}
	wg.Wait()
}

// BenchmarkCoroutineStart measures starting and finishing a coroutine on a
// worker (pooled, so no goroutine is created).
func BenchmarkCoroutineStart(b *testing.B) {
	s := benchSched(b)
	w := s.Worker(0)
	done := make(chan struct{})
	var n int
	fn := func(context.Context) {
		n++
		if n == b.N {
			close(done)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := w.Submit(lanes.Upstream, func() {
		n = 0
		for i := 0; i < b.N; i++ {
			w.Go(context.Background(), lanes.Continuation, fn)
		}
	}); err != nil {
		b.Fatal(err)
	}
	<-done
}

// BenchmarkBusyRead measures reading the busy-worker count.
func BenchmarkBusyRead(b *testing.B) {
	s := benchSched(b)
	var sum int
	for b.Loop() {
		sum += s.Busy()
	}
	_ = sum
}

// BenchmarkGuestRegion measures what the blocked-worker rescue adds to a
// request: a guest region (Worker.Guest) around a handler that enters the
// worker once (a response write), on a worker that stays its own.
func BenchmarkGuestRegion(b *testing.B) {
	s := benchSched(b)
	w := s.Worker(0)
	done := make(chan struct{})
	var n int
	handler := func() {
		w.Leave(w.Enter())
		n++
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := w.Submit(lanes.Upstream, func() {
		for i := 0; i < b.N; i++ {
			w.Guest(nil, handler)
		}
		close(done)
	}); err != nil {
		b.Fatal(err)
	}
	<-done
}
