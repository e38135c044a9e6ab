//go:build linux || darwin || freebsd

package weather

import (
	"time"

	"golang.org/x/sys/unix"
)

// cpuNow is the calling thread's CPU time, or the wall clock's time if the
// system will not say.
func cpuNow() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return time.Duration(time.Now().UnixNano())
	}
	return time.Duration(ts.Nano())
}
