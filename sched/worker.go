package sched

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/sluice-go/sluice/lanes"
)

// eventfdToken marks the worker's own eventfd in epoll events; watched file
// descriptors carry their slot number instead.
const eventfdToken = -1

// Worker is one executor thread: a goroutine locked to an OS thread, with
// its run queues, inbox, timers and epoll instance. While guest code (see
// Guest) holds that thread off the CPU, a spare thread runs the worker
// instead (see runner.go).
//
// Methods documented as local (Push, Go, AfterFunc, At, Offload, Watch, Now)
// take no lock and must be called only from code running on this worker:
// tasks, timer and poll callbacks, coroutines. Submit is safe from anywhere.
type Worker struct {
	s   *Scheduler
	id  int
	cpu int

	// Owned by the runner that owns the worker. q holds each lane's new
	// work; qr the resumptions of coroutines started in a registered lane,
	// which that lane runs first (see resumeLane).
	q         [lanes.MaxLanes]ring
	qr        [lanes.MaxLanes]ring
	nlanes    int
	ready     lanes.Mask
	picker    *lanes.Picker
	now       int64
	timers    timerHeap
	suspended coroList
	countdown int
	lastPoll  int64 // w.now at the last non-blocking poll
	events    []epollEvent
	watches   []*Watch
	freeSlots []int32
	nwatch    int
	gen       uint32

	// The runners: which one owns the worker, the others, and those back
	// from guest code that wait for it (under runMu).
	owner   atomic.Pointer[runner]
	runMu   sync.Mutex
	runners []*runner
	wants   []*runner
	wanted  atomic.Int32 // len(wants), read without the lock
	away    atomic.Int32 // runners running guest code without the worker
	steals  atomic.Int64 // hand-overs from a blocked runner

	// The watchdog's reading of the owner thread's run-queue wait.
	waitTID  int32
	waitAt   int64
	waitLast int64
	runWait  atomic.Int64

	// Shared with other goroutines.
	inbox      inbox
	wakers     atomic.Int32  // producers between deciding to wake and writing
	parkState  atomic.Int32  // running, parked, notified or lent (see park, Lend)
	lendSeq    atomic.Uint64 // odd while the worker's CPU is lent (lend.go)
	lentAt     atomic.Int64  // when the current lease began
	lends      atomic.Int64  // leases begun (Lend)
	lendsTaken atomic.Int64  // leases the watchdog ended
	pending    atomic.Int64  // Await and Offload operations in flight
	epfd       int
	evfd       int

	// Counters: written by the worker only, read by Snapshot.
	stats     [lanes.MaxLanes]laneCounters
	isBusy    atomic.Bool
	busySince atomic.Int64
	busyNs    atomic.Int64
	parks     atomic.Int64
	polls     atomic.Int64
	dropped   atomic.Int64
}

// Park states of a worker.
const (
	parkRunning  int32 = iota // not in epoll_wait: producers need not wake it
	parkParked                // in (or entering) epoll_wait
	parkNotified              // parked, and a producer has written the eventfd
	parkClosed                // exited: never write to the eventfd again
	parkLent                  // parked, its CPU lent (Lend): queued work waits for the lease's end
)

type laneCounters struct {
	queued atomic.Int64
	run    atomic.Int64
	waited atomic.Int64
	ran    atomic.Int64
}

// bump adds d to a counter that only one goroutine writes: a plain load and
// store, which readers on other threads still see whole.
func bump(c *atomic.Int64, d int64) { c.Store(c.Load() + d) }

func newWorker(s *Scheduler, id, cpu int) *Worker {
	return &Worker{
		s: s, id: id, cpu: cpu, epfd: -1, evfd: -1,
		picker: lanes.NewPicker(s.set),
		events: make([]epollEvent, 128),
	}
}

// ID returns the worker's index in its scheduler.
func (w *Worker) ID() int { return w.id }

// CPU returns the CPU the worker is pinned to, or -1 when it is not pinned.
func (w *Worker) CPU() int { return w.cpu }

// TID returns the kernel thread ID of the thread that runs the worker now,
// once started: the worker's first thread, or a spare that took over while
// guest code blocked (see Guest).
func (w *Worker) TID() int {
	if r := w.owner.Load(); r != nil {
		return int(r.tid.Load())
	}
	return 0
}

// Scheduler returns the scheduler the worker belongs to.
func (w *Worker) Scheduler() *Scheduler { return w.s }

