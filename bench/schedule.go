package bench

import (
	"math"
	"math/rand/v2"
	"time"
)

// Arrival is the law of the gaps between scheduled sends.
type Arrival uint8

const (
	// Constant sends request i at exactly i/Rate after the start.
	Constant Arrival = iota
	// Poisson draws independent exponential gaps of mean 1/Rate, from a
	// generator seeded with Config.Seed, so that a run is reproducible.
	Poisson
)

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
// start. It never looks at the clock: when a request is sent does not
// depend on when earlier ones were answered.
type schedule struct {
	arrival Arrival
	rate    float64
	rng     *rand.Rand
	i       int     // requests yielded so far (Constant)
	t       float64 // current offset in seconds (Poisson)
}

func newSchedule(a Arrival, rate float64, seed uint64) *schedule {
	return &schedule{
		arrival: a,
		rate:    rate,
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
}

// next returns the offset from the start of the next scheduled send.
func (s *schedule) next() time.Duration {
	var sec float64
	switch s.arrival {
	case Poisson:
		s.t += s.rng.ExpFloat64() / s.rate
		sec = s.t
	default:
		// Computed from the index, not summed, so that no rounding
		// error accumulates over a long run.
		sec = float64(s.i) / s.rate
		s.i++
	}
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
