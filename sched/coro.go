package sched

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/sluice-go/sluice/lanes"
)

// What a coroutine tells its worker when it gives control back.
const (
	yDone  uint8 = iota // the job returned; the coroutine is free
	yAwait              // run c.op off the worker, then resume
	ySleep              // resume at c.wakeAt
	yPause              // wait for the resume function Pause handed out
	yYield              // queue the resumption now, behind what waits
)

// Coroutine states, as seen by the worker.
const (
	coIdle uint8 = iota
	coRunning
	coSuspended
	coDead
)

// coro runs sequential code on a worker and can suspend it. It is built on
// iter.Pull: the worker resumes it with pull and it gives control back with
// yield, in about 100 ns and without a Go scheduler round trip. A coroutine
// created on a locked thread may only ever be resumed on that thread, which
// is why a coroutine never leaves its worker, nor the runner thread that
// made it (see runner.go). Finished coroutines are kept for reuse, so
// starting one costs no goroutine creation.
type coro struct {
	w     *Worker
	r     *runner
	pull  func() (uint8, bool)
	stop  func()
	yield func(uint8) bool
	g     uintptr // the coroutine's goroutine, to tell it from others

	fn       func(context.Context)
	ctx      *coCtx
	gen      uint64
	state    uint8
	canceled bool
	lane     lanes.ID // where it resumes (resumeLane of the lane it started in)

	op     func() // what Await runs off the worker
	wakeAt int64  // Sleep's deadline
	timer  *Timer
	woke   bool   // Sleep ended by its context rather than its timer
	sleeps uint64 // counts Sleep calls, to match a context's wake-up to its Sleep
	pauses uint64 // counts Pause calls, to match a resume to its Pause
	paused bool   // in Pause, not yet resumed

	prev, next *coro  // in the worker's list of suspended coroutines
	node       inNode // to queue its resumption through the inbox
}

func newCoro(w *Worker, r *runner) *coro {
	c := &coro{w: w, r: r}
	c.pull, c.stop = iter.Pull(c.body)
	return c
}

func (c *coro) body(yield func(uint8) bool) {
	c.yield = yield
	c.g = getg()
	for {
		c.runJob()
		if !yield(yDone) {
			return
		}
	}
}

func (c *coro) runJob() {
	defer func() {
		if v := recover(); v != nil {
			c.w.s.handlePanic(v)
		}
	}()
	c.fn(c.ctx)
}

// suspend gives control back to the worker with kind and reports whether
// the coroutine was resumed normally (false: the scheduler cancelled it).
func (c *coro) suspend(kind uint8) bool {
	if c.canceled {
		return false
	}
	if !c.yield(kind) {
		c.canceled = true
		return false
	}
	return true
}

// cancel ends a suspended coroutine: its pending Await or Sleep returns
// ErrStopped and its job runs to the end, synchronously, on this worker.
func (c *coro) cancel() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.canceled = true
	c.kill()
}

func (c *coro) kill() {
	c.state = coDead
	c.stop()
}

// free counts a coroutine of r's that has finished its job for good.
func (r *runner) free() { r.live-- }

// coCtx is the context a coroutine's job receives; it lets Await find the
// coroutine. gen guards against a context kept after its job ended.
type coCtx struct {
	context.Context
	c   *coro
	gen uint64
}

// JobContext is room for the context that a coroutine's job receives, for
// a caller that allocates an object per job anyway: embed a JobContext in
// it, set its Parent, and pass it as the context of Go or GoNow, and the
// coroutine's start allocates nothing for the job's context, which then
// lives in the JobContext (otherwise the start allocates it). A JobContext
// serves one job: starting a second job with it panics, and the next job
// needs a new one, because code that kept the first job's context must not
// be able to suspend the second. As a context, it is its Parent.
type JobContext struct {
	// Parent is the context the job's context derives from; nil is
	// context.Background.
	Parent context.Context
	x      coCtx
}

func (j *JobContext) parent() context.Context {
	if j.Parent == nil {
		return context.Background()
	}
	return j.Parent
}

// Deadline returns Parent's deadline.
func (j *JobContext) Deadline() (time.Time, bool) { return j.parent().Deadline() }

// Done returns Parent's Done channel.
func (j *JobContext) Done() <-chan struct{} { return j.parent().Done() }

// Err returns Parent's error.
func (j *JobContext) Err() error { return j.parent().Err() }

// Value returns Parent's value for key.
func (j *JobContext) Value(key any) any { return j.parent().Value(key) }

