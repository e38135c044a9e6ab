//go:build unix

package bench

import (
	"time"

	"golang.org/x/sys/unix"
)

// selfCPU returns the CPU time (user and system) this process has used.
func selfCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
