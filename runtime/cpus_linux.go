package runtime

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// AffinityCPUs returns the CPUs of the calling thread's affinity mask
// (sched_getaffinity), ascending.
func AffinityCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("runtime: read CPU affinity: %w", err)
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}
