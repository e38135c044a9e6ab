package queue

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaults(t *testing.T) {
	q := New(Config{})
	assert.Equal(t, int64(100*time.Millisecond), q.timeout)
	assert.Equal(t, int64(5*time.Millisecond), q.target)
	assert.Equal(t, 100*time.Millisecond, q.Detector().Interval())
	assert.Equal(t, 5*time.Millisecond, q.Detector().Target())
	assert.Equal(t, 4096, q.maxLen)
	assert.Equal(t, FIFO, q.order)
	assert.Positive(t, q.Now())

	q = New(Config{Order: 7, MaxLen: -1, Timeout: -1})
	assert.Equal(t, FIFO, q.order)
	assert.Equal(t, 4096, q.maxLen)
	assert.Equal(t, int64(100*time.Millisecond), q.timeout)

	// The short timeout never exceeds the full one.
	q = New(Config{Timeout: 2 * time.Millisecond, Order: CoDel})
	assert.Equal(t, int64(2*time.Millisecond), q.target)

	// The timeout changes live, for entries pushed afterwards.
	q.SetTimeout(time.Second)
	assert.Equal(t, time.Second, q.Timeout())
	assert.Equal(t, int64(5*time.Millisecond), q.target)
	q.SetTimeout(-1)
	assert.Equal(t, DefaultTimeout, q.Timeout())

	// A Detector given replaces Target and Interval.
	d := NewDetector(DetectorConfig{Target: 7 * time.Millisecond, Interval: time.Second})
	q = New(Config{Detector: d, Target: time.Millisecond, Interval: time.Millisecond})
	assert.Same(t, d, q.Detector())
	assert.Equal(t, int64(7*time.Millisecond), q.target)
}

func TestFIFOOrder(t *testing.T) {
	q, clk := newQueue(Config{})
	var l log
	for _, n := range []string{"a", "b", "c", "d"} {
		l.push(q, n, Default)
		clk.add(ms)
	}
	assert.Equal(t, 4, q.Len())
	assert.Equal(t, 0, q.Pump(never))
	assert.Empty(t, l.take())

	assert.Equal(t, 1, q.Pump(budget(1)))
	assert.Equal(t, []string{"start a"}, l.take())
	assert.Equal(t, 3, q.Pump(always))
	assert.Equal(t, []string{"start b", "start c", "start d"}, l.take())
	assert.Equal(t, 0, q.Len())
	assert.Equal(t, 0, q.Pump(always))
}

func TestLIFOOrder(t *testing.T) {
	q, clk := newQueue(Config{Order: LIFO})
	var l log
	for _, n := range []string{"a", "b", "c"} {
		l.push(q, n, Default)
		clk.add(ms)
	}
	assert.Equal(t, 1, q.Pump(budget(1)))
	assert.Equal(t, []string{"start c"}, l.take())
	l.push(q, "d", Default)
	assert.Equal(t, 3, q.Pump(always))
	assert.Equal(t, []string{"start d", "start b", "start a"}, l.take())

	// Under LIFO the oldest entries are the ones that time out.
	l.push(q, "e", Default) // at 3 ms: deadline 103 ms
	clk.add(10 * ms)
	l.push(q, "f", Default) // deadline 113 ms
	clk.set(103 * ms)
	next, ok := q.Expire()
	assert.True(t, ok)
	assert.Equal(t, 113*ms, next)
	assert.Equal(t, []string{"timeout e"}, l.take())
	assert.Equal(t, 1, q.Pump(always))
	assert.Equal(t, []string{"start f"}, l.take())
}

func TestEqualTimestampsKeepArrivalOrder(t *testing.T) {
	// The fake clock stands still: order comes from arrival, not time.
	q, _ := newQueue(Config{})
	var l log
	for _, n := range []string{"a", "b", "c"} {
		l.push(q, n, Default)
	}
	q.Pump(always)
	assert.Equal(t, []string{"start a", "start b", "start c"}, l.take())
}

