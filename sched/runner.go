package sched

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/lanes"
)

// A worker is run by one OS thread at a time, its runner. Most of the time
// that is the thread the worker started with. When guest code (see
// Worker.Guest: a handler, typically) holds the runner's thread off the CPU
// for longer than Config.BlockedAfter (a plain http.Get, a mutex, a file
// read), the watchdog hands the worker to a spare runner pinned to the same
// CPU, which goes on with the worker's lanes, inbox, timers and descriptors,
// as Go's sysmon hands a P away from a thread stuck in a system call. The
// old runner keeps the guest code; when that code next touches the worker
// (any local method, Enter, or its end), it waits to get the worker back,
// and from then on it is the runner again.
//
// Exactly one runner owns the worker at a time: it is the one whose state
// is rCore or rGuest, and w.owner points to it. Ownership moves only by a
// channel send on the new owner's grant, so everything the old owner wrote
// happens before what the new one reads.
//
// Coroutines are bound to the thread they were made on (Go refuses to
// switch to a coroutine on another locked thread), so each runner keeps its
// own pool of finished coroutines, and a task that resumes a coroutine runs
// on the coroutine's runner: the owner hands the worker to that runner with
// the task, or, while that runner is away with guest code, keeps the task
// for it until it comes back.

// Runner states.
const (
	rIdle    int32 = iota // waiting in its main loop to be handed the worker
	rCore                 // owns the worker and runs the executor's code
	rGuest                // owns the worker and runs guest code (may lose the worker)
	rAway                 // lost the worker while running guest code
	rWanting              // away, and waiting to be handed the worker back
	rDone                 // retired or exited
)

// runner is one OS thread that can run a worker.
type runner struct {
	w     *Worker
	tid   atomic.Int32
	state atomic.Int32
	// curG is the goroutine of the guest code the runner runs (its own for
	// a plain task, a coroutine's): the identity that Enter checks.
	curG  atomic.Uintptr
	grant chan struct{} // the worker was handed to the runner

	// Written by whoever hands the worker over, read by the runner once
	// the grant arrives.
	next     task // a task of one of its coroutines to run first
	nextLane lanes.ID
	hasNext  bool
	exit     bool

	// Owned by the runner (its coroutines live on its thread).
	idle []*coro
	live int // coroutines of this runner that have not finished

	// Owned by the worker's owner: tasks for this runner's coroutines that
	// came while it was away.
	pending []pendingTask

	// The current guest region, written by the runner, read by the
	// watchdog.
	guestSeq   atomic.Uint64
	guestStart atomic.Int64
	flagged    atomic.Uint64 // guestSeq of a region the watchdog found off the CPU
	goid       atomic.Int64  // the guest goroutine's ID, with Config.BlockedStacks
	// what names the guest region, as Guest was given it (nil for a
	// coroutine resumed inside its region on another occasion); written
	// before the region's state, read by the watchdog once it took the
	// region's worker away.
	what fmt.Stringer
	// quietG is the guest goroutine that said its blocking is by design
	// (Quiet): its hand-overs are neither counted as blocks nor logged.
	quietG atomic.Uintptr

	// The watchdog's own.
	sampleSeq uint64
	sampleAt  int64
	sampleRun int64
}

type pendingTask struct {
	t    task
	lane lanes.ID
}

func newRunner(w *Worker) *runner {
	return &runner{w: w, grant: make(chan struct{}, 1)}
}

// main is the runner's goroutine. The first runner of a worker starts owning
// it; a spare starts when the watchdog hands it a worker. started, when not
// nil, learns whether pinning worked.
func (r *runner) main(first bool, started chan<- error) {
	w := r.w
	s := w.s
	defer s.wg.Done()
	// The lock is never released: when the goroutine exits, Go ends the
	// thread too, so no other goroutine ever inherits its CPU mask.
	runtime.LockOSThread()
	r.tid.Store(int32(gettid()))
	pinErr := w.pin()
	if first {
		if pinErr != nil {
			w.shutdown(r)
			r.retire()
			started <- pinErr
			return
		}
		started <- nil
	} else if pinErr != nil {
		s.logger.Error("sched: spare thread not pinned", "worker", w.id, "err", pinErr)
	}
	owns := first
	for {
		if !owns {
			if !r.wait() {
				return // retired
			}
			if r.exit {
				r.retire()
				return
			}
			w.gained(r)
			if r.hasNext {
				t, lane := r.next, r.nextLane
				r.next, r.hasNext = task{}, false
				if w.runTask(r, lane, t) {
					continue // handed over again
				}
			}
		}
		owns = false
		if !w.run(r) {
			continue // handed over: wait to be given the worker again
		}
		if w.finish(r) {
			r.retire()
			return
		}
	}
}

// pin pins the calling thread to the worker's CPU, if it has one.
func (w *Worker) pin() error {
	if w.cpu < 0 {
		return nil
	}
	if err := pinThread(w.cpu); err != nil {
		return fmt.Errorf("sched: pin worker %d to CPU %d: %w", w.id, w.cpu, err)
	}
	return nil
}

