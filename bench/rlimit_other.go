//go:build !unix

package bench

import (
	"errors"
	"fmt"
	"runtime"
)

// FileLimit fails: off Unix there is no RLIMIT_NOFILE to read.
func FileLimit() (uint64, error) {
	return 0, fmt.Errorf("bench: the limit on open files: none on %s (%w)", runtime.GOOS, errors.ErrUnsupported)
}
