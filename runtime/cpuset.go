package runtime

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/sluice-go/sluice/internal/mountinfo"
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
	v1Path, v2Path, hasV1, hasV2 := cpusetCgroup(cg)
	mounts, err := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return false, fmt.Sprintf("no mount information (%v)", err)
	}
	if hasV1 {
		dir, ok := cgroupDir(mounts, "cgroup", "cpuset", v1Path)
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
	dir, ok := cgroupDir(mounts, "cgroup2", "", v2Path)
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

// cpusetCgroup reads /proc/self/cgroup ("ID:controllers:path" lines) and
// returns the path of the v1 hierarchy that has the cpuset controller, if
// any, and the path of the v2 hierarchy ("0::path"), if any.
func cpusetCgroup(b []byte) (v1, v2 string, hasV1, hasV2 bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		id, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		ctrls, p, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(p, "/") {
			continue
		}
		if id == "0" && ctrls == "" {
			v2, hasV2 = p, true
			continue
		}
		for _, c := range strings.Split(ctrls, ",") {
			if c == "cpuset" {
				v1, hasV1 = p, true
			}
		}
	}
	return v1, v2, hasV1, hasV2
}

// cgroupDir finds, in /proc/self/mountinfo, the mount of a cgroup
// hierarchy (fstype "cgroup" with the super option opt, or "cgroup2") whose
// root holds cgroup path p, and returns p's directory under that mount.
// Of several such mounts (bind mounts) the one with the longest root wins.
func cgroupDir(info []byte, fstype, opt, p string) (string, bool) {
	best, bestRoot := "", ""
	found := false
	for _, m := range mountinfo.Parse(info) {
		if m.FSType != fstype || (opt != "" && !m.HasOption(opt)) {
			continue
		}
		root, point := m.Root, m.Point
		rel, ok := under(root, p)
		if !ok || (found && len(root) <= len(bestRoot)) {
			continue
		}
		best, bestRoot, found = path.Join(point, rel), root, true
	}
	return best, found
}

// under returns p relative to root when p is root or below it.
func under(root, p string) (string, bool) {
	root, p = path.Clean(root), path.Clean(p)
	if root == "/" {
		return p, true
	}
	if p == root {
		return "/", true
	}
	if rest, ok := strings.CutPrefix(p, root+"/"); ok {
		return "/" + rest, true
	}
	return "", false
}
