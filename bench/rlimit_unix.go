//go:build unix

package bench

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// FileLimit returns this process's limit on open descriptors (the soft
// RLIMIT_NOFILE, which the Go runtime raises to the hard one at start; a
// target's child process has the same).
func FileLimit() (uint64, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("bench: the limit on open files: %w", err)
	}
	return uint64(lim.Cur), nil // an int64 on FreeBSD

}
