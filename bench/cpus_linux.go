package bench

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// maxCPU bounds the CPU numbers a list may name: the size of the kernel
// mask that unix.CPUSet holds.
const maxCPU = len(unix.CPUSet{}) * 64

func cpuSet(cpus []int) unix.CPUSet {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	return set
}

// pinSelf restricts every thread of this process to cpus and sets
// GOMAXPROCS to their number, as the runtime would have chosen had the
// process started with that mask. The returned function gives each thread
// the mask it had before (one started meanwhile, the mask the calling
// thread had) and GOMAXPROCS its old value.
func pinSelf(cpus []int) (restore func() error, err error) {
	var def unix.CPUSet
	if err := unix.SchedGetaffinity(0, &def); err != nil {
		return nil, fmt.Errorf("bench: read CPU affinity: %w", err)
	}
	old := make(map[int]unix.CPUSet)
	// unpin gives each thread its former mask, a thread born since the
	// pin the caller's. A thread that a pinned one starts while a pass
	// runs inherits the pin, and may show in /proc only after the pass has
	// listed the threads, or even after the next pass. So passes repeat
	// until two in a row, a moment apart, find every thread as it should
	// be: once the others are unpinned, new threads inherit no pin, and a
	// clone begun before that has shown itself by then.
	unpin := func() error {
		clean := 0
		for range unpinPasses {
			changed := false
			err := eachThread(func(tid int) error {
				set, ok := old[tid]
				if !ok {
					set = def
				}
				var now unix.CPUSet
				if err := unix.SchedGetaffinity(tid, &now); err == nil && now == set {
					return nil
				}
				changed = true
				return unix.SchedSetaffinity(tid, &set)
			})
			switch {
			case err != nil:
				return err
			case changed:
				clean = 0
			default:
				clean++
			}
			if clean == 2 {
				return nil
			}
			time.Sleep(unpinSettle)
		}
		return fmt.Errorf("threads still pinned after %d passes", unpinPasses)
	}
	pinned := cpuSet(cpus)
	err = eachThread(func(tid int) error {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			return err
		}
		old[tid] = set
		return unix.SchedSetaffinity(tid, &pinned)
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("bench: pin the generator to CPUs %s: %w", FormatCPUList(cpus), err), unpin())
	}
	prev := runtime.GOMAXPROCS(len(cpus))
	return func() error {
		runtime.GOMAXPROCS(prev)
		if err := unpin(); err != nil {
			return fmt.Errorf("bench: unpin the generator: %w", err)
		}
		return nil
	}, nil
}

// How unpin settles: at most unpinPasses passes over the threads, a pause
// of unpinSettle between two.
const (
	unpinPasses = 20
	unpinSettle = time.Millisecond
)

// startOn starts cmd with its affinity mask set to cpus (all CPUs of the
// parent's mask when empty), from the first instruction on: the child is
// forked from a thread given that mask, so its Go runtime sizes GOMAXPROCS
// and sluice its workers from it. The thread gets its mask back after the
// fork; should that fail, it stays locked to a goroutine that ends, and the
// runtime retires it.
func startOn(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		var old unix.CPUSet
		if err := unix.SchedGetaffinity(0, &old); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("read CPU affinity: %w", err)
			return
		}
		set := cpuSet(cpus)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			runtime.UnlockOSThread() // the mask is unchanged
			errc <- fmt.Errorf("pin to CPUs %s: %w", FormatCPUList(cpus), err)
			return
		}
		err := cmd.Start()
		if unix.SchedSetaffinity(0, &old) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}
