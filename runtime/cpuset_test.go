package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeRoot lays out files under a new directory: each key is a path
// relative to it, each value the file's content.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return root
}

// Mount lines as the kernel writes them in /proc/self/mountinfo.
const (
	mountV2       = "41 31 0:38 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
	mountV1Cpuset = "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime shared:12 - cgroup cgroup rw,cpuset\n"
	mountV1CPU    = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
	mountProc     = "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
	// This machine's layout: v1 controllers, the cpuset hierarchy at its
	// root, and an empty v2 hierarchy beside them.
	hybridCgroup = "9:name=systemd:/\n4:memory:/process_api/42df\n3:cpuset:/\n1:cpu:/\n0::/\n"
	hybridMounts = mountProc + mountV1CPU + mountV1Cpuset + "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
)

func TestExclusiveCPUs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  bool
		why   string // a part of the reason
	}{{
		name: "v2 partition root",
		files: map[string]string{
			"proc/self/cgroup":    "0::/app.slice/svc\n",
			"proc/self/mountinfo": mountProc + mountV2,
			"sys/fs/cgroup/app.slice/svc/cpuset.cpus.partition": "root\n",
		},
		want: true, why: "/sys/fs/cgroup/app.slice/svc is a cpuset partition (root)",
	}, {
		name: "v2 isolated partition",
		files: map[string]string{
			"proc/self/cgroup":                       "0::/rt\n",
			"proc/self/mountinfo":                    mountV2,
			"sys/fs/cgroup/rt/cpuset.cpus.partition": "isolated\n",
		},
		want: true, why: "(isolated)",
	}, {
		name: "v2 partition the kernel found invalid",
		files: map[string]string{
			"proc/self/cgroup":                        "0::/svc\n",
			"proc/self/mountinfo":                     mountV2,
			"sys/fs/cgroup/svc/cpuset.cpus.partition": "root invalid (Cpu list in cpuset.cpus not exclusive)\n",
		},
		want: false, why: "not a valid cpuset partition",
	}, {
		name: "v2 member, the default",
		files: map[string]string{
			"proc/self/cgroup":    "0::/user.slice/session-1.scope\n",
			"proc/self/mountinfo": mountV2,
			"sys/fs/cgroup/user.slice/session-1.scope/cpuset.cpus.partition": "member\n",
		},
		want: false, why: `"member"`,
	}, {
		name: "v2 root cgroup: the whole machine",
		files: map[string]string{
			"proc/self/cgroup":                    "0::/\n",
			"proc/self/mountinfo":                 mountV2,
			"sys/fs/cgroup/cpuset.cpus.effective": "0-15\n",
		},
		want: false, why: "has no cpuset partition",
	}, {
		name: "v2 cgroup without the cpuset controller",
		files: map[string]string{
			"proc/self/cgroup":          "0::/svc\n",
			"proc/self/mountinfo":       mountV2,
			"sys/fs/cgroup/svc/cpu.max": "max 100000\n",
		},
		want: false, why: "has no cpuset partition",
	}, {
		name: "v2 in a cgroup namespace: the container's own partition at the mount",
		files: map[string]string{
			"proc/self/cgroup":                    "0::/\n",
			"proc/self/mountinfo":                 mountV2,
			"sys/fs/cgroup/cpuset.cpus.partition": "root\n",
		},
		want: true, why: "is a cpuset partition",
	}, {
		name: "v2 mounted somewhere else, and a bind mount of a subtree",
		files: map[string]string{
			"proc/self/cgroup": "0::/a/b\n",
			"proc/self/mountinfo": "50 1 0:38 / /cg rw - cgroup2 cgroup2 rw\n" +
				"51 1 0:38 /a /cg-a rw - cgroup2 cgroup2 rw\n",
			"cg-a/b/cpuset.cpus.partition": "root\n",
			"cg/a/b/cpuset.cpus.partition": "member\n",
		},
		want: true, why: "/cg-a/b",
	}, {
		name: "v2 path outside every mount",
		files: map[string]string{
			"proc/self/cgroup":    "0::/elsewhere\n",
			"proc/self/mountinfo": "51 1 0:38 /a /cg-a rw - cgroup2 cgroup2 rw\n",
		},
		want: false, why: "not mounted here",
	}, {
		name: "v1 root cpuset, exclusive by the kernel: this machine",
		files: map[string]string{
			"proc/self/cgroup":                                    hybridCgroup,
			"proc/self/mountinfo":                                 hybridMounts,
			"sys/fs/cgroup/cpuset/cpuset.cpu_exclusive":           "1\n",
			"sys/fs/cgroup/cpuset/cpuset.memory_pressure_enabled": "0\n",
		},
		want: false, why: "root cpuset",
	}, {
		name: "v1 child cpuset set exclusive (cset shield)",
		files: map[string]string{
			"proc/self/cgroup":                                    "3:cpuset:/user\n1:cpu:/\n",
			"proc/self/mountinfo":                                 mountV1CPU + mountV1Cpuset,
			"sys/fs/cgroup/cpuset/user/cpuset.cpu_exclusive":      "1\n",
			"sys/fs/cgroup/cpuset/cpuset.cpu_exclusive":           "1\n",
			"sys/fs/cgroup/cpuset/cpuset.memory_pressure_enabled": "0\n",
		},
		want: true, why: "/sys/fs/cgroup/cpuset/user is cpu_exclusive",
	}, {
		name: "v1 child cpuset, not exclusive (docker --cpuset-cpus)",
		files: map[string]string{
			"proc/self/cgroup":                          "5:cpuset,cpuacct:/docker/abc\n",
			"proc/self/mountinfo":                       "70 60 0:31 /docker/abc /sys/fs/cgroup/cpuset ro - cgroup cgroup rw,cpuacct,cpuset\n",
			"sys/fs/cgroup/cpuset/cpuset.cpu_exclusive": "0\n",
		},
		want: false, why: "not cpu_exclusive",
	}, {
		name: "v1 cpuset hierarchy not mounted",
		files: map[string]string{
			"proc/self/cgroup":    "3:cpuset:/user\n0::/\n",
			"proc/self/mountinfo": mountV1CPU + mountV2,
		},
		want: false, why: "not mounted here",
	}, {
		name: "v1 mount point with a space, escaped",
		files: map[string]string{
			"proc/self/cgroup":               "3:cpuset:/rt\n",
			"proc/self/mountinfo":            `34 31 0:31 / /cg\040set rw - cgroup cgroup rw,cpuset` + "\n",
			"cg set/rt/cpuset.cpu_exclusive": "1\n",
		},
		want: true, why: "/cg set/rt",
	}, {
		name:  "no /proc/self/cgroup",
		files: map[string]string{"proc/self/mountinfo": mountV2},
		want:  false, why: "no cgroup information",
	}, {
		name:  "no mountinfo",
		files: map[string]string{"proc/self/cgroup": "0::/svc\n"},
		want:  false, why: "no mount information",
	}, {
		name: "no cpuset hierarchy at all",
		files: map[string]string{
			"proc/self/cgroup":    "1:cpu:/\n",
			"proc/self/mountinfo": mountV1CPU,
		},
		want: false, why: "no cpuset cgroup",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := exclusiveCPUs(fakeRoot(t, tc.files))
			assert.Equal(t, tc.want, got, why)
			assert.Contains(t, why, tc.why)
		})
	}
}

