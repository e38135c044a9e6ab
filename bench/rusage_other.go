//go:build !unix

package bench

import "time"

// selfCPU returns 0: without getrusage(2) the load generator's CPU time is
// not measured.
func selfCPU() time.Duration { return 0 }
