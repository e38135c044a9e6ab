package cgroup

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParsePaths(t *testing.T) {
	p := ParsePaths([]byte("12:cpu,cpuacct:/kube/pod1\n4:memory:/kube/pod1/c\n3:cpuset:/\n0::/unified/x\nbad line\n"))
	assert.Equal(t, "/kube/pod1", p.V1["cpu"])
	assert.Equal(t, "/kube/pod1", p.V1["cpuacct"])
	assert.Equal(t, "/kube/pod1/c", p.V1["memory"])
	assert.Equal(t, "/", p.V1["cpuset"])
	assert.True(t, p.HasV2)
	assert.Equal(t, "/unified/x", p.V2)
}

func TestParseThrottling(t *testing.T) {
	v1, err := ParseThrottling([]byte("nr_periods 211\nnr_throttled 79\nthrottled_time 3465525775\n"))
	require.NoError(t, err)
	assert.Equal(t, Throttling{Periods: 79, Time: 3465525775}, v1)
	v2, err := ParseThrottling([]byte("usage_usec 100\nnr_periods 5\nnr_throttled 2\nthrottled_usec 1500\n"))
	require.NoError(t, err)
	assert.Equal(t, Throttling{Periods: 2, Time: 1500 * time.Microsecond}, v2)
	_, err = ParseThrottling([]byte("usage_usec 100\n"))
	assert.Error(t, err)
}

// CPUDir finds the cpu controller's directory of a v1 hierarchy, and of
// the unified one when no v1 cpu hierarchy is mounted.
func TestCPUDir(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(content), 0o644))
	}
	write("proc/self/cgroup", "2:cpu,cpuacct:/pod\n0::/u\n")
	write("proc/self/mountinfo", "30 25 0:26 /pod /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu,cpuacct\n"+
		"31 25 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n")
	dir, err := CPUDir(root)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "sys/fs/cgroup/cpu"), dir, "the mount's root is the pod's cgroup")

	write("proc/self/cgroup", "0::/u\n")
	dir, err = CPUDir(root)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "sys/fs/cgroup/unified/u"), dir)

	write("proc/self/mountinfo", "")
	_, err = CPUDir(root)
	assert.Error(t, err)
}

func TestFirstMount(t *testing.T) {
	info := []byte("30 25 0:26 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu,cpuacct\n" +
		"31 25 0:27 /pod /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n" +
		"32 25 0:28 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n")
	m, ok := FirstMount(info, "cgroup", "memory")
	require.True(t, ok)
	assert.Equal(t, Mount{Root: "/pod", Point: "/sys/fs/cgroup/memory"}, m)
	m, ok = FirstMount(info, "cgroup2", "")
	require.True(t, ok)
	assert.Equal(t, "/sys/fs/cgroup/unified", m.Point)
	_, ok = FirstMount(info, "cgroup", "pids")
	assert.False(t, ok)
}
