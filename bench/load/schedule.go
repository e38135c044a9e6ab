package load

import (
	"math"
	"math/rand/v2"
	"time"
)

// Arrival is the law of the gaps between scheduled sends.
type Arrival uint8

const (
	// Constant sends request i at exactly i/Rate after the start (of
	// its phase, with Config.Phases).
	Constant Arrival = iota
	// Poisson draws independent exponential gaps of mean 1/Rate, from a
	// generator seeded with Config.Seed, so that a run is reproducible.
	// With Config.Phases, a gap that would cross into the next phase is
	// discarded and the draw starts over at the boundary with the next
	// phase's rate (exact for a Poisson process whose rate steps there).
	Poisson
)

// String returns the law's name: "constant", "poisson" or "unknown".
func (a Arrival) String() string {
	switch a {
	case Constant:
		return "constant"
	case Poisson:
		return "poisson"
	}
	return "unknown"
}

// schedule yields the send times of an open-loop run as offsets from its
// start, phase after phase. It never looks at the clock: when a request is
// sent does not depend on when earlier ones were answered.
//
// Each phase starts at the exact sum of the durations before it, so no
// rounding accumulates across phases. At a phase boundary, Constant starts
// over with a send at the boundary itself; Poisson discards the gap that
// would cross it and draws anew from the boundary at the next phase's rate.
// By the memorylessness of exponential gaps, that is exactly a Poisson
// process whose rate steps at the boundary.
type schedule struct {
	arrival Arrival
	phases  []Phase
	rng     *rand.Rand
	p       int           // current phase
	base    time.Duration // offset of the start of phase p
	i       int           // requests yielded in phase p (Constant)
	t       float64       // offset in phase p of the last send, in seconds (Poisson)
}

// newSchedule returns the schedule of phases, which must be valid (positive
// finite rates, positive durations, a total that fits a time.Duration).
func newSchedule(a Arrival, phases []Phase, seed uint64) *schedule {
	return &schedule{
		arrival: a,
		phases:  phases,
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
}

// next returns the offset from the start of the next scheduled send, or
// false once the last phase is over.
func (s *schedule) next() (time.Duration, bool) {
	for s.p < len(s.phases) {
		ph := s.phases[s.p]
		var off time.Duration
		switch s.arrival {
		case Poisson:
			s.t += s.rng.ExpFloat64() / ph.Rate
			off = seconds(s.t)
		default:
			// Computed from the index, not summed, so that no
			// rounding error accumulates over a long phase.
			off = seconds(float64(s.i) / ph.Rate)
			s.i++
		}
		if off < ph.Duration {
			return s.base + off, true
		}
		s.base += ph.Duration
		s.p++
		s.i, s.t = 0, 0
	}
	return 0, false
}

// seconds converts sec to a Duration, saturating at the largest one.
func seconds(sec float64) time.Duration {
	if sec >= float64(math.MaxInt64)/1e9 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(sec * 1e9)
}

// lagTracker watches how late the dispatcher starts each request against
// its schedule.
type lagTracker struct {
	limit time.Duration // a request started later than this is late
	max   time.Duration
	late  int64
}

func (l *lagTracker) observe(lag time.Duration) {
	if lag > l.max {
		l.max = lag
	}
	if lag > l.limit {
		l.late++
	}
}
