package sched

// This file lends an idle worker's CPU to code that runs off the worker.
//
// A task submitted from another goroutine to a parked worker costs two
// wake-ups across threads: the worker's (an eventfd write, a return from
// epoll_wait) and, when the caller waits for the task to end, the caller's.
// When the worker has nothing to do, the caller may as well run the code
// itself. A lease makes that safe for the worker's discipline: while it
// lasts, the worker counts as busy and work submitted to it waits in its
// inbox, exactly as if the leased code were a task it runs; when the lease
// ends, that work is started. The watchdog takes back a lease held for
// longer than Config.BlockedAfter, so code that blocks, or runs long,
// delays the worker's queue no longer than a handler that blocks its thread
// does before its hand-over to a spare.

// Lease is a claim on an idle worker's CPU: the code the caller runs while
// it holds one stands for a task of the worker (Worker.Lend). The zero
// Lease holds nothing.
type Lease struct {
	w   *Worker
	seq uint64
}

// Lend claims w's CPU for code that the caller runs on its own goroutine,
// when w is parked with nothing queued and no other lease on it; it
// reports false otherwise, and the caller then submits its work as usual.
// While the lease lasts, w counts as busy (Scheduler.Busy), and tasks
// submitted to it from other goroutines wait in its queue; events of its
// own (its descriptors, its timers) still wake it. The caller must call
// End when its code returns. The watchdog ends a lease held for longer
// than Config.BlockedAfter, and so no lease is lent when the watchdog is
// off (a negative BlockedAfter). It is safe from any goroutine and costs a
// few atomic operations.
func (w *Worker) Lend() (Lease, bool) {
	s := w.s
	if s.dogStop == nil || s.state.Load() != stateRunning || w.parkState.Load() != parkParked || w.inbox.nonEmpty() {
		return Lease{}, false
	}
	seq := w.lendSeq.Load()
	if seq&1 != 0 || !w.lendSeq.CompareAndSwap(seq, seq+1) {
		return Lease{}, false
	}
	w.lentAt.Store(s.clock())
	s.busy.Add(1)
	if !w.parkState.CompareAndSwap(parkParked, parkLent) {
		// Woken meanwhile: no lease, unless the watchdog ended the
		// claim first (its endLease then undid the count).
		if w.lendSeq.CompareAndSwap(seq+1, seq+2) {
			s.busy.Add(-1)
		}
		return Lease{}, false
	}
	if w.lendSeq.Load() != seq+1 {
		// The watchdog ended the claim before the worker was marked
		// lent: its endLease found nothing to give back.
		w.unlend()
		return Lease{}, false
	}
	w.lends.Add(1)
	s.guestBegins() // the watchdog ticks while a lease may need ending
	return Lease{w: w, seq: seq + 1}, true
}

// Lend lends the CPU of the first of the scheduler's workers, looking
// round them from worker index from, that is idle (Worker.Lend), and
// reports false when none is. While every worker is busy it costs one
// atomic load (the busy count), whatever the number of workers.
func (s *Scheduler) Lend(from int) (Lease, bool) {
	n := len(s.workers)
	if int(s.busy.Load()) >= n {
		return Lease{}, false
	}
	for i := 0; i < n; i++ {
		if l, ok := s.workers[(from+i)%n].Lend(); ok {
			return l, true
		}
	}
	return Lease{}, false
}

// End returns the lease's CPU to its worker, which then starts what was
// submitted to it meanwhile. It reports false when the watchdog had
// already taken the lease back: the code ran, or was held, for longer than
// Config.BlockedAfter. Ending a lease twice, or the zero Lease, does
// nothing and reports false.
func (l Lease) End() bool {
	w := l.w
	if w == nil || !w.lendSeq.CompareAndSwap(l.seq, l.seq+1) {
		return false
	}
	w.endLease()
	return true
}

// endLease gives w back its CPU, once per lease: by the lease's End or by
// the watchdog (checkLease), whichever ended it.
func (w *Worker) endLease() {
	w.s.busy.Add(-1)
	w.unlend()
}

// unlend marks w parked again if it is still marked lent, and wakes it
// if work came meanwhile.
func (w *Worker) unlend() {
	if !w.parkState.CompareAndSwap(parkLent, parkParked) {
		return // an event of its own woke it meanwhile: it runs
	}
	// A producer that queued work while the worker was lent left it
	// asleep; one that comes after the swap above wakes it itself.
	if w.inbox.nonEmpty() || w.wanted.Load() != 0 || w.s.state.Load() != stateRunning {
		w.wake()
	}
}

// checkLease ends, on the watchdog, a lease of w older than BlockedAfter,
// and reports whether w was lent, and whether the lease is BlockedAfter/4
// old or more: one the watchdog should look at again within
// BlockedAfter/2.
func (w *Worker) checkLease(now int64) (lent, old bool) {
	seq := w.lendSeq.Load()
	if seq&1 == 0 {
		return false, false
	}
	limit := int64(w.s.cfg.BlockedAfter)
	if age := now - w.lentAt.Load(); age < limit {
		return true, age >= limit/4
	}
	if w.lendSeq.CompareAndSwap(seq, seq+1) {
		w.lendsTaken.Add(1)
		w.endLease()
	}
	return true, true
}

// lent reports whether w's CPU is lent now.
func (w *Worker) lent() bool { return w.lendSeq.Load()&1 != 0 }