func TestDetectCPUsReadsTheCpuset(t *testing.T) {
	root := fakeRoot(t, map[string]string{
		"proc/self/cgroup":                        "0::/svc\n",
		"proc/self/mountinfo":                     mountV2,
		"sys/fs/cgroup/svc/cpuset.cpus.partition": "root\n",
	})
	info, err := detectCPUs(root)
	require.NoError(t, err)
	assert.True(t, info.Exclusive)
	assert.True(t, strings.HasPrefix(info.ExclusiveReason, "cgroup v2:"), info.ExclusiveReason)

	// The live system: whatever it says, DetectCPUs says the same.
	live, err := DetectCPUs()
	require.NoError(t, err)
	want, why := exclusiveCPUs("/")
	assert.Equal(t, want, live.Exclusive)
	assert.Equal(t, why, live.ExclusiveReason)
	t.Logf("this machine: exclusive %v: %s", live.Exclusive, live.ExclusiveReason)
}

func TestPinningDefaultFollowsTheCpuset(t *testing.T) {
	cpus := []int{0, 1, 2, 3}
	own := func() (CPUInfo, error) { return CPUInfo{Allowed: cpus, Exclusive: true}, nil }
	shared := func() (CPUInfo, error) { return CPUInfo{Allowed: cpus}, nil }
	for _, tc := range []struct {
		name string
		cfg  Config
		want []int // nil: floating
		err  string
	}{
		{"exclusive: pinned", Config{detect: own}, cpus, ""},
		{"exclusive, fewer workers: the first CPUs", Config{detect: own, Workers: 2}, []int{0, 1}, ""},
		{"exclusive, more workers than CPUs: floating, no error", Config{detect: own, Workers: 6}, nil, ""},
		{"exclusive, forced off", Config{detect: own, Pinning: PinOff}, nil, ""},
		{"shared: floating", Config{detect: shared}, nil, ""},
		{"shared, forced on", Config{detect: shared, Pinning: PinOn}, cpus, ""},
		{"shared, CPUs given", Config{detect: shared, CPUs: []int{3, 1}}, []int{3, 1}, ""},
		{"shared, CPUs given with PinOn", Config{detect: shared, CPUs: []int{2}, Pinning: PinOn}, []int{2}, ""},
		{"shared, forced on with too many workers", Config{detect: shared, Pinning: PinOn, Workers: 5}, nil, ErrAffinity.Error()},
		{"forced off with CPUs given", Config{detect: shared, Pinning: PinOff, CPUs: []int{2}}, nil, "cannot go with Pinning PinOff"},
		{"an unknown pinning", Config{detect: shared, Pinning: 7}, nil, "Pinning(7) is not PinAuto"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, err := New(tc.cfg)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, rt.CPUs())
			assert.Equal(t, tc.want != nil, rt.Pinned())
		})
	}
}