// take makes j the context of c's current job.
func (j *JobContext) take(c *coro) *coCtx {
	j.x = coCtx{Context: j.parent(), c: c, gen: c.gen}
	return &j.x
}

type coKey struct{}

func (x *coCtx) Value(k any) any {
	if k == (coKey{}) {
		return x
	}
	return x.Context.Value(k)
}

// current returns the coroutine that may suspend for ctx, or nil when the
// caller is not that coroutine's own code: a plain task, another goroutine
// holding the context, or a job that has ended.
func current(ctx context.Context) *coro {
	x, _ := ctx.Value(coKey{}).(*coCtx)
	if x == nil {
		return nil
	}
	c := x.c
	// Compare goroutines first: only the coroutine itself may read the
	// fields the worker writes. A coroutine that Stop cancelled is
	// returned too (its state is coDead), so that its waits fail fast.
	if getg() != c.g || c.gen != x.gen || (c.state != coRunning && !c.canceled) {
		return nil
	}
	return c
}

// Go queues fn in lane on this worker, to run as a coroutine: when it is
// picked, fn starts on the worker with a context derived from ctx, and every
// Await, Sleep, Pause or Yield inside it releases the worker and resumes fn
// on the same worker: in the Continuation lane when lane is a built-in one,
// and in lane itself when it is a registered lane, whose resumptions run
// before its new work (as Continuation runs before Upstream). Local: call it
// only on w (use Scheduler.Go elsewhere).
func (w *Worker) Go(ctx context.Context, lane lanes.ID, fn func(ctx context.Context)) {
	if fn == nil {
		panic("sched: Go of a nil function")
	}
	w.mustHave(lane)
	if ctx == nil {
		ctx = context.Background()
	}
	defer w.leave(w.enter())
	w.push(lane, task{fn: func() { w.start(ctx, fn, resumeLane(lane)) }, enq: w.now})
}

// GoAlone is Go for a job expected to hold its thread for long: a handler
// that blocks without Await (a route found blocking before), or one that
// waits between the writes of a stream. Its coroutine is made on a runner
// thread with no other unfinished coroutine (an idle spare, or a new one
// within Config.MaxSpares), so that when the job blocks and the worker
// goes on without that thread, no other coroutine is left waiting for the
// thread to come back: a coroutine resumes only on the thread that made
// it. Starting it that way costs a hand-over of the worker to that thread;
// when no such runner can be had, it is Go. Local: call it only on w.
func (w *Worker) GoAlone(ctx context.Context, lane lanes.ID, fn func(ctx context.Context)) {
	w.GoAloneWhile(ctx, lane, fn, always)
}

// GoAloneWhile is GoAlone for a job whose need of a thread of its own may
// be learned while it waits in its lane: alone is asked, on w, as the job
// starts, and when it reports false the job starts as Go's would, on the
// worker's current thread. A server starts the first requests of a route
// it does not know yet alone; once one of them has shown the route to
// wait without holding its thread (a WebSocket taken over, a stream), the
// others of a burst need no thread each. Local: call it only on w.
func (w *Worker) GoAloneWhile(ctx context.Context, lane lanes.ID, fn func(ctx context.Context), alone func() bool) {
	if fn == nil {
		panic("sched: GoAlone of a nil function")
	}
	if alone == nil {
		panic("sched: GoAloneWhile with a nil alone")
	}
	w.mustHave(lane)
	if ctx == nil {
		ctx = context.Background()
	}
	defer w.leave(w.enter())
	w.push(lane, task{fn: func() { w.start(ctx, fn, resumeLane(lane)) }, enq: w.now, alone: alone})
}

// always reports true: GoAlone's job always starts alone.
func always() bool { return true }

