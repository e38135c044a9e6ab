package runtime

import (
	"fmt"
	"math"
	goruntime "runtime"

	"go.uber.org/automaxprocs/maxprocs"
)

// CPUInfo is what the process may use, as New sees it.
type CPUInfo struct {
	// Allowed lists the CPUs of the process's affinity mask, ascending.
	Allowed []int
	// Quota is the cgroup CPU quota in CPUs (for example 1.5), or 0 when
	// no quota applies (or when the GOMAXPROCS environment variable is
	// set, which automaxprocs honours instead of reading the quota).
	Quota float64
	// Exclusive reports that the process's cpuset is its own: a valid
	// cgroup v2 cpuset partition ("root" or "isolated"), or a cgroup v1
	// cpuset other than the root one with cpu_exclusive set. Only then
	// does New pin the workers by default; see the package documentation.
	Exclusive bool
	// ExclusiveReason says in words what the cgroup files said, for logs
	// and reports (for example "cgroup v2: /sys/fs/cgroup/app is a cpuset
	// partition (root)").
	ExclusiveReason string
}

// Usable returns how many CPUs' worth of work the process may do at once:
// the size of the affinity mask, lowered to the quota rounded to the
// nearest whole CPU, halves up (never below one). A quota of 1.5 gives two
// workers, which use all of it and are throttled a quarter of each period
// once both are busy; 1.4 gives one, as a second would be held off the CPU
// 30% of each period for 0.4 CPU more.
func (c CPUInfo) Usable() int {
	n := len(c.Allowed)
	if c.Quota > 0 {
		q := max(1, int(math.Floor(c.Quota+0.5)))
		n = min(n, q)
	}
	return max(1, n)
}

// DetectCPUs reads the calling thread's affinity mask (AffinityCPUs), the
// cgroup CPU quota (through go.uber.org/automaxprocs) and whether the
// process's cpuset is exclusive (CPUInfo.Exclusive, from the cgroup files
// under /proc/self and the cgroup mounts).
func DetectCPUs() (CPUInfo, error) { return detectCPUs("/") }

// detectCPUs is DetectCPUs with the cgroup files read under root instead
// of "/", for tests.
func detectCPUs(root string) (CPUInfo, error) {
	var info CPUInfo
	var err error
	if info.Allowed, err = AffinityCPUs(); err != nil {
		return info, err
	}
	// automaxprocs has no read-only call: capture the quota through its
	// rounding hook, then undo the GOMAXPROCS change it makes.
	quota := 0.0
	undo, err := maxprocs.Set(
		maxprocs.Logger(func(string, ...any) {}),
		maxprocs.RoundQuotaFunc(func(q float64) int {
			quota = q
			return max(1, int(math.Floor(q)))
		}),
	)
	if undo != nil {
		undo()
	}
	if err != nil {
		return info, fmt.Errorf("runtime: read CPU quota: %w", err)
	}
	info.Quota = quota
	info.Exclusive, info.ExclusiveReason = exclusiveCPUs(root)
	return info, nil
}

// goProcsFor is the GOMAXPROCS the runtime asks for by default with n
// workers: one P per worker plus max(1, n/2) more. Each worker holds a P
// while it runs; the extra Ps keep Go's own goroutines (the garbage
// collector, timers, the operations that Await runs off the workers) from
// waiting for a worker to park. It stays near the usual 25% garbage-collector
// share: with 2 workers GOMAXPROCS is 3.
func goProcsFor(workers int) int { return workers + max(1, workers/2) }

func currentProcs() int { return goruntime.GOMAXPROCS(0) }