// Now returns the worker's clock as of the start of the current task, in
// the scheduler's nanoseconds. Local.
func (w *Worker) Now() int64 {
	defer w.leave(w.enter())
	return w.now
}

func (w *Worker) open() error {
	ep, ev, err := openPoll(w.id)
	if err != nil {
		return err
	}
	w.epfd, w.evfd = ep, ev
	w.nlanes = w.s.set.Len()
	w.countdown = w.s.cfg.PollEvery
	return nil
}

// close releases the kernel objects. It first makes sure no producer can
// still write to the eventfd, whose number the process may reuse.
func (w *Worker) close() {
	w.inbox.seal()
	w.parkState.Store(parkClosed)
	for w.wakers.Load() != 0 {
		runtime.Gosched()
	}
	if w.epfd >= 0 {
		closeFD(w.epfd)
		w.epfd = -1
	}
	if w.evfd >= 0 {
		closeFD(w.evfd)
		w.evfd = -1
	}
}

// run is the loop of the runner that owns the worker. It returns true when
// the worker should stop (drained, or Stop cancelled the rest), false when it
// handed the worker to another runner.
func (w *Worker) run(r *runner) bool {
	s := w.s
	w.now = s.clock()
	for {
		if w.wanted.Load() != 0 && w.serveWanting(r) {
			return false
		}
		if w.inbox.nonEmpty() {
			w.drainInbox()
		}
		if w.timers.len() > 0 && w.timers.min().when <= w.now {
			w.fireTimers()
		}
		if w.nwatch > 0 {
			// Poll every PollEvery tasks, and after PollInterval of
			// tasks however few: long tasks (coroutines that Yield
			// between slices of work) must not hide new readiness for
			// PollEvery slices.
			if w.countdown--; w.countdown <= 0 || w.now-w.lastPoll >= s.pollInterval {
				w.countdown = s.cfg.PollEvery
				w.lastPoll = w.now
				w.poll(0)
			}
		}
		st := s.state.Load()
		if st == stateCanceling {
			return true
		}
		id, ok := w.picker.Pick(w.ready)
		if !ok {
			if st == stateDraining && w.drained() {
				return true
			}
			w.park(st)
			continue
		}
		if w.runOne(r, id) {
			return false
		}
	}
}

// drained reports whether nothing is queued or in flight on the worker.
// pending is read before the inbox: an operation queues its continuation
// before it stops counting as pending.
func (w *Worker) drained() bool {
	return w.pending.Load() == 0 && !w.inbox.nonEmpty() && w.ready == 0 && w.suspended.n == 0 &&
		w.away.Load() == 0
}

// resumed marks a lane ID, in what carries a task to its queue (push, the
// inbox, timers), as naming the lane's queue of resumptions rather than of
// new work.
const resumed lanes.ID = 0x80

// resumeLane is where a coroutine started in lane resumes after Await,
// Sleep, Pause or Yield: a built-in lane's coroutines resume in the
// Continuation lane; a registered lane's in its own queue of resumptions,
// which the lane runs before its new work, so that each lane keeps the
// order of the built-in pair within itself.
func resumeLane(lane lanes.ID) lanes.ID {
	if lane <= lanes.Upstream {
		return lanes.Continuation
	}
	return lane | resumed
}

// queued returns how many tasks lane id holds, new and resumed.
func (w *Worker) queued(id lanes.ID) int { return w.q[id].n + w.qr[id].n }

// runOne runs the next task of lane id: a resumption, if it holds one, else
// new work. It reports whether the worker was handed to another runner (to
// run a coroutine of that runner's).
func (w *Worker) runOne(r *runner, id lanes.ID) bool {
	q, lane := &w.qr[id], id|resumed
	if q.n == 0 {
		q, lane = &w.q[id], id
	}
	if q.n == 0 {
		// The lane's last task is still running, on a runner that blocked
		// in it (a lane leaves the ready mask only after its task ran).
		w.ready = w.ready.Without(id)
		return false
	}
	t := q.pop()
	w.stats[id].queued.Store(int64(w.queued(id)))
	return w.runTask(r, lane, t)
}

