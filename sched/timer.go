package sched

import (
	"time"

	"github.com/sluice-go/sluice/lanes"
)

// Timer is a deadline on one worker. When it expires, its function (or the
// coroutine it wakes) is queued in its lane on that worker, behind the tasks
// already queued there. Timers are owned by their worker: create and stop them
// only from code running on it.
type Timer struct {
	w    *Worker
	when int64
	seq  uint64
	lane lanes.ID
	fn   func()
	co   *coro
	idx  int // position in the heap; -1 when not scheduled
}

// Stop cancels the timer. It reports whether the timer was still pending;
// false means it already fired or was stopped. Call it only on the timer's
// worker.
func (t *Timer) Stop() bool {
	defer t.w.leave(t.w.enter())
	if t.idx < 0 {
		return false
	}
	t.w.timers.remove(t)
	return true
}

// Reset schedules the timer again, to fire d after the worker's current
// time, whether it was pending, stopped or had fired; it saves allocating a
// timer per deadline for something re-armed often, such as a connection's
// idle timeout. A firing already queued before Reset still runs, so fn
// should check that its deadline has really passed. Call it only on the
// timer's worker.
func (t *Timer) Reset(d time.Duration) {
	defer t.w.leave(t.w.enter())
	if t.idx >= 0 {
		t.w.timers.remove(t)
	}
	t.when = t.w.now + int64(d)
	t.w.timers.add(t)
}

// Pending reports whether the timer is set and has not fired. Call it only
// on the timer's worker.
func (t *Timer) Pending() bool { return t.idx >= 0 }

// Deadline returns the timer's deadline on its worker's clock.
func (t *Timer) Deadline() int64 { return t.when }

// AfterFunc queues fn in lane once d has passed. Call it only from code
// running on w.
func (w *Worker) AfterFunc(d time.Duration, lane lanes.ID, fn func()) *Timer {
	defer w.leave(w.enter())
	return w.At(w.now+int64(d), lane, fn)
}

// At queues fn in lane once the worker's clock reaches deadline (see Now).
// Timers with equal deadlines fire in the order they were set. Call it only
// from code running on w.
func (w *Worker) At(deadline int64, lane lanes.ID, fn func()) *Timer {
	defer w.leave(w.enter())
	t := &Timer{w: w, when: deadline, lane: lane, fn: fn}
	w.timers.add(t)
	return t
}

// timerHeap is a binary min-heap ordered by deadline, then by the order the
// timers were added.
type timerHeap struct {
	h   []*Timer
	seq uint64
}

func (h *timerHeap) len() int { return len(h.h) }

func (h *timerHeap) min() *Timer { return h.h[0] }

func (h *timerHeap) less(i, j int) bool {
	a, b := h.h[i], h.h[j]
	return a.when < b.when || (a.when == b.when && a.seq < b.seq)
}

func (h *timerHeap) swap(i, j int) {
	h.h[i], h.h[j] = h.h[j], h.h[i]
	h.h[i].idx = i
	h.h[j].idx = j
}

func (h *timerHeap) add(t *Timer) {
	h.seq++
	t.seq = h.seq
	t.idx = len(h.h)
	h.h = append(h.h, t)
	h.up(t.idx)
}

func (h *timerHeap) remove(t *Timer) {
	i := t.idx
	last := len(h.h) - 1
	if i != last {
		h.swap(i, last)
	}
	h.h[last] = nil
	h.h = h.h[:last]
	t.idx = -1
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
}

func (h *timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *timerHeap) down(i int) bool {
	start := i
	n := len(h.h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > start
}

// clear forgets every timer.
func (h *timerHeap) clear() {
	for _, t := range h.h {
		t.idx = -1
	}
	clear(h.h)
	h.h = h.h[:0]
}