// wait blocks until the runner is handed the worker, and reports false when
// it retired instead: a spare with no coroutine alive retires after
// Config.SpareIdle without work.
func (r *runner) wait() bool {
	idle := r.w.s.cfg.SpareIdle
	for {
		if r.live > 0 {
			<-r.grant
			return true
		}
		t := time.NewTimer(idle)
		select {
		case <-r.grant:
			t.Stop()
			return true
		case <-t.C:
		}
		if r.state.CompareAndSwap(rIdle, rDone) {
			r.retire()
			return false
		}
		// Someone is handing the worker over right now.
	}
}

// retire releases the runner's coroutines, on its own thread, and takes it
// off its worker's list.
func (r *runner) retire() {
	for _, c := range r.idle {
		c.kill()
	}
	r.idle = nil
	r.state.Store(rDone)
	w := r.w
	w.runMu.Lock()
	for i, x := range w.runners {
		if x == r {
			w.runners = append(w.runners[:i], w.runners[i+1:]...)
			break
		}
	}
	w.runMu.Unlock()
	w.s.threads.Add(-1)
}

// gained runs on a runner just handed the worker: the tasks kept for its
// coroutines while it was away go back to their lanes.
func (w *Worker) gained(r *runner) {
	// The runner slept while it did not own the worker: what the watchdog
	// sampled of a guest region before is stale.
	r.guestSeq.Add(1)
	for _, p := range r.pending {
		w.push(p.lane, p.t)
	}
	clear(r.pending)
	r.pending = r.pending[:0]
}

// handTo gives the worker to runner to, whose state the caller has already
// reserved (rIdle to rCore by compare-and-swap, or rWanting). The caller
// owns the worker and stops touching it: runner from goes idle; nil is the
// watchdog, handing over for a runner that is away.
func (w *Worker) handTo(from, to *runner) {
	if from != nil {
		from.state.Store(rIdle)
	}
	to.state.Store(rCore)
	w.owner.Store(to)
	to.grant <- struct{}{}
}

// serveWanting hands the worker to a runner that came back from guest code
// and waits for it, if there is one. It reports whether it did.
func (w *Worker) serveWanting(r *runner) bool {
	w.runMu.Lock()
	if len(w.wants) == 0 {
		w.runMu.Unlock()
		return false
	}
	to := w.wants[0]
	w.wants = append(w.wants[:0], w.wants[1:]...)
	w.wanted.Add(-1)
	w.runMu.Unlock()
	w.handTo(r, to)
	return true
}

// forward runs task t of a coroutine that belongs to another runner: the
// worker goes to that runner with the task, or, if it is away with guest
// code, the task waits for its return. It reports whether the worker was
// handed over.
func (w *Worker) forward(r *runner, lane lanes.ID, t task) bool {
	to := t.co.r
	for {
		switch to.state.Load() {
		case rIdle:
			if !to.state.CompareAndSwap(rIdle, rCore) {
				continue
			}
			to.next, to.nextLane, to.hasNext = t, lane, true
			w.handTo(r, to)
			return true
		case rAway, rWanting:
			to.pending = append(to.pending, pendingTask{t: t, lane: lane})
			return false
		default:
			// The watchdog holds it for a moment as a spare it may not
			// need.
			runtime.Gosched()
		}
	}
}

// Entry is what Worker.Enter returns and Worker.Leave takes back: whether
// the caller was guest code, and which guest region it was in.
type Entry uint64

// enter makes the caller the owner of the worker if it is guest code:
// guest code of the owner switches it to core code (so that the watchdog
// cannot take the worker from under it), and guest code whose runner lost
// the worker waits to get it back. It returns zero for the executor's own
// code (a few atomic loads), and otherwise the guest region's number, with
// which leave makes the caller guest code again.
func (w *Worker) enter() Entry {
	r := w.owner.Load()
	if r == nil {
		return 0
	}
	st := r.state.Load()
	if st == rCore && w.away.Load() == 0 {
		return 0
	}
	g := getg()
	if st == rGuest && r.curG.Load() == g {
		seq := r.guestSeq.Load()
		if r.state.CompareAndSwap(rGuest, rCore) {
			return Entry(seq)
		}
	}
	// Guest code of a runner that lost the worker?
	w.runMu.Lock()
	var away *runner
	for _, x := range w.runners {
		if x.state.Load() == rAway && x.curG.Load() == g {
			away = x
			break
		}
	}
	w.runMu.Unlock()
	if away == nil {
		return 0
	}
	w.rejoin(away)
	return Entry(away.guestSeq.Load())
}

// leave ends what enter began: guest code goes back to being guest code.
// If the runner ran anything else meanwhile (the caller suspended, or came
// back from being away), the region starts afresh for the watchdog.
func (w *Worker) leave(e Entry) {
	if e == 0 {
		return
	}
	r := w.owner.Load()
	if Entry(r.guestSeq.Load()) == e && r.curG.Load() == getg() {
		r.state.Store(rGuest)
		w.s.guestBegins()
		return
	}
	r.what = nil
	r.beGuest(w.now)
}

