package lanes

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sim drives a Picker as a worker would: every lane in backlog always has
// work, each picked task costs cost[id] nanoseconds.
type sim struct {
	p       *Picker
	backlog Mask
	runs    [MaxLanes]int
	ns      [MaxLanes]int64
}

func (s *sim) add(id ID) {
	if !s.backlog.Has(id) {
		s.backlog = s.backlog.With(id)
		s.p.Activate(id)
	}
}

func (s *sim) step(cost func(ID) int64) ID {
	id, ok := s.p.Pick(s.backlog)
	if !ok {
		panic("nothing to pick")
	}
	c := cost(id)
	s.p.Charge(id, c)
	s.runs[id]++
	s.ns[id] += c
	return id
}

func flat(ns int64) func(ID) int64 { return func(ID) int64 { return ns } }

func TestBuiltInLanes(t *testing.T) {
	s := NewSet()
	require.Equal(t, 2, s.Len())
	assert.Equal(t, "continuation", s.Name(Continuation))
	assert.Equal(t, "upstream", s.Name(Upstream))
	id, ok := s.Lookup("upstream")
	require.True(t, ok)
	assert.Equal(t, Upstream, id)
	assert.Equal(t, Strict, s.Policy())
	assert.Equal(t, DefaultGuard, s.Guard())
}

func TestRegisterErrors(t *testing.T) {
	s := NewSet()
	_, err := s.Register(Spec{})
	assert.ErrorIs(t, err, ErrBadSpec)
	_, err = s.Register(Spec{Name: "upstream"})
	assert.ErrorIs(t, err, ErrDuplicate)
	_, err = s.Register(Spec{Name: "x", Shares: MaxShares + 1})
	assert.ErrorIs(t, err, ErrBadSpec)
	for i := 2; i < MaxLanes; i++ {
		_, err := s.Register(Spec{Name: fmt.Sprint("l", i)})
		require.NoError(t, err)
	}
	_, err = s.Register(Spec{Name: "one-too-many"})
	assert.ErrorIs(t, err, ErrTooManyLanes)

	s2 := NewSet()
	s2.Freeze()
	_, err = s2.Register(Spec{Name: "late"})
	assert.ErrorIs(t, err, ErrFrozen)
	assert.EqualError(t, err, `lanes: set is in use; register lanes before the runtime starts (registering "late")`)
	assert.ErrorIs(t, s2.SetShares(9, 1), ErrNoSuchLane)
	assert.ErrorIs(t, s2.SetPriority(9, 1), ErrNoSuchLane)
	assert.ErrorIs(t, s2.SetPolicy(Policy(7)), ErrBadSpec)
	_, err = s2.Spec(9)
	assert.ErrorIs(t, err, ErrNoSuchLane)
	assert.True(t, errors.Is(s2.SetShares(Upstream, MaxShares+1), ErrBadSpec))
}

func TestRegisteredLaneDefaults(t *testing.T) {
	s := NewSet()
	id, err := s.Register(Spec{Name: "background", Priority: 2})
	require.NoError(t, err)
	sp, err := s.Spec(id)
	require.NoError(t, err)
	assert.Equal(t, Spec{Name: "background", Priority: 2, Shares: DefaultShares}, sp)
}

func TestStrictContinuationFirst(t *testing.T) {
	s := NewSet()
	sm := &sim{p: NewPicker(s)}
	sm.add(Upstream)
	sm.add(Continuation)
	// Tasks far shorter than the guard: continuation wins every pick.
	for i := 0; i < 1000; i++ {
		require.Equal(t, Continuation, sm.step(flat(100)))
	}
	id, ok := sm.p.Pick(Mask(0).With(Upstream))
	require.True(t, ok)
	assert.Equal(t, Upstream, id)
	_, ok = sm.p.Pick(0)
	assert.False(t, ok)
}

func TestStrictGuardLetsStarvedLaneRun(t *testing.T) {
	s := NewSet()
	s.SetGuard(100 * time.Microsecond)
	sm := &sim{p: NewPicker(s)}
	sm.add(Continuation)
	sm.add(Upstream)
	var order []ID
	for i := 0; i < 100; i++ {
		order = append(order, sm.step(flat(int64(10*time.Microsecond))))
	}
	// 10 µs tasks against a 100 µs guard: upstream gets one task after
	// every 10 or 11 continuation tasks, never fewer, never much more.
	assert.InDelta(t, 100.0/11, float64(sm.runs[Upstream]), 1.5)
	gap := 0
	for _, id := range order {
		if id == Upstream {
			assert.GreaterOrEqual(t, gap, 10)
			assert.LessOrEqual(t, gap, 11)
			gap = 0
		} else {
			gap++
		}
	}

	// Guard off: upstream starves.
	s.SetGuard(0)
	before := sm.runs[Upstream]
	for i := 0; i < 1000; i++ {
		sm.step(flat(int64(10 * time.Microsecond)))
	}
	assert.Equal(t, before, sm.runs[Upstream])
}