func TestDeadlineIsExact(t *testing.T) {
	q, clk := newQueue(Config{Timeout: 100 * time.Millisecond})
	var l log
	clk.set(1000)
	l.push(q, "a", Default) // deadline 1000 + 100 ms
	clk.set(1000 + 40*ms)
	l.push(q, "b", Default) // deadline 1000 + 140 ms

	clk.set(1000 + 100*ms - 1)
	next, ok := q.Expire()
	assert.True(t, ok)
	assert.Equal(t, 1000+100*ms, next)
	assert.Empty(t, l.take(), "nothing expires before its deadline")

	clk.set(1000 + 100*ms)
	next, ok = q.Expire()
	assert.Equal(t, []string{"timeout a"}, l.take(), "an entry expires exactly at its deadline")
	assert.True(t, ok)
	assert.Equal(t, 1000+140*ms, next)

	// Pump rejects an expired entry instead of starting it.
	clk.set(1000 + 140*ms)
	assert.Equal(t, 0, q.Pump(always))
	assert.Equal(t, []string{"timeout b"}, l.take())
	_, ok = q.Expire()
	assert.False(t, ok)

	st := q.Stats()
	assert.Equal(t, uint64(2), st.Rejected[Timeout])
	assert.Equal(t, uint64(2), st.Waits)
	assert.Equal(t, 100*time.Millisecond, st.MeanWait())
	assert.Zero(t, Stats{}.MeanWait())
	assert.Equal(t, 200*time.Millisecond, st.WaitTotal)
	assert.Equal(t, 100*time.Millisecond, st.WaitMax)
}

func TestPumpSkipsExpiredAndStartsTheRest(t *testing.T) {
	q, clk := newQueue(Config{})
	var l log
	l.push(q, "a", Default)
	clk.set(50 * ms)
	l.push(q, "b", Sheddable)
	l.push(q, "c", Critical)
	clk.set(100 * ms) // a's deadline; b and c have 50 ms left
	assert.Equal(t, 1, q.Pump(budget(1)))
	assert.Equal(t, []string{"timeout a", "start c"}, l.take())
	assert.Equal(t, 1, q.Pump(always))
	assert.Equal(t, []string{"start b"}, l.take())
}

func TestPriorityClasses(t *testing.T) {
	for _, o := range []Order{FIFO, LIFO, CoDel} {
		t.Run(o.String(), func(t *testing.T) {
			q, clk := newQueue(Config{Order: o})
			var l log
			for _, p := range []struct {
				name string
				c    Class
			}{
				{"s1", Sheddable}, {"d1", Default}, {"c1", Critical}, {"s2", Sheddable},
				{"c2", Critical}, {"d2", Default}, {"x1", 7}, {"x2", 200},
			} {
				l.push(q, p.name, p.c)
				clk.add(ms)
			}
			q.Pump(always)
			want := []string{"start c1", "start c2", "start d1", "start d2", "start s1", "start s2", "start x1", "start x2"}
			if o == LIFO {
				want = []string{"start c2", "start c1", "start d2", "start d1", "start s2", "start s1", "start x2", "start x1"}
			}
			assert.Equal(t, want, l.take())
		})
	}
}

func TestPriorityOneAtATime(t *testing.T) {
	// A gate that opens one slot at a time always gives it to the most
	// important class present, even to one that arrived last.
	q, clk := newQueue(Config{})
	var l log
	l.push(q, "s", Sheddable)
	l.push(q, "d", Default)
	clk.add(ms)
	assert.Equal(t, 1, q.Pump(budget(1)))
	assert.Equal(t, []string{"start d"}, l.take())
	l.push(q, "c", Critical)
	assert.Equal(t, 1, q.Pump(budget(1)))
	assert.Equal(t, []string{"start c"}, l.take())
	assert.Equal(t, 1, q.Pump(budget(1)))
	assert.Equal(t, []string{"start s"}, l.take())
}

func TestFullRejectsAtOnce(t *testing.T) {
	q, _ := newQueue(Config{MaxLen: 3})
	var l log
	for _, n := range []string{"a", "b", "c"} {
		l.push(q, n, Default)
	}
	assert.Empty(t, l.take())
	l.push(q, "d", Default)
	assert.Equal(t, []string{"full d"}, l.take(), "rejected before Push returns")
	l.push(q, "e", Sheddable)
	assert.Equal(t, []string{"full e"}, l.take(), "a less important class evicts nothing")
	assert.Equal(t, 3, q.Len())
	assert.Equal(t, uint64(2), q.Stats().Rejected[Full])
	assert.Equal(t, uint64(0), q.Stats().Waits, "rejected at once: not a wait")
}