// runTask runs t, taken from lane (with the resumed mark if it came from
// the lane's resumptions), on runner r, which owns the worker.
func (w *Worker) runTask(r *runner, lane lanes.ID, t task) bool {
	id := lane &^ resumed
	if t.alone != nil && r.live > 0 && w.s.state.Load() == stateRunning && t.alone() {
		// Start the job on a runner of its own, if one can be had.
		if to := w.takeLone(); to != nil {
			to.next, to.nextLane, to.hasNext = t, lane, true
			w.handTo(r, to)
			return true
		}
	}
	if t.co != nil && t.co.r != r {
		if w.forward(r, lane, t) {
			return true
		}
		if w.queued(id) == 0 {
			w.ready = w.ready.Without(id)
		}
		return false
	}
	c := &w.stats[id]
	start := w.now
	if d := start - t.enq; d > 0 {
		bump(&c.waited, d)
	}
	steals := w.steals.Load()
	if t.co != nil {
		w.suspended.remove(t.co)
		w.resume(t.co)
	} else {
		w.call(t.fn)
	}
	end := w.s.clock()
	w.now = end
	ran := end - start
	if w.steals.Load() != steals {
		// The task blocked and the worker went on without it: charge
		// its lane no more than the time it held the worker.
		ran = min(ran, int64(w.s.cfg.BlockedAfter))
	}
	w.picker.Charge(id, ran)
	// The lane leaves the ready mask only after its task ran, so that a
	// task queueing its own successor does not count as the lane waking
	// up (which would forfeit the lane's share).
	if w.queued(id) == 0 {
		w.ready = w.ready.Without(id)
	}
	bump(&c.run, 1)
	bump(&c.ran, ran)
	return false
}

// call runs fn, reporting a panic instead of letting it end the goroutine.
func (w *Worker) call(fn func()) {
	defer func() {
		if v := recover(); v != nil {
			w.s.handlePanic(v)
		}
	}()
	fn()
}

func (w *Worker) callHook(h func(*Worker)) {
	defer func() {
		if v := recover(); v != nil {
			w.s.handlePanic(v)
		}
	}()
	h(w)
}

func (w *Worker) callWatch(wt *Watch, events uint32) {
	defer func() {
		if v := recover(); v != nil {
			w.s.handlePanic(v)
		}
	}()
	wt.h(events)
}

// Push queues fn at the tail of lane on this worker. Local: call it only from
// code running on w (use Submit elsewhere). It panics for a lane the
// scheduler's set lacks, as indexing out of range would.
func (w *Worker) Push(lane lanes.ID, fn func()) {
	if fn == nil {
		panic("sched: Push of a nil function")
	}
	w.mustHave(lane)
	defer w.leave(w.enter())
	w.push(lane, task{fn: fn, enq: w.now})
}

// PushFirst queues fn in lane on this worker ahead of the lane's other
// queued work, so that it is the lane's next task: for short work that
// only brings more work into the lane, which then queues in order (a
// listener's accepts, whose connections' first reads queue behind the
// lane). It still waits for the lanes of better priority, as Push does.
// Like Push, it is called only from tasks and coroutines running on this
// worker.
func (w *Worker) PushFirst(lane lanes.ID, fn func()) {
	if fn == nil {
		panic("sched: PushFirst of a nil function")
	}
	w.mustHave(lane)
	defer w.leave(w.enter())
	w.pushAt(lane, task{fn: fn, enq: w.now}, true)
}

// mustHave panics for a lane the scheduler's set lacks (or one with the
// resumed mark, which callers outside the package do not give), as
// indexing out of range would.
func (w *Worker) mustHave(lane lanes.ID) {
	if int(lane) >= w.nlanes {
		panic(fmt.Sprintf("sched: no lane %d (the set has %d)", lane, w.nlanes))
	}
}

func (w *Worker) push(lane lanes.ID, t task) { w.pushAt(lane, t, false) }

// pushAt queues t in lane, at the front of its queue when first is set.
func (w *Worker) pushAt(lane lanes.ID, t task, first bool) {
	id := lane &^ resumed
	w.mustHave(id)
	q := &w.q[id]
	if lane&resumed != 0 {
		q = &w.qr[id]
	}
	if !w.ready.Has(id) {
		w.ready = w.ready.With(id)
		w.picker.Activate(id)
	}
	if first {
		q.pushFront(t)
	} else {
		q.push(t)
	}
	w.stats[id].queued.Store(int64(w.queued(id)))
}

