package gate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/cgroup"
)

// writeTree writes files (path relative to root: content) under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
	}
}

const (
	gib         = int64(1) << 30
	bigMeminfo  = "MemTotal:       16777216 kB\nMemFree:         1000000 kB\nMemAvailable:   15000000 kB\n"
	v2Mountinfo = "22 1 0:21 / / rw - ext4 /dev/sda1 rw\n" +
		"25 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
)

func manualMemory(t testing.TB, root string, opts MemoryConfig) *Memory {
	t.Helper()
	opts.Root, opts.Interval = root, Manual
	return newMemory(t, opts)
}

func TestMemoryCgroup2(t *testing.T) {
	root := t.TempDir()
	dir := "sys/fs/cgroup/app.slice/app.service"
	writeTree(t, root, map[string]string{
		"proc/self/cgroup":                       "0::/app.slice/app.service\n",
		"proc/self/mountinfo":                    v2Mountinfo,
		"proc/meminfo":                           bigMeminfo,
		dir + "/memory.max":                      "1000000\n",
		dir + "/memory.current":                  "500000\n",
		dir + "/memory.stat":                     "anon 400000\nfile 100000\ninactive_anon 0\nactive_file 0\ninactive_file 100000\n",
		"sys/fs/cgroup/app.slice/memory.max":     "max\n",
		"sys/fs/cgroup/app.slice/memory.current": "600000\n",
	})
	m := manualMemory(t, root, MemoryConfig{})
	defer m.Close()
	woke := attach(t, m, nil)
	assert.Equal(t, "memory", m.Name())
	st := m.Stats()
	require.NoError(t, st.Err)
	assert.Equal(t, "cgroup2 "+filepath.Join(root, dir), st.Source)
	assert.Equal(t, int64(1000000), st.Limit)
	assert.Equal(t, int64(600000), st.Free, "inactive file pages count as free")
	assert.Equal(t, int64(100000), st.Threshold, "10% of the limit")
	assert.True(t, st.Open)
	assert.True(t, acquire(m))
	release(m, time.Millisecond) // a no-op

	writeTree(t, root, map[string]string{dir + "/memory.current": "950000\n"})
	st = m.Refresh()
	assert.Equal(t, int64(150000), st.Free)
	assert.True(t, acquire(m))

	writeTree(t, root, map[string]string{dir + "/memory.stat": "inactive_file 0\n"})
	st = m.Refresh()
	assert.Equal(t, int64(50000), st.Free)
	assert.False(t, st.Open)
	assert.False(t, acquire(m), "free below 10% of the limit")
	assert.Equal(t, int64(0), woke.count())

	writeTree(t, root, map[string]string{dir + "/memory.current": "100000\n"})
	m.Refresh()
	assert.True(t, acquire(m))
	assert.Equal(t, int64(1), woke.count(), "reopening wakes")
	m.Refresh()
	assert.Equal(t, int64(1), woke.count(), "staying open does not")
}

// A limit set on an ancestor binds a cgroup without one of its own.
func TestMemoryCgroup2AncestorLimit(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"proc/self/cgroup": "0::/kubepods/pod1/ctr\n",
		"proc/meminfo":     bigMeminfo,
		"sys/fs/cgroup/kubepods/pod1/ctr/memory.max":     "max\n",
		"sys/fs/cgroup/kubepods/pod1/ctr/memory.current": "10\n",
		"sys/fs/cgroup/kubepods/pod1/memory.max":         "1000\n",
		"sys/fs/cgroup/kubepods/pod1/memory.current":     "950\n",
		"sys/fs/cgroup/kubepods/memory.max":              "100000\n",
		"sys/fs/cgroup/kubepods/memory.current":          "950\n",
	}) // no mountinfo: the default mount point
	m := manualMemory(t, root, MemoryConfig{})
	st := m.Stats()
	assert.Equal(t, "cgroup2 "+filepath.Join(root, "sys/fs/cgroup/kubepods/pod1"), st.Source)
	assert.Equal(t, int64(50), st.Free)
	assert.False(t, acquire(m))
}

// A container without a cgroup namespace sees the host's path in
// /proc/self/cgroup and its own cgroup at the mount point.
func TestMemoryCgroup2MountRoot(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"proc/self/cgroup":             "0::/docker/abc\n",
		"proc/self/mountinfo":          "30 22 0:27 /docker/abc /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n",
		"proc/meminfo":                 bigMeminfo,
		"sys/fs/cgroup/memory.max":     "2000\n",
		"sys/fs/cgroup/memory.current": "1000\n",
	})
	st := manualMemory(t, root, MemoryConfig{}).Stats()
	assert.Equal(t, "cgroup2 "+filepath.Join(root, "sys/fs/cgroup"), st.Source)
	assert.Equal(t, int64(1000), st.Free)

	// Same with a path that does not start with the mount's root.
	writeTree(t, root, map[string]string{"proc/self/cgroup": "0::/elsewhere\n"})
	st = manualMemory(t, root, MemoryConfig{}).Stats()
	assert.Equal(t, "cgroup2 "+filepath.Join(root, "sys/fs/cgroup"), st.Source)
}

