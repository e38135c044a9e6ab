package bench

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// renice sets the nice value of every thread of this process; threads
// created later inherit it from the thread that creates them. (On Linux a
// nice value belongs to a thread, not to the process.)
func renice(nice int) error {
	err := eachThread(func(tid int) error { return unix.Setpriority(unix.PRIO_PROCESS, tid, nice) })
	if err != nil {
		return fmt.Errorf("renice: %w", err)
	}
	return nil
}

// eachThread calls f with the id of every thread of this process, passing
// over /proc/self/task again until a pass finds no thread it has not seen
// (a thread the runtime starts meanwhile inherits the nice value and CPU
// mask of the thread that starts it, which may not have been done yet). A
// thread that ended between the listing and f (ESRCH) is skipped.
func eachThread(f func(tid int) error) error {
	seen := make(map[int]bool)
	for pass := 0; pass < 100; pass++ {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		fresh := 0
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || seen[tid] {
				continue
			}
			seen[tid] = true
			fresh++
			if err := f(tid); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("thread %d: %w", tid, err)
			}
		}
		if fresh == 0 {
			return nil
		}
	}
	return errors.New("threads kept appearing")
}