// Submit queues fn in lane on this worker from any goroutine, waking the
// worker if it is parked. It fails before Start, after Stop began, and for an
// unknown lane.
func (w *Worker) Submit(lane lanes.ID, fn func()) error {
	if fn == nil {
		return fmt.Errorf("sched: Submit of a nil function")
	}
	if err := w.s.checkSubmit(lane); err != nil {
		return err
	}
	if !w.pushRemote(&inNode{t: task{fn: fn, enq: w.s.clock()}, lane: lane}) {
		return ErrStopped
	}
	return nil
}

// pushRemote queues a task through the inbox and wakes the worker if it is
// parked; it reports false once the worker has exited.
func (w *Worker) pushRemote(nd *inNode) bool {
	if !w.inbox.push(nd) {
		return false
	}
	w.rouse(false) // a lent worker starts it when its lease ends
	return true
}

// wake rouses the worker if it is parked, its CPU lent or not. Wakeups are coalesced: only the
// producer that moves the worker from parked to notified writes to the
// eventfd. One that finds the worker running relies on the worker's re-check
// of its inbox after it publishes parked. A write that lands after the worker
// woke for another reason costs one spurious wakeup, never a lost one.
func (w *Worker) wake() { w.rouse(true) }

// rouse is wake; with lentToo it also wakes a worker whose CPU is lent
// (Lend), which work merely queued leaves asleep until its lease ends.
func (w *Worker) rouse(lentToo bool) {
	st := w.parkState.Load()
	if st != parkParked && (!lentToo || st != parkLent) {
		return
	}
	w.wakers.Add(1) // close waits for us before it closes the eventfd
	if w.parkState.CompareAndSwap(st, parkNotified) {
		var one = [8]byte{1}
		if _, err := writeFD(w.evfd, one[:]); err != nil && err != syscall.EAGAIN {
			w.s.logger.Error("sched: eventfd write failed", "worker", w.id, "err", err)
		}
	}
	w.wakers.Add(-1)
}

// opDone ends an Await or Offload operation, after its continuation was
// queued. The last one to end while Stop drains wakes the worker, which may
// have parked before the count reached zero.
func (w *Worker) opDone() {
	if w.pending.Add(-1) == 0 && w.s.state.Load() == stateDraining {
		w.wake()
	}
}

func (w *Worker) drainInbox() {
	for nd := w.inbox.take(); nd != nil; {
		next := nd.next
		t, lane := nd.t, nd.lane
		nd.next, nd.t = nil, task{} // a coroutine's node is reused
		w.push(lane, t)
		nd = next
	}
}

func (w *Worker) fireTimers() {
	for w.timers.len() > 0 {
		t := w.timers.min()
		if t.when > w.now {
			return
		}
		w.timers.remove(t)
		w.push(t.lane, task{fn: t.fn, co: t.co, enq: t.when})
	}
}

func (w *Worker) busyStart() {
	w.now = w.s.clock()
	w.busySince.Store(w.now)
	w.isBusy.Store(true)
	w.s.busy.Add(1)
}

func (w *Worker) busyEnd() {
	w.now = w.s.clock()
	w.s.busy.Add(-1)
	w.isBusy.Store(false)
	bump(&w.busyNs, w.now-w.busySince.Load())
}

// park is called when no lane has work. The worker stops counting as busy,
// lets the idle hooks give it work, and otherwise sleeps in epoll_wait until
// its eventfd, a watched descriptor or its next timer wakes it.
func (w *Worker) park(st int32) {
	w.busyEnd()
	if hooks := w.s.hooks.Load(); hooks != nil {
		for _, h := range *hooks {
			w.callHook(h.fn)
		}
		if w.ready != 0 {
			w.busyStart()
			return
		}
	}
	if w.s.cfg.Spin > 0 && w.spin(st) {
		return
	}
	w.parkState.Store(parkParked)
	// Re-check after publishing parked: a producer that saw the worker
	// running has already made its work or the state change visible.
	if w.inbox.nonEmpty() || w.wanted.Load() != 0 || w.s.state.Load() != st || (st == stateDraining && w.drained()) {
		w.parkState.Store(parkRunning)
		w.busyStart()
		return
	}
	timeout := -1
	if w.timers.len() > 0 {
		d := w.timers.min().when - w.s.clock()
		if d <= 0 {
			timeout = 0
		} else {
			timeout = int((d + 999_999) / 1_000_000) // round up: never early
		}
	}
	bump(&w.parks, 1)
	// A guest region suspended on this runner must not look, to the
	// watchdog, as if it slept through the park.
	w.owner.Load().guestSeq.Add(1)
	n, err := epollWait(w.epfd, w.events, timeout)
	w.parkState.Store(parkRunning)
	w.busyStart()
	if err != nil && err != syscall.EINTR {
		w.s.logger.Error("sched: epoll_wait failed", "worker", w.id, "err", err)
		return
	}
	w.dispatch(n)
}