func TestSharesWithinPriority(t *testing.T) {
	for _, pol := range []Policy{Strict, Shares} {
		t.Run(pol.String(), func(t *testing.T) {
			s := NewSet()
			require.NoError(t, s.SetPolicy(pol))
			a, err := s.Register(Spec{Name: "a", Priority: 5, Shares: 300})
			require.NoError(t, err)
			b, err := s.Register(Spec{Name: "b", Priority: 5, Shares: 100})
			require.NoError(t, err)
			sm := &sim{p: NewPicker(s)}
			sm.add(a)
			sm.add(b)
			for i := 0; i < 4000; i++ {
				sm.step(flat(1000))
			}
			assert.InDelta(t, 3.0, float64(sm.runs[a])/float64(sm.runs[b]), 0.05)

			// Uneven task costs: shares divide time, not task counts.
			sm2 := &sim{p: NewPicker(s)}
			sm2.add(a)
			sm2.add(b)
			cost := func(id ID) int64 {
				if id == a {
					return 500
				}
				return 4000
			}
			for i := 0; i < 20000; i++ {
				sm2.step(cost)
			}
			assert.InDelta(t, 3.0, float64(sm2.ns[a])/float64(sm2.ns[b]), 0.1)
		})
	}
}

func TestSharesPolicyIgnoresPriority(t *testing.T) {
	s := NewSet()
	require.NoError(t, s.SetPolicy(Shares))
	sm := &sim{p: NewPicker(s)}
	sm.add(Continuation)
	sm.add(Upstream)
	for i := 0; i < 9000; i++ {
		sm.step(flat(1000))
	}
	// ContinuationShares : DefaultShares = 8 : 1.
	assert.InDelta(t, 8.0, float64(sm.runs[Continuation])/float64(sm.runs[Upstream]), 0.1)
}

func TestSetSharesLive(t *testing.T) {
	s := NewSet()
	a, _ := s.Register(Spec{Name: "a", Priority: 3, Shares: 100})
	b, _ := s.Register(Spec{Name: "b", Priority: 3, Shares: 100})
	sm := &sim{p: NewPicker(s)}
	sm.add(a)
	sm.add(b)
	for i := 0; i < 1000; i++ {
		sm.step(flat(1000))
	}
	assert.InDelta(t, 1.0, float64(sm.runs[a])/float64(sm.runs[b]), 0.02)
	require.NoError(t, s.SetShares(a, 400))
	ra, rb := sm.runs[a], sm.runs[b]
	for i := 0; i < 5000; i++ {
		sm.step(flat(1000))
	}
	assert.InDelta(t, 4.0, float64(sm.runs[a]-ra)/float64(sm.runs[b]-rb), 0.1)
}

func TestIdleLaneBanksNoCredit(t *testing.T) {
	s := NewSet()
	a, _ := s.Register(Spec{Name: "a", Priority: 3})
	b, _ := s.Register(Spec{Name: "b", Priority: 3})
	sm := &sim{p: NewPicker(s)}
	sm.add(a)
	for i := 0; i < 1000; i++ { // a runs alone for a long time
		sm.step(flat(1000))
	}
	sm.add(b) // b wakes: it must not get the next 1000 picks
	runsB := 0
	for i := 0; i < 100; i++ {
		if sm.step(flat(1000)) == b {
			runsB++
		}
	}
	assert.InDelta(t, 50, runsB, 2)
}

func TestPriorityChangeLive(t *testing.T) {
	s := NewSet()
	sm := &sim{p: NewPicker(s)}
	sm.add(Continuation)
	sm.add(Upstream)
	require.Equal(t, Continuation, sm.step(flat(1)))
	require.NoError(t, s.SetPriority(Upstream, -1))
	assert.Equal(t, Upstream, sm.step(flat(1)))
}

func TestRebaseKeepsOrder(t *testing.T) {
	s := NewSet()
	a, _ := s.Register(Spec{Name: "a", Priority: 3, Shares: 1})
	b, _ := s.Register(Spec{Name: "b", Priority: 3, Shares: 1})
	p := NewPicker(s)
	p.vrt[a] = rebaseAt - 10
	p.vrt[b] = rebaseAt - 5
	p.Charge(a, 1) // a passes rebaseAt: everything shifts
	assert.Less(t, p.floor, uint64(rebaseAt))
	assert.Equal(t, uint64(vscale-5), p.vrt[a]-p.vrt[b], "differences survive the shift")
	id, _ := p.Pick(Mask(0).With(a).With(b))
	assert.Equal(t, b, id, "b has the smaller virtual runtime after the shift too")
}

