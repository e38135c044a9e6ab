//go:build !linux

package runtime

import goruntime "runtime"

// AffinityCPUs returns the CPUs of the calling thread's affinity mask,
// ascending. Off Linux there is no mask to read: it returns every CPU,
// 0 to runtime.NumCPU()-1, and no error.
func AffinityCPUs() ([]int, error) {
	cpus := make([]int, goruntime.NumCPU())
	for i := range cpus {
		cpus[i] = i
	}
	return cpus, nil
}