func TestMemoryCgroup1(t *testing.T) {
	root := t.TempDir()
	dir := "sys/fs/cgroup/memory/docker/abc"
	writeTree(t, root, map[string]string{
		"proc/self/cgroup": "12:pids:/docker/abc\n5:memory:/docker/abc\n1:name=systemd:/docker/abc\n0::/\n",
		"proc/self/mountinfo": v2Mountinfo[:strings.Index(v2Mountinfo, "\n")+1] +
			"31 25 0:26 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n",
		"proc/meminfo":                                      bigMeminfo,
		dir + "/memory.limit_in_bytes":                      "4000000\n",
		dir + "/memory.usage_in_bytes":                      "3900000\n",
		dir + "/memory.stat":                                "cache 1\ninactive_file 5\ntotal_inactive_file 1000000\n",
		"sys/fs/cgroup/memory/docker/memory.limit_in_bytes": "9223372036854771712\n",
		"sys/fs/cgroup/memory/docker/memory.usage_in_bytes": "3900000\n",
		"sys/fs/cgroup/memory/memory.limit_in_bytes":        "9223372036854771712\n",
		"sys/fs/cgroup/memory/memory.usage_in_bytes":        "9900000\n",
	})
	m := manualMemory(t, root, MemoryConfig{})
	st := m.Stats()
	assert.Equal(t, "cgroup1 "+filepath.Join(root, dir), st.Source)
	assert.Equal(t, int64(1100000), st.Free, "total_inactive_file is free")
	assert.True(t, acquire(m))

	pc := manualMemory(t, root, MemoryConfig{CountPageCache: true})
	st = pc.Stats()
	assert.Equal(t, int64(100000), st.Free)
	assert.False(t, acquire(pc), "page cache counted as used")

	fixed := manualMemory(t, root, MemoryConfig{MinFree: 2000000})
	assert.Equal(t, int64(2000000), fixed.Stats().Threshold)
	assert.False(t, acquire(fixed))
}

// Without a cgroup limit, MemAvailable decides.
func TestMemoryMeminfo(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"proc/self/cgroup":                           "4:memory:/\n",
		"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		"sys/fs/cgroup/memory/memory.usage_in_bytes": "123\n",
		"proc/meminfo":                               "MemTotal:       1000 kB\nMemFree:  10 kB\nMemAvailable:    50 kB\n",
	})
	m := manualMemory(t, root, MemoryConfig{})
	st := m.Stats()
	assert.Equal(t, "meminfo", st.Source)
	assert.Equal(t, int64(1000*1024), st.Limit)
	assert.Equal(t, int64(50*1024), st.Free)
	assert.False(t, acquire(m))

	writeTree(t, root, map[string]string{"proc/meminfo": "MemTotal: 1000 kB\nMemAvailable: 500 kB\n"})
	m.Refresh()
	assert.True(t, acquire(m))
}

// The machine's MemAvailable binds when it is lower than what the cgroup
// would allow, and a cgroup limit above the machine's memory is no limit.
func TestMemoryMachineBindsUnderCgroup(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"proc/self/cgroup":               "0::/a\n",
		"proc/meminfo":                   "MemTotal: 1000 kB\nMemAvailable: 20 kB\n",
		"sys/fs/cgroup/a/memory.max":     "512000\n",
		"sys/fs/cgroup/a/memory.current": "0\n",
	})
	m := manualMemory(t, root, MemoryConfig{})
	st := m.Stats()
	assert.Equal(t, "meminfo", st.Source)
	assert.False(t, acquire(m))

	writeTree(t, root, map[string]string{
		"proc/meminfo":               "MemTotal: 1000 kB\nMemAvailable: 900 kB\n",
		"sys/fs/cgroup/a/memory.max": "2048000\n", // above MemTotal
	})
	st = m.Refresh()
	assert.Equal(t, "meminfo", st.Source)
	assert.True(t, acquire(m))
}

func TestMemoryNoSource(t *testing.T) {
	m := manualMemory(t, t.TempDir(), MemoryConfig{})
	st := m.Stats()
	assert.Error(t, st.Err)
	assert.True(t, acquire(m), "fails open")
}

func TestMemoryRefresher(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"proc/meminfo": "MemTotal: 1000 kB\nMemAvailable: 900 kB\n"})
	m := newMemory(t, MemoryConfig{Root: root, Interval: time.Millisecond})
	defer m.Close()
	require.True(t, acquire(m))
	writeTree(t, root, map[string]string{"proc/meminfo": "MemTotal: 1000 kB\nMemAvailable: 9 kB\n"})
	require.Eventually(t, func() bool { return !acquire(m) }, 10*time.Second, time.Millisecond)
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "twice")
}

