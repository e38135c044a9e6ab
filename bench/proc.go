package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

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

// selfCPU returns the CPU time (user and system) this process has used.
func selfCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU returns the CPU time (user and system) process pid has used,
// from /proc/PID/stat, or 0 if it cannot be read.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields are counted
	// after its closing parenthesis.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	// /proc reports clock ticks of USER_HZ, 100 per second on Linux.
	return time.Duration(ut+st) * (time.Second / 100)
}