func TestEvictionFIFO(t *testing.T) {
	q, clk := newQueue(Config{MaxLen: 3})
	var l log
	l.push(q, "d", Default)
	l.push(q, "s1", Sheddable)
	clk.add(ms)
	l.push(q, "s2", Sheddable)
	assert.Equal(t, 3, q.Len())

	// Under FIFO the newest of the least important class goes first: the
	// one that would have started last.
	l.push(q, "c1", Critical)
	assert.Equal(t, []string{"evicted s2"}, l.take())
	l.push(q, "c2", Critical)
	assert.Equal(t, []string{"evicted s1"}, l.take())
	l.push(q, "c3", Critical)
	assert.Equal(t, []string{"evicted d"}, l.take())
	l.push(q, "c4", Critical)
	assert.Equal(t, []string{"full c4"}, l.take(), "never evicts its own class")
	assert.Equal(t, 3, q.Len())

	q.Pump(always)
	assert.Equal(t, []string{"start c1", "start c2", "start c3"}, l.take())
	st := q.Stats()
	assert.Equal(t, uint64(3), st.Rejected[Evicted])
	assert.Equal(t, uint64(1), st.Rejected[Full])
	assert.Equal(t, uint64(3), st.Started)
	assert.Equal(t, uint64(7), st.Pushes)
}

func TestEvictionLIFO(t *testing.T) {
	q, clk := newQueue(Config{MaxLen: 3, Order: LIFO})
	var l log
	l.push(q, "s1", Sheddable)
	clk.add(ms)
	l.push(q, "s2", Sheddable)
	l.push(q, "s3", Sheddable)
	// Under LIFO the oldest would start last: it goes.
	l.push(q, "d", Default)
	assert.Equal(t, []string{"evicted s1"}, l.take())
	q.Pump(always)
	assert.Equal(t, []string{"start d", "start s3", "start s2"}, l.take())
}

func TestEvictedEntryIsReusableInItsCallback(t *testing.T) {
	q, _ := newQueue(Config{MaxLen: 1})
	var l log
	var e Entry
	pushed := 0
	var reject func(Reason)
	reject = func(r Reason) {
		l.addEvent(r.String() + " e")
		if pushed < 2 {
			pushed++
			q.Push(&e, Sheddable, func() { l.addEvent("start e") }, reject)
		}
	}
	q.Push(&e, Sheddable, func() { l.addEvent("start e") }, reject)
	l.push(q, "c", Critical) // evicts e, whose callback pushes it again: full
	assert.Equal(t, []string{"evicted e", "full e", "full e"}, l.take())
	q.Pump(always)
	assert.Equal(t, []string{"start c"}, l.take())
}

func TestRemove(t *testing.T) {
	q, clk := newQueue(Config{})
	var l log
	a := l.push(q, "a", Default)
	b := l.push(q, "b", Default)
	c := l.push(q, "c", Default)
	clk.add(3 * ms)

	assert.True(t, q.Remove(b))
	assert.False(t, q.Remove(b), "already removed")
	assert.Equal(t, 2, q.Len())
	q.Pump(budget(1))
	assert.Equal(t, []string{"start a"}, l.take())
	assert.False(t, q.Remove(a), "already started")
	assert.True(t, q.Remove(c))
	assert.Equal(t, 0, q.Len())
	assert.False(t, q.Remove(new(Entry)), "never pushed")
	assert.False(t, New(Config{}).Remove(a), "another queue")

	clk.add(time.Second.Nanoseconds())
	_, ok := q.Expire()
	assert.False(t, ok)
	q.Pump(always)
	assert.Empty(t, l.take(), "a removed entry gets no callback")

	// A removed entry may be pushed again.
	q.Push(b, Default, func() { l.addEvent("start b again") }, func(Reason) {})
	q.Pump(always)
	assert.Equal(t, []string{"start b again"}, l.take())

	st := q.Stats()
	assert.Equal(t, uint64(2), st.Removed)
	assert.Equal(t, uint64(2), st.Started)
	assert.Equal(t, uint64(4), st.Waits)
}

