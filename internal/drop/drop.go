// Package drop is the proportional rule that the shedders (package shed)
// and the CPU gate (package gate) share: a reading compared with a band
// [lo, hi] gives a drop probability, and a drop probability gives the
// threshold that a uniform 64-bit random draw is compared with, so that a
// decision is one comparison.
package drop

import "math"

// Probability maps a reading to a drop probability: 0 at or below lo, 1 at
// or above hi (above lo when they are equal), linear in between. It is
// loadshed's proportional rule.
func Probability(v, lo, hi float64) float64 {
	switch {
	case v <= lo:
		return 0
	case v >= hi:
		return 1
	default:
		return (v - lo) / (hi - lo)
	}
}

// Threshold turns a drop probability into the threshold that a uniform
// 64-bit draw is compared with: refuse iff draw < threshold. It is 0 for a
// probability of 0 or less (refuse none) and math.MaxUint64 for 1 or more,
// which a caller takes to refuse all without drawing.
func Threshold(p float64) uint64 {
	switch {
	case p >= 1:
		return math.MaxUint64
	case p > 0:
		return uint64(p*(1<<53)) << 11
	default:
		return 0
	}
}
