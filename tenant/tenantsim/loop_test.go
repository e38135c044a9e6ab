package tenantsim

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoopRunsEventsInTimeOrderTiesInSchedulingOrder(t *testing.T) {
	var l loop
	var got []string
	add := func(name string, at int64) {
		l.schedule(&event{fire: func() { got = append(got, name) }}, at)
	}
	add("c", 30)
	add("a", 10)
	add("b1", 20)
	add("b2", 20) // same time: after b1, scheduled first
	add("d", 40)
	l.run(40) // runs what is due before 40
	assert.Equal(t, []string{"a", "b1", "b2", "c"}, got)
	assert.Equal(t, int64(40), l.now)
	assert.Equal(t, 1, l.pending())
	l.run(41)
	assert.Equal(t, []string{"a", "b1", "b2", "c", "d"}, got)
	assert.Equal(t, int64(5), l.ran)
}

func TestLoopEventScheduledInThePastRunsNow(t *testing.T) {
	var l loop
	l.run(100)
	var at int64
	l.schedule(&event{fire: func() { at = l.now }}, 50)
	l.run(101)
	assert.Equal(t, int64(100), at, "an event is never scheduled before now")
}

func TestLoopEventsScheduledByEventsRunInOrder(t *testing.T) {
	var l loop
	var got []int64
	var tick event
	tick.fire = func() {
		got = append(got, l.now)
		if l.now < 50 {
			l.schedule(&tick, l.now+10)
		}
	}
	l.schedule(&tick, 10)
	l.run(1000)
	assert.Equal(t, []int64{10, 20, 30, 40, 50}, got)
}

// TestLoopMatchesASortedReference schedules, moves and cancels random
// events and checks that they fire in the order of a sorted reference.
func TestLoopMatchesASortedReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var l loop
	type ref struct {
		at, seq int64
		id      int
	}
	events := make([]event, 200)
	want := map[int]ref{}
	var seq int64
	var fired []int
	for i := range events {
		events[i].fire = func() { fired = append(fired, i) }
	}
	for range 2000 {
		i := rng.IntN(len(events))
		switch rng.IntN(3) {
		case 0, 1:
			at := rng.Int64N(1000)
			l.schedule(&events[i], at)
			seq++
			want[i] = ref{at, seq, i}
		case 2:
			_, scheduled := want[i]
			assert.Equal(t, scheduled, l.cancel(&events[i]))
			delete(want, i)
		}
	}
	refs := make([]ref, 0, len(want))
	for _, r := range want {
		refs = append(refs, r)
	}
	slices.SortFunc(refs, func(a, b ref) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq)) })
	l.run(1000)
	require.Len(t, fired, len(refs))
	for k, r := range refs {
		assert.Equal(t, r.id, fired[k], "event %d", k)
	}
}

func TestTimerFiresAfterItsDelayAndCanBeResetAndStopped(t *testing.T) {
	var l loop
	var fires []int64
	tm := l.afterFunc(100*time.Nanosecond, func() { fires = append(fires, l.now) })
	l.run(50)
	assert.True(t, tm.Reset(100*time.Nanosecond), "pending: Reset reports it")
	l.run(120)
	assert.Empty(t, fires, "moved to 150")
	l.run(151)
	assert.Equal(t, []int64{150}, fires)
	assert.False(t, tm.Stop(), "fired: nothing to stop")
	assert.False(t, tm.Reset(10*time.Nanosecond), "not pending when reset")
	assert.True(t, tm.Stop())
	l.run(1000)
	assert.Equal(t, []int64{150}, fires, "stopped timers do not fire")

	// Timers of different delays fire in the order of their deadlines.
	var order []string
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"late", 30}, {"early", 10}, {"middle", 20}} {
		l.afterFunc(d.d, func() { order = append(order, d.name) })
	}
	l.run(2000)
	assert.Equal(t, []string{"early", "middle", "late"}, order)
}
