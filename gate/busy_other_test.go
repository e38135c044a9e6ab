//go:build !linux

package gate

import "testing"

// newSchedSource returns nil: the executor exists only on Linux.
func newSchedSource(testing.TB, int) BusySource { return nil }
