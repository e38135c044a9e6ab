//go:build !linux

package bench

import (
	"errors"
	"fmt"
	"runtime"
)

// renice fails: off Linux the nice value of each thread cannot be set.
func renice(int) error {
	return fmt.Errorf("renice: a nice value per thread needs Linux, not %s (%w)", runtime.GOOS, errors.ErrUnsupported)
}
