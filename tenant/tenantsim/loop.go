package tenantsim

import (
	"time"

	"github.com/sluice-go/sluice/admit"
)

// loop is a discrete-event loop on virtual time. Events run one at a time,
// on the goroutine that calls run, in the order of their times; events due
// at the same time run in the order they were scheduled. Nothing in it
// reads the real clock, so a run is a function of what was scheduled.
type loop struct {
	now  int64 // virtual nanoseconds since the start
	seq  uint64
	heap []*event
	ran  int64 // events run so far
}

// event is something to do at a time. Its zero value, with fire set, is
// ready to schedule; an event is scheduled at most once at a time
// (scheduling it again moves it). Events are embedded in what they act on
// (a request, a tenant's arrival process, a timer), so scheduling one
// allocates nothing.
type event struct {
	at   int64
	seq  uint64
	pos  int // 1 + its index in the heap; 0 when not scheduled
	fire func()
}

// schedule makes e fire at at (now, if at is earlier), moving it if it was
// already scheduled.
func (l *loop) schedule(e *event, at int64) {
	l.seq++
	e.at, e.seq = max(at, l.now), l.seq
	if e.pos != 0 {
		l.up(e.pos - 1)
		l.down(e.pos - 1)
		return
	}
	l.heap = append(l.heap, e)
	e.pos = len(l.heap)
	l.up(len(l.heap) - 1)
}

// after makes e fire d from now.
func (l *loop) after(e *event, d time.Duration) { l.schedule(e, l.now+int64(d)) }

// cancel unschedules e and reports whether it was scheduled.
func (l *loop) cancel(e *event) bool {
	if e.pos == 0 {
		return false
	}
	i := e.pos - 1
	last := len(l.heap) - 1
	l.swap(i, last)
	l.heap[last] = nil
	l.heap = l.heap[:last]
	e.pos = 0
	if i < last {
		l.up(i)
		l.down(i)
	}
	return true
}

// step runs the next event if it is due before until, and reports whether
// it ran one.
func (l *loop) step(until int64) bool {
	if len(l.heap) == 0 || l.heap[0].at >= until {
		return false
	}
	e := l.heap[0]
	l.cancel(e)
	l.now = e.at
	l.ran++
	e.fire()
	return true
}

// run runs every event due before until, then sets the clock to until
// (unless it is already later).
func (l *loop) run(until int64) {
	for l.step(until) {
	}
	l.now = max(l.now, until)
}

// pending returns the number of events scheduled.
func (l *loop) pending() int { return len(l.heap) }

func (l *loop) less(i, j int) bool {
	a, b := l.heap[i], l.heap[j]
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

func (l *loop) swap(i, j int) {
	l.heap[i], l.heap[j] = l.heap[j], l.heap[i]
	l.heap[i].pos, l.heap[j].pos = i+1, j+1
}

func (l *loop) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !l.less(i, parent) {
			return
		}
		l.swap(i, parent)
		i = parent
	}
}

func (l *loop) down(i int) {
	n := len(l.heap)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && l.less(c+1, c) {
			c++
		}
		if !l.less(c, i) {
			return
		}
		l.swap(i, c)
		i = c
	}
}

// timer is a timer on the loop's virtual time: what admit.Host.AfterFunc
// returns in the simulation (admit.Timer).
type timer struct {
	l  *loop
	ev event
}

var _ admit.Timer = (*timer)(nil)

// afterFunc returns a timer that calls f on the loop once d has passed.
func (l *loop) afterFunc(d time.Duration, f func()) *timer {
	t := &timer{l: l, ev: event{fire: f}}
	l.after(&t.ev, d)
	return t
}

// Reset makes the timer fire d from now, and reports whether it was
// pending.
func (t *timer) Reset(d time.Duration) bool {
	was := t.ev.pos != 0
	t.l.after(&t.ev, d)
	return was
}

// Stop stops the timer, and reports whether it was pending.
func (t *timer) Stop() bool { return t.l.cancel(&t.ev) }