func TestRemoveHeadTailAndOnly(t *testing.T) {
	q, _ := newQueue(Config{})
	var l log
	es := []*Entry{l.push(q, "a", Default), l.push(q, "b", Default), l.push(q, "c", Default)}
	assert.True(t, q.Remove(es[2]))
	assert.True(t, q.Remove(es[0]))
	q.Pump(always)
	assert.Equal(t, []string{"start b"}, l.take())
	only := l.push(q, "d", Critical)
	assert.True(t, q.Remove(only))
	assert.Equal(t, 0, q.Pump(always))
	l.push(q, "e", Critical)
	q.Pump(always)
	assert.Equal(t, []string{"start e"}, l.take())
}

func TestClose(t *testing.T) {
	q, clk := newQueue(Config{})
	var l log
	l.push(q, "a", Default)
	l.push(q, "b", Critical)
	l.push(q, "c", Sheddable)
	q.Close()
	assert.ElementsMatch(t, []string{"closed a", "closed b", "closed c"}, l.take())
	assert.Equal(t, 0, q.Len())

	l.push(q, "d", Default)
	assert.Equal(t, []string{"closed d"}, l.take(), "a Push after Close is rejected at once")
	assert.Equal(t, 0, q.Pump(always))
	clk.add(time.Second.Nanoseconds())
	_, ok := q.Expire()
	assert.False(t, ok)
	q.Close()
	assert.Empty(t, l.take())
	assert.Equal(t, uint64(4), q.Stats().Rejected[Closed])
	assert.Equal(t, uint64(3), q.Stats().Waits)
}

func TestPushMisuse(t *testing.T) {
	q, _ := newQueue(Config{})
	var e Entry
	q.Push(&e, Default, func() {}, func(Reason) {})
	assert.PanicsWithValue(t, "queue: Push of an Entry that is already waiting", func() {
		q.Push(&e, Default, func() {}, func(Reason) {})
	})
	assert.Panics(t, func() { q.Push(new(Entry), Default, nil, func(Reason) {}) })
	assert.Panics(t, func() { q.Push(new(Entry), Default, func() {}, nil) })
	assert.Equal(t, 1, q.Len())
	assert.Equal(t, 1, q.Pump(always))
}

// TestStartsWhenGateOpens models the server: a gate with a fixed number of
// slots, requests that end, and a Pump on every end. The waiting head starts
// inside the Pump call that follows the slot's release, with no timer and no
// polling.
func TestStartsWhenGateOpens(t *testing.T) {
	q, _ := newQueue(Config{})
	free := 0 // the gate: slots free
	admit := func(*Entry) bool {
		if free == 0 {
			return false
		}
		free--
		return true
	}
	started := []int{}
	for i := range 3 {
		q.Push(new(Entry), Default, func() { started = append(started, i) }, func(Reason) { t.Fatal("rejected") })
		q.Pump(admit) // the gate is closed: nothing starts
	}
	require.Empty(t, started)

	free++ // a request ends
	n := q.Pump(admit)
	assert.Equal(t, 1, n)
	assert.Equal(t, []int{0}, started, "started before Pump returned")
	assert.Equal(t, 0, free)

	free += 2 // two more end
	q.Pump(admit)
	assert.Equal(t, []int{0, 1, 2}, started)
}

func TestPumpNilUsesOptionsAdmit(t *testing.T) {
	open := false
	q, _ := newQueue(Config{Admit: func(*Entry) bool { return open }})
	var l log
	l.push(q, "a", Default)
	assert.Equal(t, 0, q.Pump(nil))
	open = true
	assert.Equal(t, 1, q.Pump(nil))
	assert.Equal(t, []string{"start a"}, l.take())

	// Without Config.Admit, Pump(nil) only expires.
	q2, clk := newQueue(Config{})
	l.push(q2, "b", Default)
	l.push(q2, "c", Default)
	assert.Equal(t, 0, q2.Pump(nil))
	assert.Empty(t, l.take())
	clk.set(100 * ms)
	assert.Equal(t, 0, q2.Pump(nil))
	assert.Equal(t, []string{"timeout b", "timeout c"}, l.take())
}

