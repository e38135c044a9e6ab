// Package mountinfo reads /proc/self/mountinfo, where the packages that
// look at the process's cgroups (the memory and CPU gates, the runtime's
// cpuset check) find the cgroup file systems.
package mountinfo

import (
	"slices"
	"strconv"
	"strings"
)

// Mount is one line of mountinfo.
type Mount struct {
	// Root is the directory of the file system mounted at Point (for a
	// cgroup file system, the cgroup at the mount's root).
	Root, Point string
	// FSType is the file system type, for example "cgroup2".
	FSType string
	// Super lists the super block's options (for a cgroup v1 mount, its
	// controllers among them).
	Super []string
}

// HasOption reports whether the mount's super block options hold opt.
func (m Mount) HasOption(opt string) bool { return slices.Contains(m.Super, opt) }

// Parse returns the mounts of a mountinfo text, in order, skipping lines
// it cannot read.
func Parse(b []byte) []Mount {
	var mounts []Mount
	for line := range strings.SplitSeq(string(b), "\n") {
		// ID parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 1 {
			continue
		}
		m := Mount{Root: Unescape(f[3]), Point: Unescape(f[4]), FSType: g[0]}
		if len(g) >= 3 {
			m.Super = strings.Split(g[2], ",")
		}
		mounts = append(mounts, m)
	}
	return mounts
}

// Unescape undoes mountinfo's octal escapes ("\040" for a space).
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