func BenchmarkPick(b *testing.B) {
	s := NewSet()
	bg, _ := s.Register(Spec{Name: "background", Priority: 1, Shares: 25})
	p := NewPicker(s)
	ready := Mask(0).With(Continuation).With(Upstream).With(bg)
	for _, id := range []ID{Continuation, Upstream, bg} {
		p.Activate(id)
	}
	b.Run("strict-3-lanes", func(b *testing.B) {
		for b.Loop() {
			id, _ := p.Pick(ready)
			p.Charge(id, 1000)
		}
	})
	b.Run("upstream-tier-2-lanes", func(b *testing.B) {
		r := ready.Without(Continuation)
		for b.Loop() {
			id, _ := p.Pick(r)
			p.Charge(id, 1000)
		}
	})
	b.Run("one-lane", func(b *testing.B) {
		r := Mask(0).With(Upstream)
		for b.Loop() {
			id, _ := p.Pick(r)
			p.Charge(id, 1000)
		}
	})
}

func TestStrictGuaranteesARegisteredLaneItsFloor(t *testing.T) {
	s := NewSet()
	bg, err := s.Register(Spec{Name: "background", Priority: 2, Shares: 11})
	require.NoError(t, err)
	// Upstream always has 1 ms requests; background has 300 µs slices:
	// coarser better tasks than the lane's own, which the floor's balance
	// carries over.
	cost := func(id ID) int64 {
		if id == bg {
			return int64(300 * time.Microsecond)
		}
		return int64(time.Millisecond)
	}
	share := func(sh uint32) float64 {
		require.NoError(t, s.SetShares(bg, sh))
		sm := &sim{p: NewPicker(s)}
		sm.add(Upstream)
		sm.add(bg)
		for range 20000 {
			sm.step(cost)
		}
		return float64(sm.ns[bg]) / float64(sm.ns[bg]+sm.ns[Upstream])
	}
	// shares / (shares + 100): not the guard's one slice per 500 µs
	// (about a quarter here).
	assert.InDelta(t, 11.0/111, share(11), 0.005)
	assert.InDelta(t, 0.20, share(25), 0.005)
	assert.InDelta(t, 0.50, share(100), 0.005)

	// Better lanes that leave room: background takes it all.
	sm := &sim{p: NewPicker(s)}
	sm.add(bg)
	for range 100 {
		assert.Equal(t, bg, sm.step(cost))
	}
}

// A registered lane that ran ahead of its floor, in room the better lanes
// left, takes nothing from them until they have run about FloorWindow.
func TestFloorLetsABusyPeriodRunAfterTheLaneRanAhead(t *testing.T) {
	s := NewSet()
	bg, err := s.Register(Spec{Name: "background", Priority: 2, Shares: 11})
	require.NoError(t, err)
	sm := &sim{p: NewPicker(s)}
	sm.add(bg)
	for range 1000 { // 300 ms alone
		sm.step(flat(int64(300 * time.Microsecond)))
	}
	sm.add(Upstream)
	ran := int64(0)
	for sm.step(flat(int64(time.Millisecond))) == Upstream {
		ran += int64(time.Millisecond)
	}
	assert.InDelta(t, float64(FloorWindow), float64(ran), float64(2*time.Millisecond))
}

// The guard off turns the floors off: better lanes starve worse ones.
func TestGuardOffTurnsFloorsOff(t *testing.T) {
	s := NewSet()
	bg, err := s.Register(Spec{Name: "background", Priority: 2, Shares: 100})
	require.NoError(t, err)
	s.SetGuard(0)
	sm := &sim{p: NewPicker(s)}
	sm.add(Upstream)
	sm.add(bg)
	for range 1000 {
		assert.Equal(t, Upstream, sm.step(flat(1000)))
	}
}

func TestStrictGuardOfUpstreamIgnoresTaskLength(t *testing.T) {
	// Upstream behind Continuation waits the guard alone, however long
	// its last task was.
	s := NewSet()
	s.SetGuard(100 * time.Microsecond)
	sm := &sim{p: NewPicker(s)}
	sm.add(Continuation)
	sm.add(Upstream)
	cost := func(id ID) int64 {
		if id == Upstream {
			return int64(time.Millisecond)
		}
		return int64(10 * time.Microsecond)
	}
	var gaps []int
	gap := 0
	for range 2000 {
		if sm.step(cost) == Upstream {
			gaps = append(gaps, gap)
			gap = 0
		} else {
			gap++
		}
	}
	require.NotEmpty(t, gaps)
	for _, g := range gaps[1:] {
		assert.Contains(t, []int{10, 11}, g)
	}
}
