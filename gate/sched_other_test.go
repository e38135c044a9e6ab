//go:build !linux

package gate

import (
	"testing"

	"github.com/sluice-go/sluice/admit"
)

// newSchedSource returns nil: off Linux there is no sched.Scheduler to
// read, and the benchmarks leave out its side.
func newSchedSource(testing.TB, int) admit.Executor { return nil }
