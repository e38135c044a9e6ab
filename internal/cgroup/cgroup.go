// Package cgroup finds this process's cgroups and reads what the runtime
// needs of them: the cpuset (runtime: whether its CPUs are its own), the
// CPU controller's throttling (sched: how long a CPU quota held the
// process) and where the memory controller is (gate's memory gate). It reads cgroup v1 and v2, under a root directory ("/" on a
// live system; a test passes a directory laid out the same way).
package cgroup

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-go/sluice/internal/mountinfo"
)

// Paths are the process's cgroup paths, from /proc/self/cgroup
// ("ID:controllers:path" lines).
type Paths struct {
	// V1 maps each v1 controller to the path of its hierarchy's cgroup.
	V1 map[string]string
	// V2 is the path in the unified hierarchy ("0::path"), when HasV2.
	V2    string
	HasV2 bool
}

// ParsePaths parses /proc/self/cgroup.
func ParsePaths(b []byte) Paths {
	p := Paths{V1: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		id, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		ctrls, cg, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(cg, "/") {
			continue
		}
		if id == "0" && ctrls == "" {
			p.V2, p.HasV2 = cg, true
			continue
		}
		for c := range strings.SplitSeq(ctrls, ",") {
			if c != "" {
				p.V1[c] = cg
			}
		}
	}
	return p
}

// Dir finds, in /proc/self/mountinfo's content, the mount of a cgroup
// hierarchy (fstype "cgroup" with the super option opt, or "cgroup2")
// whose root holds cgroup path p, and returns p's directory under that
// mount. Of several such mounts (bind mounts) the one with the longest
// root wins.
func Dir(info []byte, fstype, opt, p string) (string, bool) {
	best, bestRoot := "", ""
	found := false
	for _, m := range mountinfo.Parse(info) {
		if m.FSType != fstype || (opt != "" && !m.HasOption(opt)) {
			continue
		}
		rel, ok := under(m.Root, p)
		if !ok || (found && len(m.Root) <= len(bestRoot)) {
			continue
		}
		best, bestRoot, found = path.Join(m.Point, rel), m.Root, true
	}
	return best, found
}

// Mount is a cgroup file system's mount: the cgroup at its root and where
// it is mounted.
type Mount struct {
	Root, Point string
}

// FirstMount finds, in /proc/self/mountinfo's content, the first mount of
// a cgroup hierarchy of fstype ("cgroup" with the super option opt, or
// "cgroup2" with opt empty).
func FirstMount(info []byte, fstype, opt string) (Mount, bool) {
	for _, m := range mountinfo.Parse(info) {
		if m.FSType == fstype && (opt == "" || m.HasOption(opt)) {
			return Mount{Root: m.Root, Point: m.Point}, true
		}
	}
	return Mount{}, false
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

// CPUDir returns the directory, under root, of this process's cgroup that
// has the cpu controller: its v1 hierarchy's when one is mounted, the
// unified one's otherwise.
func CPUDir(root string) (string, error) {
	cg, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return "", fmt.Errorf("cgroup: %w", err)
	}
	info, err := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return "", fmt.Errorf("cgroup: %w", err)
	}
	paths := ParsePaths(cg)
	if p, ok := paths.V1["cpu"]; ok {
		if dir, ok := Dir(info, "cgroup", "cpu", p); ok {
			return filepath.Join(root, dir), nil
		}
	}
	if paths.HasV2 {
		if dir, ok := Dir(info, "cgroup2", "", paths.V2); ok {
			return filepath.Join(root, dir), nil
		}
	}
	return "", fmt.Errorf("cgroup: no cpu controller mounted for this process")
}

// Throttling is what a CPU quota did to a cgroup since it was made.
type Throttling struct {
	// Periods is the number of quota periods in which it was throttled.
	Periods int64
	// Time is how long its tasks were held off the CPU for it.
	Time time.Duration
}

// ReadThrottling reads the cpu.stat file of a cgroup directory (CPUDir):
// nr_throttled, and throttled_time (v1, nanoseconds) or throttled_usec
// (v2, microseconds).
func ReadThrottling(dir string) (Throttling, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return Throttling{}, fmt.Errorf("cgroup: %w", err)
	}
	return ParseThrottling(b)
}

// ParseThrottling parses a cpu.stat file.
func ParseThrottling(b []byte) (Throttling, error) {
	var t Throttling
	var seen bool
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "nr_throttled":
			t.Periods = n
		case "throttled_time":
			t.Time, seen = time.Duration(n), true
		case "throttled_usec":
			t.Time, seen = time.Duration(n)*time.Microsecond, true
		}
	}
	if !seen {
		return Throttling{}, fmt.Errorf("cgroup: cpu.stat has no throttled time (no CPU quota accounting here)")
	}
	return t, nil
}