// spin polls for work for up to Config.Spin before the worker sleeps, and
// reports whether work came (the worker is then busy again). Producers see
// the worker running and only push to the inbox, which spin watches.
func (w *Worker) spin(st int32) bool {
	end := w.now + int64(w.s.cfg.Spin)
	// The iteration bound keeps a clock that does not move (a test's)
	// from spinning forever.
	for i := 0; i < 100_000; i++ {
		if w.inbox.nonEmpty() || w.wanted.Load() != 0 || w.s.state.Load() != st {
			w.busyStart()
			return true
		}
		if w.nwatch > 0 {
			n, err := epollWait(w.epfd, w.events, 0)
			if err == nil && n > 0 {
				w.busyStart()
				w.dispatch(n)
				return true
			}
		}
		now := w.s.clock()
		if w.timers.len() > 0 && w.timers.min().when <= now {
			w.busyStart()
			return true
		}
		if now >= end {
			return false
		}
	}
	return false
}

// poll collects ready events without blocking, so that a busy worker still
// serves its descriptors.
func (w *Worker) poll(timeout int) {
	bump(&w.polls, 1)
	n, err := epollWait(w.epfd, w.events, timeout)
	if err != nil {
		return
	}
	w.dispatch(n)
}

func (w *Worker) dispatch(n int) {
	for i := 0; i < n; i++ {
		ev := w.events[i]
		if ev.Fd == eventfdToken {
			var buf [8]byte
			_, _ = readFD(w.evfd, buf[:])
			continue
		}
		if int(ev.Fd) < len(w.watches) {
			if wt := w.watches[ev.Fd]; wt != nil && uint32(ev.Pad) == wt.gen {
				w.callWatch(wt, ev.Events)
			}
		}
	}
}

// finish runs on the owner when its loop ends: drained, or Stop cancelled
// the rest. Coroutines can only be cancelled on their own runner's thread,
// and guest code still out on another runner must come back first, so
// finish may hand the worker on and report false; the runner that closes
// the worker reports true.
func (w *Worker) finish(r *runner) bool {
	for {
		if w.serveWanting(r) {
			return false
		}
		var mine, other *coro
		for c := w.suspended.head; c != nil; c = c.next {
			if c.r == r {
				mine = c
				break
			}
			if other == nil {
				other = c
			}
		}
		switch {
		case mine != nil:
			w.suspended.remove(mine)
			mine.cancel()
		case other != nil && other.r.state.CompareAndSwap(rIdle, rCore):
			w.handTo(r, other.r)
			return false
		case other != nil || w.away.Load() > 0:
			w.waitWanted()
		default:
			w.shutdown(r)
			w.runMu.Lock()
			others := append([]*runner(nil), w.runners...)
			w.runMu.Unlock()
			for _, x := range others {
				if x != r && x.state.CompareAndSwap(rIdle, rCore) {
					x.exit = true
					x.grant <- struct{}{}
				}
			}
			return true
		}
	}
}

// waitWanted sleeps until guest code comes back for the worker (or 50 ms
// pass), while the worker stops.
func (w *Worker) waitWanted() {
	w.parkState.Store(parkParked)
	if w.wanted.Load() == 0 {
		n, err := epollWait(w.epfd, w.events, 50)
		w.parkState.Store(parkRunning)
		if err == nil {
			w.dispatch(n)
		}
		return
	}
	w.parkState.Store(parkRunning)
}

// shutdown runs on the owner as the worker exits: it stops taking remote
// work, cancels suspended coroutines, drops what is still queued, and closes
// the kernel objects.
func (w *Worker) shutdown(r *runner) {
	n := 0
	for nd := w.inbox.seal(); nd != nil; nd = nd.next {
		n++
	}
	for w.suspended.n > 0 {
		c := w.suspended.head
		w.suspended.remove(c)
		c.cancel()
	}
	for i := range w.q {
		n += w.q[i].clear() + w.qr[i].clear()
		w.stats[i].queued.Store(0)
	}
	w.ready = 0
	w.timers.clear()
	bump(&w.dropped, int64(n))
	if w.isBusy.Load() {
		w.busyEnd()
	}
	w.close()
}
