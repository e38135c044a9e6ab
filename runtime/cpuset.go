package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sluice-go/sluice/internal/cgroup"
)

// exclusiveCPUs reports whether the CPUs of this process's cpuset are its
// own, reading the cgroup files under root ("/" on a live system; a test
// passes a directory laid out the same way), and says why in words.
//
// Only two answers are yes, both set on purpose by whoever placed the
// process:
//
//   - cgroup v2: the process's cgroup's cpuset.cpus.partition reads "root"
//     or "isolated" (a valid partition: its CPUs belong to its subtree
//     alone, taken out of every other cgroup's). The root cgroup has no such
//     file: it is the whole machine, shared with everything on it. A
//     partition that the kernel found invalid reads "root invalid (why)"
//     and does not count; "member", the default, does not either.
//   - cgroup v1: the process's cpuset has cpuset.cpu_exclusive set to 1,
//     and is not the root cpuset. The kernel sets that flag on the root
//     cpuset always, and every process outside a child cpuset runs there;
//     the root is told apart by cpuset.memory_pressure_enabled, a file only
//     it has (so this holds inside a cgroup namespace too, where the
//     process's path reads "/" whatever cgroup it is in). In v1 exclusive
//     means "shared with no sibling cpuset"; tasks left in an ancestor may
//     still run there, which tools that set the flag (cset shield) move out.
//
// Anything else is no: no cpuset hierarchy mounted, files that cannot be
// read or parsed, a path outside the mount.
func exclusiveCPUs(root string) (bool, string) {
	cg, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return false, fmt.Sprintf("no cgroup information (%v)", err)
	}
	paths := cgroup.ParsePaths(cg)
	v1Path, hasV1 := paths.V1["cpuset"]
	v2Path, hasV2 := paths.V2, paths.HasV2
	mounts, err := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return false, fmt.Sprintf("no mount information (%v)", err)
	}
	if hasV1 {
		dir, ok := cgroup.Dir(mounts, "cgroup", "cpuset", v1Path)
		if !ok {
			return false, fmt.Sprintf("cgroup v1 cpuset %s: hierarchy not mounted here", v1Path)
		}
		at := filepath.Join(root, dir)
		if _, err := os.Stat(filepath.Join(at, "cpuset.memory_pressure_enabled")); err == nil {
			return false, fmt.Sprintf("cgroup v1: %s is the root cpuset, shared with the whole machine", dir)
		}
		v, err := readValue(filepath.Join(at, "cpuset.cpu_exclusive"))
		if err != nil {
			return false, fmt.Sprintf("cgroup v1: %v", err)
		}
		if v == "1" {
			return true, fmt.Sprintf("cgroup v1: cpuset %s is cpu_exclusive", dir)
		}
		return false, fmt.Sprintf("cgroup v1: cpuset %s is not cpu_exclusive (%q)", dir, v)
	}
	if !hasV2 {
		return false, "no cpuset cgroup in /proc/self/cgroup"
	}
	dir, ok := cgroup.Dir(mounts, "cgroup2", "", v2Path)
	if !ok {
		return false, fmt.Sprintf("cgroup v2 %s: hierarchy not mounted here", v2Path)
	}
	v, err := readValue(filepath.Join(root, dir, "cpuset.cpus.partition"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, fmt.Sprintf("cgroup v2: %s has no cpuset partition (the root cgroup, or no cpuset controller)", dir)
	case err != nil:
		return false, fmt.Sprintf("cgroup v2: %v", err)
	case v == "root" || v == "isolated":
		return true, fmt.Sprintf("cgroup v2: %s is a cpuset partition (%s)", dir, v)
	default:
		return false, fmt.Sprintf("cgroup v2: %s is not a valid cpuset partition (%q)", dir, v)
	}
}

// readValue returns a cgroup file's content, trimmed.
func readValue(name string) (string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", name, err)
	}
	return string(bytes.TrimSpace(b)), nil
}