func TestAdmitCalledOnlyForAnEntry(t *testing.T) {
	q, clk := newQueue(Config{})
	calls := 0
	admit := func(*Entry) bool { calls++; return true }
	var l log
	l.push(q, "a", Default)
	clk.set(100 * ms)
	l.push(q, "b", Default)
	assert.Equal(t, 1, q.Pump(admit))
	assert.Equal(t, 1, calls, "not for the expired entry, not after the queue emptied")
	assert.Equal(t, []string{"timeout a", "start b"}, l.take())
	assert.Equal(t, 0, q.Pump(admit))
	assert.Equal(t, 1, calls)
}

func TestArm(t *testing.T) {
	var armed []int64
	q, clk := newQueue(Config{Order: CoDel, Arm: func(d int64) { armed = append(armed, d) }})
	var l log
	l.push(q, "a", Default) // deadline 100 ms: the first, armed
	clk.set(50 * ms)
	l.push(q, "b", Default) // 150 ms: later than armed, no call
	assert.Equal(t, []int64{100 * ms}, armed)

	clk.set(100 * ms)
	next, ok := q.Expire() // a expires; Expire reports b's deadline
	assert.True(t, ok)
	assert.Equal(t, 150*ms, next)
	assert.Equal(t, []string{"timeout a"}, l.take())
	assert.Equal(t, []int64{100 * ms, 150 * ms}, armed)

	// Standing at 101 ms (the pipeline's observations say so): a new entry
	// gets the short timeout, earlier than the armed deadline.
	clk.set(101 * ms)
	makeStanding(t, q.Detector(), 101*ms)
	l.push(q, "c", Default)
	assert.Equal(t, []int64{100 * ms, 150 * ms, 106 * ms}, armed)
	clk.set(106 * ms)
	q.Expire()
	assert.Equal(t, []string{"timeout c"}, l.take())
	assert.Equal(t, 150*ms, armed[len(armed)-1])

	// Drained by Pump: the armed deadline (150 ms) is stale but early, so a
	// later Push does not arm, and the Expire at 150 ms re-arms.
	q.Pump(always)
	assert.Equal(t, []string{"start b"}, l.take())
	// Young sojourns for the exit time end the standing state.
	q.Detector().Observe(107*ms, 0)
	require.False(t, q.Detector().Observe(117*ms, 0))
	clk.set(120 * ms)
	l.push(q, "d", Default) // 220 ms
	assert.Equal(t, 150*ms, armed[len(armed)-1])
	clk.set(150 * ms)
	q.Expire()
	assert.Equal(t, 220*ms, armed[len(armed)-1])

	// An Expire that finds the queue empty forgets the armed deadline, so
	// the next Push arms again.
	q.Pump(always)
	assert.Equal(t, []string{"start d"}, l.take())
	n := len(armed)
	_, ok = q.Expire()
	assert.False(t, ok)
	assert.Len(t, armed, n, "nothing to arm for")
	l.push(q, "e", Default)
	assert.Equal(t, []int64{250 * ms}, armed[n:])
	q.Close()
	assert.Equal(t, []string{"closed e"}, l.take())
}

func TestStrings(t *testing.T) {
	assert.Equal(t, "fifo", FIFO.String())
	assert.Equal(t, "lifo", LIFO.String())
	assert.Equal(t, "codel", CoDel.String())
	assert.Equal(t, "order(9)", Order(9).String())
	assert.Equal(t, "timeout", Timeout.String())
	assert.Equal(t, "full", Full.String())
	assert.Equal(t, "evicted", Evicted.String())
	assert.Equal(t, "closed", Closed.String())
	assert.Equal(t, "reason(200)", Reason(200).String())
	assert.Equal(t, "critical", Critical.String())
	assert.Equal(t, "default", Default.String())
	assert.Equal(t, "sheddable", Sheddable.String())
	assert.Equal(t, "class(5)", Class(5).String())
	assert.Equal(t, "0", itoa(0))
	assert.Equal(t, "18446744073709551615", itoa(^uint64(0)))
}