// GoNow starts fn as a coroutine at once, inside the current task, and
// returns when fn first suspends (Await, Sleep, Pause) or ends; what follows
// a suspension runs in the Continuation lane as with Go. It saves the queue
// hop of Go when the caller has already decided that fn runs now, for
// example a server starting a request's handler. Local: call it only on w,
// from a task or callback (not from a coroutine, which would nest).
func (w *Worker) GoNow(ctx context.Context, fn func(ctx context.Context)) {
	if fn == nil {
		panic("sched: GoNow of a nil function")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	defer w.leave(w.enter())
	w.start(ctx, fn, lanes.Continuation)
}

// start runs fn as a coroutine now; it resumes in lane (a resumeLane).
func (w *Worker) start(ctx context.Context, fn func(context.Context), lane lanes.ID) {
	j, _ := ctx.(*JobContext)
	if j != nil && j.x.c != nil {
		panic("sched: a JobContext serves one job; use a new one")
	}
	r := w.owner.Load()
	var c *coro
	if n := len(r.idle); n > 0 {
		c = r.idle[n-1]
		r.idle[n-1] = nil
		r.idle = r.idle[:n-1]
	} else {
		c = newCoro(w, r)
	}
	r.live++
	c.gen++
	c.fn, c.lane = fn, lane
	if j != nil {
		c.ctx = j.take(c)
	} else {
		c.ctx = &coCtx{Context: ctx, c: c, gen: c.gen}
	}
	w.resume(c)
}

// resume runs c until it finishes its job or suspends again. It runs on
// c's runner, which owns the worker; c gives control back only through
// suspend or the end of its job, after any guest code in it has got the
// worker back.
func (w *Worker) resume(c *coro) {
	if c.state == coDead {
		return
	}
	c.state = coRunning
	kind, ok := c.pull()
	r := c.r
	if !ok {
		c.state = coDead
		r.free()
		return
	}
	switch kind {
	case yDone:
		c.state = coIdle
		c.gen++
		c.fn, c.ctx, c.canceled = nil, nil, false
		r.free()
		if len(r.idle) < w.s.cfg.IdleCoroutines {
			r.idle = append(r.idle, c)
		} else {
			c.kill()
		}
	case yAwait:
		c.state = coSuspended
		w.suspended.add(c)
		w.pending.Add(1)
		go w.runOp(c)
	case ySleep:
		c.state = coSuspended
		w.suspended.add(c)
		c.timer = &Timer{w: w, when: c.wakeAt, lane: c.lane, co: c}
		w.timers.add(c.timer)
	case yPause:
		c.state = coSuspended
		w.suspended.add(c)
	case yYield:
		c.state = coSuspended
		w.suspended.add(c)
		w.push(c.lane, task{co: c, enq: w.s.clock()})
	}
}

// runOp runs a coroutine's operation off the worker, then queues its
// resumption on its worker (see resumeLane).
func (w *Worker) runOp(c *coro) {
	c.op()
	c.node.t, c.node.lane = task{co: c, enq: w.s.clock()}, c.lane
	w.pushRemote(&c.node)
	w.opDone()
}

// Await runs op and returns its results. Called from a coroutine's own code
// (see Worker.Go), it first releases the worker: op runs on another
// goroutine, the worker serves other work or parks (and so stops counting as
// busy), and the caller resumes on the same worker in the Continuation lane,
// ahead of upstream work. Called anywhere else (a plain task, a goroutine, a
// context that did not come from a coroutine) it runs op in place: the
// caller keeps its thread busy, which is the isolated model and never a
// deadlock. If the scheduler is cancelled while op runs, Await returns
// ErrStopped and op's results are discarded. A panic in op is raised again
// in the caller.
func Await[T any](ctx context.Context, op func(context.Context) (T, error)) (T, error) {
	c := current(ctx)
	if c == nil {
		return op(ctx)
	}
	if c.canceled {
		var zero T
		return zero, ErrStopped
	}
	var (
		r   T
		err error
		p   any
	)
	c.op = func() {
		defer func() { p = recover() }()
		r, err = op(ctx)
	}
	e := c.w.enter()
	ok := c.suspend(yAwait)
	c.w.leave(e)
	if !ok {
		var zero T
		return zero, ErrStopped
	}
	c.op = nil
	if p != nil {
		panic(p)
	}
	return r, err
}

// Sleep pauses for d or until ctx ends, whichever comes first, returning
// ctx's error in the second case. In a coroutine it uses the worker's timer
// and releases the worker meanwhile; elsewhere it blocks the caller.
func Sleep(ctx context.Context, d time.Duration) error {
	c := current(ctx)
	if c == nil {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if c.canceled {
		return ErrStopped
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	w := c.w
	defer w.leave(w.enter())
	c.wakeAt = w.now + int64(d)
	c.woke = false
	var stopAfter func() bool
	if ctx.Done() != nil {
		// When ctx ends first, a task on the worker stops the timer and
		// resumes the coroutine; whichever of the two runs first wins.
		c.sleeps++
		seq := c.sleeps
		stopAfter = context.AfterFunc(ctx, func() {
			w.pushRemote(&inNode{lane: lanes.Continuation, t: task{fn: func() {
				// seq: a later Sleep of the same coroutine is not ours.
				if c.sleeps == seq && c.timer != nil && c.timer.Stop() {
					c.woke = true
					w.push(c.lane, task{co: c, enq: w.now})
				}
			}, enq: w.s.clock()}})
		})
	}
	ok := c.suspend(ySleep)
	c.timer = nil
	if stopAfter != nil {
		stopAfter()
	}
	if !ok {
		return ErrStopped
	}
	if c.woke {
		return ctx.Err()
	}
	return nil
}

// ErrNotCoroutine is returned by Pause outside a coroutine's own code.
var ErrNotCoroutine = errors.New("sched: not called from the coroutine of this context")

// InCoroutine reports whether the caller is the running coroutine that ctx
// belongs to (see Worker.Go), that is, whether Await, Sleep and Pause with
// ctx would release the worker rather than block in place.
func InCoroutine(ctx context.Context) bool { return current(ctx) != nil }

// Pause suspends the calling coroutine until the resume function it hands to
// arm is called, releasing the worker meanwhile: the building block for
// waiting on events of the worker itself, such as a socket becoming readable
// or a write completing. arm runs at once, on the worker; resume is local
// (call it on the same worker, typically from a readiness or completion
// callback), queues the coroutine in the Continuation lane, and does nothing
// when called again or after the pause ended. A resume called inside arm
// makes Pause return without suspending.
//
// Pause returns ErrNotCoroutine outside the coroutine that ctx belongs to
// (the caller must then wait some other way) and ErrStopped when the
// scheduler cancels the coroutine. It does not watch ctx: arm what should end
// the wait.
func Pause(ctx context.Context, arm func(resume func())) error {
	c := current(ctx)
	if c == nil {
		return ErrNotCoroutine
	}
	if c.canceled {
		return ErrStopped
	}
	w := c.w
	defer w.leave(w.enter())
	c.pauses++
	seq := c.pauses
	c.paused = true
	arm(func() {
		if c.pauses != seq || !c.paused {
			return
		}
		c.paused = false
		if c.state == coSuspended {
			w.push(c.lane, task{co: c, enq: w.now})
		}
	})
	if !c.paused {
		return nil
	}
	if !c.suspend(yPause) {
		c.paused = false
		return ErrStopped
	}
	return nil
}

// Yield lets the worker run what waits before the calling coroutine goes
// on: the coroutine is queued behind the work already queued in the lane it
// resumes in (see Worker.Go), and the worker picks its next task by the
// lanes' priorities and shares, as for any task. A handler that computes for
// long calls it between slices of its work (every few hundred
// microseconds): the worker can serve better lanes meanwhile, and the
// handler's lane is charged only for the slices it ran. The executor cannot
// preempt a coroutine, so a handler that never yields holds its worker
// until it ends, whatever its lane's shares.
//
// Outside a coroutine's own code (a plain task, a goroutine, net/http)
// Yield returns nil at once, so code shared with other servers may call it.
// It returns ErrStopped when the scheduler cancels the coroutine.
func Yield(ctx context.Context) error {
	c := current(ctx)
	if c == nil {
		return nil
	}
	if c.canceled {
		return ErrStopped
	}
	w := c.w
	defer w.leave(w.enter())
	if !c.suspend(yYield) {
		return ErrStopped
	}
	return nil
}

// Offload runs op on another goroutine, then then on this worker in the
// Continuation lane: the explicit-callback form of Await, for code that is
// not a coroutine. Local: call it only on w. A panic in op is reported like a
// task's, and then still runs.
func (w *Worker) Offload(op func(), then func()) {
	defer w.leave(w.enter())
	w.pending.Add(1)
	go func() {
		w.call(op)
		w.pushRemote(&inNode{lane: lanes.Continuation, t: task{fn: then, enq: w.s.clock()}})
		w.opDone()
	}()
}

// coroList is an intrusive list of suspended coroutines, so that Stop can
// cancel them all; adding and removing cost a few pointer writes.
type coroList struct {
	head *coro
	n    int
}

func (l *coroList) add(c *coro) {
	c.prev, c.next = nil, l.head
	if l.head != nil {
		l.head.prev = c
	}
	l.head = c
	l.n++
}

func (l *coroList) remove(c *coro) {
	if c.prev != nil {
		c.prev.next = c.next
	} else if l.head == c {
		l.head = c.next
	} else {
		return // not in the list
	}
	if c.next != nil {
		c.next.prev = c.prev
	}
	c.prev, c.next = nil, nil
	l.n--
}
