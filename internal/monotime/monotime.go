// Package monotime is sluice's one default clock: monotonic nanoseconds
// since a starting point, the time base that the executor, the admission
// pipeline, the tenant agents and the metrics all take as an injectable
// func() int64 (tests and simulations give their own).
package monotime

import "time"

// Clock returns a clock reading monotonic nanoseconds since the call.
func Clock() func() int64 {
	epoch := time.Now()
	return func() int64 { return int64(time.Since(epoch)) }
}
