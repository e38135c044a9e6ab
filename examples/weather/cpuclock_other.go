//go:build !(linux || darwin || freebsd)

package weather

import "time"

// cpuNow is the wall clock's time: this system has no thread CPU clock
// here, so the calibration counts wall time, as on a quiet machine.
func cpuNow() time.Duration { return time.Duration(time.Now().UnixNano()) }