func TestPanickingCallbackStrandsNoOther(t *testing.T) {
	q, clk := newQueue(Config{})
	var l log
	l.push(q, "a", Default)
	q.Push(new(Entry), Default, func() { panic("boom") }, func(Reason) { panic("boom") })
	l.push(q, "c", Default)
	assert.PanicsWithValue(t, "boom", func() { q.Pump(always) })
	assert.Equal(t, []string{"start a", "start c"}, l.take())

	// The same through Expire, with the panic last and first.
	l.push(q, "d", Default)
	q.Push(new(Entry), Default, func() {}, func(Reason) { panic("last") })
	clk.add(100 * ms)
	assert.PanicsWithValue(t, "last", func() { q.Expire() })
	assert.Equal(t, []string{"timeout d"}, l.take())
	q.Push(new(Entry), Default, func() {}, func(Reason) { panic("first") })
	l.push(q, "e", Default)
	assert.PanicsWithValue(t, "first", func() { q.Close() })
	assert.Equal(t, []string{"closed e"}, l.take())
	assert.Equal(t, 0, q.Len())
}

func TestGoexitInCallback(t *testing.T) {
	// runtime.Goexit (t.FailNow, t.SkipNow) in a callback is not turned into
	// a panic, and the other callbacks still run.
	q, _ := newQueue(Config{})
	var l log
	q.Push(new(Entry), Default, func() { runtime.Goexit() }, func(Reason) {})
	l.push(q, "b", Default)
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Pump(always)
		t.Error("Pump returned after Goexit")
	}()
	<-done
	assert.Equal(t, []string{"start b"}, l.take())
}

func TestPushArrivedCountsFromArrival(t *testing.T) {
	q, clk := newQueue(Config{Timeout: 100 * time.Millisecond})
	var l log
	clk.set(int64(time.Second))
	now := clk.now()
	l.push(q, "fresh", Default)
	l.pushArrived(q, "early", Default, now-40*ms)
	l.pushArrived(q, "middle", Default, now-20*ms)
	l.pushArrived(q, "stale", Default, now-100*ms)
	l.pushArrived(q, "future", Default, now+50*ms) // counts as now
	assert.Equal(t, []string{"timeout stale"}, l.take(), "past its deadline on arrival")
	assert.Equal(t, 4, q.Len())

	// FIFO by arrival, not by push.
	assert.Equal(t, 2, q.Pump(budget(2)))
	assert.Equal(t, []string{"start early", "start middle"}, l.take())

	// Deadlines count from arrival too: "fresh" and "future" expire at
	// now+100ms; an entry that arrived 90 ms ago expires at now+10ms.
	l.pushArrived(q, "old", Default, now-90*ms)
	clk.set(now + 10*ms)
	q.Pump(never)
	assert.Equal(t, []string{"timeout old"}, l.take())
	clk.set(now + 100*ms)
	q.Pump(never)
	assert.Equal(t, []string{"timeout fresh", "timeout future"}, l.take())
	st := q.Stats()
	assert.Equal(t, uint64(4), st.Rejected[Timeout], "stale, old, fresh, future")
}

func TestPushArrivedLIFOServesLatestArrival(t *testing.T) {
	q, clk := newQueue(Config{Order: LIFO})
	var l log
	clk.set(int64(time.Second))
	now := clk.now()
	l.pushArrived(q, "b", Default, now-10*ms)
	l.pushArrived(q, "c", Default, now-5*ms)
	l.pushArrived(q, "a", Default, now-30*ms)
	assert.Equal(t, 3, q.Pump(always))
	assert.Equal(t, []string{"start c", "start b", "start a"}, l.take())
}

func TestPumpNStartsAtMostN(t *testing.T) {
	q, clk := newQueue(Config{})
	var l log
	for _, n := range []string{"a", "b", "c"} {
		l.push(q, n, Default)
		clk.add(ms)
	}
	assert.True(t, q.PumpN(1, always) == 1)
	assert.Equal(t, []string{"start a"}, l.take())
	assert.False(t, q.PumpN(1, never) == 1)
	assert.Empty(t, l.take())
	assert.True(t, q.PumpN(1, always) == 1)
	assert.True(t, q.PumpN(1, always) == 1)
	assert.False(t, q.PumpN(1, always) == 1, "empty")
	assert.Equal(t, []string{"start b", "start c"}, l.take())
}
