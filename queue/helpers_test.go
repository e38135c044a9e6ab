package queue

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ms = int64(time.Millisecond)

// fakeClock is a settable monotonic clock, safe for concurrent use.
type fakeClock struct{ t atomic.Int64 }

func (c *fakeClock) now() int64        { return c.t.Load() }
func (c *fakeClock) set(t int64)       { c.t.Store(t) }
func (c *fakeClock) add(d int64) int64 { return c.t.Add(d) }
func newQueue(o Config) (*Queue, *fakeClock) {
	c := &fakeClock{}
	o.Clock = c.now
	return New(o), c
}

// log records callbacks in the order they are called.
type log struct {
	mu     sync.Mutex
	events []string
}

func (l *log) addEvent(s string) {
	l.mu.Lock()
	l.events = append(l.events, s)
	l.mu.Unlock()
}

// take returns the events so far and forgets them.
func (l *log) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ev := l.events
	l.events = nil
	return ev
}

// push pushes a fresh entry named name whose callbacks log "start name" or
// "<reason> name", and returns it.
func (l *log) push(q *Queue, name string, c Class) *Entry {
	e := new(Entry)
	q.Push(e, c, func() { l.addEvent("start " + name) }, func(r Reason) { l.addEvent(r.String() + " " + name) })
	return e
}

func always(*Entry) bool { return true }
func never(*Entry) bool  { return false }

// budget returns an admit function that admits n times, like a gate with n
// free slots.
func budget(n int) func(*Entry) bool {
	return func(*Entry) bool {
		if n == 0 {
			return false
		}
		n--
		return true
	}
}

func (l *log) pushArrived(q *Queue, name string, c Class, arrived int64) *Entry {
	e := new(Entry)
	q.PushArrived(e, c, arrived, func() { l.addEvent("start " + name) }, func(r Reason) { l.addEvent(r.String() + " " + name) })
	return e
}
