//go:build !linux

package bench

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
)

// maxCPU bounds the CPU numbers a list may name, as on Linux.
const maxCPU = 1024

// errNoAffinity is the error of pinning off Linux. It wraps
// errors.ErrUnsupported.
var errNoAffinity = fmt.Errorf("bench: pinning to CPUs needs Linux (sched_setaffinity), not %s (%w)", runtime.GOOS, errors.ErrUnsupported)

// pinSelf fails: off Linux a process cannot pin its threads.
func pinSelf([]int) (restore func() error, err error) { return nil, errNoAffinity }

// startOn starts cmd; off Linux it fails when cpus asks for a mask.
func startOn(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) > 0 {
		return errNoAffinity
	}
	return cmd.Start()
}