// beGuest marks the calling goroutine as the guest code the runner runs, as
// of start, and hands its thread to the watchdog's care. The runner owns
// the worker; the caller may be a coroutine resumed inside its guest region
// after the runner ran other guests meanwhile.
func (r *runner) beGuest(start int64) uint64 {
	if r.w.s.cfg.BlockedStacks {
		r.goid.Store(goid())
	}
	r.curG.Store(getg())
	r.guestStart.Store(start)
	seq := r.guestSeq.Add(1)
	r.state.Store(rGuest)
	r.w.s.guestBegins()
	return seq
}

// rejoin waits, on the guest code of runner r, until the worker is handed
// back to r.
func (w *Worker) rejoin(r *runner) {
	w.runMu.Lock()
	r.state.Store(rWanting)
	w.wants = append(w.wants, r)
	w.wanted.Add(1)
	w.runMu.Unlock()
	w.wake()
	<-r.grant
	w.away.Add(-1)
	w.gained(r)
}

// Enter, called from guest code (see Guest) before it touches state that
// belongs to the worker, makes the worker the caller's again: if the
// worker went on without it while it was blocked, Enter waits until the
// worker is handed back. It returns what Leave needs; call them as
//
//	defer w.Leave(w.Enter())
//
// The worker's own local methods (Push, AfterFunc, Watch, Pause, Await, ...)
// do this themselves: Enter is for code that keeps state of its own on the
// worker, such as a server's connections, and exposes it to guest code (a
// response writer). Outside guest code it does nothing.
func (w *Worker) Enter() Entry { return w.enter() }

// Leave ends what Enter began.
func (w *Worker) Leave(e Entry) { w.leave(e) }

// Release, called from guest code (see Guest) that is about to block for
// long, and knows it (a handler that goes on to serve a hijacked connection
// until its client leaves), hands the worker to a spare thread at once,
// as the watchdog would once the code had blocked for BlockedAfter, but
// without that delay, and without counting or logging it as a block: the
// guest code keeps its thread, and takes the worker back when it next
// needs it (Enter, a local method) or returns. It does nothing outside
// guest code, while Enter holds the worker, or when no spare thread can
// be had (Config.MaxSpares); it is local to w.
func (w *Worker) Release() {
	r := w.owner.Load()
	if r == nil || r.state.Load() != rGuest || r.curG.Load() != getg() {
		return
	}
	w.handOver(r, false)
}

// Quiet, called from guest code (see Guest), says that the code blocks by
// design from now on until it returns: a response that streams events and
// waits between them (server-sent events, a long poll). The watchdog still
// hands the worker over whenever the code holds its thread off the CPU for
// BlockedAfter, but neither counts it in Snapshot.Blocked nor logs it: a
// warning to wrap the call in Await would be noise there. It does nothing
// outside guest code; it is local to w.
func (w *Worker) Quiet() {
	r := w.owner.Load()
	g := getg()
	if r == nil || r.curG.Load() != g {
		return
	}
	r.quietG.Store(g)
}

// Guest runs fn as guest code: code that may block the worker's thread
// without releasing it, such as a request handler that calls an SDK
// without Await. While fn runs, the watchdog checks the thread; if fn holds
// it off the CPU (parked by Go, asleep in a system call, waiting for a
// lock) for longer than Config.BlockedAfter, the worker goes on with its
// other work on a spare thread, and fn gets the worker back when it next
// needs it (a local method, Enter) or returns. what names fn in the log
// line that says so (a route, for example); it may be nil.
//
// Guest is local: call it from code running on w. Inside guest code it
// simply runs fn. It reports whether the watchdog found fn holding the
// thread off the CPU (whether or not that was logged, see Quiet): a
// caller that runs the same code again may start it with GoAlone. To learn
// it at once rather than when fn returns, give what a method Blocked():
// the worker runs it, as a task, first thing after the watchdog handed it
// over from fn.
func (w *Worker) Guest(what fmt.Stringer, fn func()) (blocked bool) {
	if e := w.enter(); e != 0 {
		defer w.leave(e)
		fn()
		return false
	}
	r := w.owner.Load()
	if r == nil || r.state.Load() != rCore {
		fn()
		return false
	}
	start := w.now
	r.what = what
	seq := r.beGuest(start)
	defer func() { blocked = w.endGuest(r, what, seq, start) }()
	fn()
	return false
}

// endGuest closes a guest region: the runner takes the worker back, and
// says so in the log if the watchdog found the region off the CPU, which
// it reports.
func (w *Worker) endGuest(r *runner, what fmt.Stringer, seq uint64, start int64) bool {
	if !r.state.CompareAndSwap(rGuest, rCore) {
		w.rejoin(r)
	}
	r.what = nil // what it names may be large: keep none of it
	quiet := r.quietG.CompareAndSwap(getg(), 0)
	f := r.flagged.Load()
	if f == 0 || f < seq {
		return false
	}
	r.flagged.Store(0)
	if !quiet {
		w.reportBlocked(what, time.Duration(w.s.clock()-start))
	}
	return true
}