// A reading older than two Intervals, its refresher kept from the CPU, is
// not trusted: Admit reads the memory itself. Here the refresher's hour
// never comes, and the clock says two hours passed since the last reading.
func TestMemoryStaleReadingIsRenewedByAdmit(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"proc/meminfo": "MemTotal: 1000 kB\nMemAvailable: 900 kB\n"})
	m := newMemory(t, MemoryConfig{Root: root, Interval: time.Hour})
	defer m.Close()
	var now atomic.Int64
	m.clock = now.Load
	m.Refresh()
	woke := attach(t, m, nil)
	require.True(t, acquire(m))

	writeTree(t, root, map[string]string{"proc/meminfo": "MemTotal: 1000 kB\nMemAvailable: 9 kB\n"})
	now.Add(int64(time.Hour))
	assert.True(t, acquire(m), "one hour: the reading is not stale yet")
	now.Add(int64(time.Hour) + 1)
	assert.False(t, acquire(m), "two hours and more: Admit read the memory")
	assert.Equal(t, int64(9<<10), m.Stats().Free)

	writeTree(t, root, map[string]string{"proc/meminfo": "MemTotal: 1000 kB\nMemAvailable: 900 kB\n"})
	now.Add(3 * int64(time.Hour))
	assert.True(t, acquire(m), "memory back: the stale reading is renewed, the gate open")
	require.Eventually(t, func() bool { return woke.count() > 0 }, 10*time.Second, time.Millisecond, "the queue is woken")

	require.NoError(t, m.Close())
	writeTree(t, root, map[string]string{"proc/meminfo": "MemTotal: 1000 kB\nMemAvailable: 9 kB\n"})
	now.Add(3 * int64(time.Hour))
	assert.True(t, acquire(m), "closed: the gate keeps its last state")
}

// Between two readings the gate admits what fits in the margin of the last
// one at the memory each admission was seen to add: a burst, or a queue let
// go as the gate opens, cannot take more than the margin before a reading
// shows it.
func TestMemoryBudgetsAdmissionsBetweenReadings(t *testing.T) {
	root := t.TempDir()
	meminfo := func(availKB int) {
		writeTree(t, root, map[string]string{"proc/meminfo": fmt.Sprintf("MemTotal: 1000 kB\nMemAvailable: %d kB\n", availKB)})
	}
	meminfo(900)
	m := manualMemory(t, root, MemoryConfig{}) // the threshold: 100 kB free
	woke := attach(t, m, nil)
	st := m.Stats()
	assert.Equal(t, int64(-1), st.Budget, "no admission seen yet: no budget")
	assert.Zero(t, st.PerAdmission)
	for range 1000 {
		require.True(t, acquire(m), "a burst before any reading saw admissions add memory")
	}

	// 1,000 admissions added 200 kB: 204 bytes each; the margin of 600 kB
	// holds them all.
	meminfo(700)
	st = m.Refresh()
	assert.Equal(t, int64(200<<10/1000), st.PerAdmission)
	assert.Equal(t, (int64(600)<<10)/st.PerAdmission, st.Budget)

	// Then each reading sees two admissions add 10 kB: once they fill the
	// window of readings, the burst's cheap admissions are forgotten.
	for range memoryWindow {
		require.True(t, acquire(m))
		require.True(t, acquire(m))
		meminfo(int(m.Stats().Free>>10) - 10)
		m.Refresh()
	}
	st = m.Stats()
	assert.Equal(t, int64(5<<10), st.PerAdmission, "the last readings: 10 kB per two admissions")
	margin := st.Free - st.Threshold
	require.Equal(t, margin/(5<<10), st.Budget)
	for range st.Budget {
		require.True(t, acquire(m))
	}
	assert.False(t, acquire(m), "the budget is spent until the next reading")
	assert.False(t, acquire(m))
	assert.Equal(t, int64(0), woke.count())

	m.Refresh()
	assert.True(t, acquire(m), "a reading renews the budget")
	assert.Equal(t, int64(1), woke.count(), "and wakes the queue the spent budget held")

	// Readings with no admission (a closed spell) keep the measure.
	per := m.Refresh().PerAdmission
	meminfo(50)
	assert.False(t, m.Refresh().Open)
	meminfo(int(st.Free >> 10))
	for range 2 * memoryWindow {
		m.Refresh()
	}
	assert.Equal(t, per, m.Stats().PerAdmission)
	assert.Positive(t, m.Stats().Budget)

	require.NoError(t, m.Close())
	for range 2 * st.Budget {
		require.True(t, acquire(m), "closed: no reading renews a budget, so none applies")
	}
}

// The machine the tests run on: some source is readable.
func TestMemoryThisMachine(t *testing.T) {
	skipWithoutProc(t)
	m := newMemory(t, MemoryConfig{Interval: Manual})
	st := m.Stats()
	require.NoError(t, st.Err)
	assert.Positive(t, st.Limit)
}

func TestMountinfoEscapes(t *testing.T) {
	v2, ok := cgroup.FirstMount([]byte(`40 30 0:37 / /sys/fs/cgroup\040x rw - cgroup2 cgroup2 rw`+"\n"), "cgroup2", "")
	require.True(t, ok)
	assert.Equal(t, "/sys/fs/cgroup x", v2.Point)
}
