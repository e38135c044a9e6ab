package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sluice-go/sluice/internal/cgroup"
)

// quotaGroup is the cgroup that holds one target process in a Quota: a
// directory made below this process's own cgroup of the cpu controller.
type quotaGroup struct {
	dir   string
	quota Quota
}

// newQuotaGroup makes a cgroup that allows q, below this process's cgroup
// of the cpu controller: cgroup v1's cpu.cfs_period_us and
// cpu.cfs_quota_us, or v2's cpu.max. It fails, saying what the machine
// lacks, where this process may not make one (it needs root, or a cgroup
// delegated to it).
func newQuotaGroup(q Quota) (*quotaGroup, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	parent, err := cgroup.CPUDir("/")
	if err != nil {
		return nil, fmt.Errorf("bench: a CPU quota needs the cgroup cpu controller: %w", err)
	}
	dir, err := os.MkdirTemp(parent, "sluice-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: a CPU quota needs a cgroup this process may make (run as root, or in a cgroup delegated to it): %w", err)
	}
	g := &quotaGroup{dir: dir, quota: q}
	period, runtime := q.period().Microseconds(), q.runtime().Microseconds()
	switch {
	case exists(filepath.Join(dir, "cpu.cfs_quota_us")):
		err = errors.Join(g.write("cpu.cfs_period_us", strconv.FormatInt(period, 10)),
			g.write("cpu.cfs_quota_us", strconv.FormatInt(runtime, 10)))
	case exists(filepath.Join(dir, "cpu.max")):
		err = g.write("cpu.max", strconv.FormatInt(runtime, 10)+" "+strconv.FormatInt(period, 10))
	default:
		err = fmt.Errorf("bench: the cgroup %s has no CPU quota files: on cgroup v2, enable the cpu controller in its parent's cgroup.subtree_control", dir)
	}
	if err != nil {
		return nil, errors.Join(err, g.remove())
	}
	return g, nil
}

// exists reports whether path names a file.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// write writes value to the group's file name.
func (g *quotaGroup) write(name, value string) error {
	if err := os.WriteFile(filepath.Join(g.dir, name), []byte(value), 0); err != nil {
		return fmt.Errorf("bench: set the CPU quota: %w", err)
	}
	return nil
}

// wrap makes cmd enter the group before it runs: a shell writes its own
// process id to the group's cgroup.procs and then becomes cmd's program,
// so the program's first instruction already runs in the quota.
func (g *quotaGroup) wrap(cmd *exec.Cmd) error {
	sh, err := exec.LookPath("sh")
	if err != nil {
		return fmt.Errorf("bench: a CPU quota starts the target through sh: %w", err)
	}
	args := []string{"sh", "-c", `echo $$ > "$1" && shift && exec "$@"`, "sh", filepath.Join(g.dir, "cgroup.procs"), cmd.Path}
	cmd.Path, cmd.Args = sh, append(args, cmd.Args[1:]...)
	return nil
}

// throttling reads what the quota did to the group so far.
func (g *quotaGroup) throttling() (cgroup.Throttling, error) {
	return cgroup.ReadThrottling(g.dir)
}

// remove removes the group once its processes have gone; the kernel may
// take a moment to see the last one leave.
func (g *quotaGroup) remove() error {
	var err error
	for range 50 {
		if err = os.Remove(g.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("bench: remove the quota's cgroup: %w", err)
}

// CheckQuotas reports whether this process may run targets in CPU quotas
// (Quota): nil when it made and removed a cgroup with one, else what the
// machine lacks.
func CheckQuotas() error {
	g, err := newQuotaGroup(Quota{CPUs: 1})
	if err != nil {
		return err
	}
	return g.remove()
}
