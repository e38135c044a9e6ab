//go:build linux

package bench

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	srt "github.com/sluice-go/sluice/runtime"
)

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string][]int{
		"0":            {0},
		"1":            {1},
		"0-3":          {0, 1, 2, 3},
		"0-3,8,10-11":  {0, 1, 2, 3, 8, 10, 11},
		" 8 , 2-3 ,2 ": {2, 3, 8},
		"5-5":          {5},
		"1023":         {1023},
	} {
		got, err := ParseCPUList(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
			assert.Equal(t, got, mustParse(t, FormatCPUList(got)), "%q round trip", in)
		}
	}
	for _, in := range []string{"", " ", "a", "1,", ",1", "3-1", "-1", "1-", "1-2-3", "1024", "0-1024", "1.5", "+1"} {
		_, err := ParseCPUList(in)
		assert.Error(t, err, "%q", in)
	}
	assert.Equal(t, "0-3,8,10-11", FormatCPUList([]int{0, 1, 2, 3, 8, 10, 11}))
	assert.Equal(t, "", FormatCPUList(nil))
}

func mustParse(t *testing.T, s string) []int {
	t.Helper()
	cpus, err := ParseCPUList(s)
	require.NoError(t, err, s)
	return cpus
}

func TestSplitCPUs(t *testing.T) {
	allowed, err := srt.AffinityCPUs()
	require.NoError(t, err)
	target, gen, err := SplitCPUs()
	require.NoError(t, err)
	if len(allowed) < 2 {
		assert.Nil(t, target)
		assert.Nil(t, gen)
		return
	}
	assert.Len(t, gen, max(1, len(allowed)/4))
	assert.Equal(t, allowed, slices.Concat(gen, target), "the generator first, every CPU once")
	assert.NoError(t, checkSplit(target, gen))
}

func TestCheckSplit(t *testing.T) {
	allowed, err := srt.AffinityCPUs()
	require.NoError(t, err)
	require.NotEmpty(t, allowed)
	assert.NoError(t, checkSplit(nil, nil), "no split")
	assert.ErrorContains(t, checkSplit([]int{allowed[0]}, nil), "both")
	assert.ErrorContains(t, checkSplit(nil, []int{allowed[0]}), "both")
	assert.ErrorContains(t, checkSplit([]int{allowed[0]}, []int{allowed[0]}), "in both")
	assert.ErrorContains(t, checkSplit([]int{-1}, []int{allowed[0]}), "out of range")
	assert.ErrorContains(t, checkSplit([]int{allowed[0]}, []int{maxCPU}), "out of range")
	if !slices.Contains(allowed, maxCPU-1) {
		assert.ErrorContains(t, checkSplit([]int{maxCPU - 1}, []int{allowed[0]}), "not one this process may run on")
	}
	if len(allowed) >= 2 {
		assert.NoError(t, checkSplit(allowed[1:], allowed[:1]))
	}
}

// threadMasks returns the CPU list of each thread of process pid ("self"
// for this one), from /proc.
func threadMasks(t *testing.T, pid string) map[string]int {
	t.Helper()
	files, err := filepath.Glob("/proc/" + pid + "/task/*/status")
	require.NoError(t, err)
	masks := make(map[string]int)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				masks[strings.TrimSpace(v)]++
			}
		}
	}
	require.NotEmpty(t, masks)
	return masks
}

// twoCPUs returns two CPUs this process may use, or skips the test.
func twoCPUs(t *testing.T) (a, b int) {
	t.Helper()
	allowed, err := srt.AffinityCPUs()
	require.NoError(t, err)
	if len(allowed) < 2 {
		t.Skipf("needs 2 CPUs to split, this process may use %v", allowed)
	}
	return allowed[0], allowed[len(allowed)-1]
}

func TestPinSelfPinsEveryThreadAndRestores(t *testing.T) {
	a, b := twoCPUs(t)
	allowed, err := srt.AffinityCPUs()
	require.NoError(t, err)
	// A thread of its own mask, as a pinned worker of an in-process
	// runtime would have, gets it back.
	own := make(chan struct{})
	ownDone := make(chan []int)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		set := cpuSet([]int{b})
		assert.NoError(t, unix.SchedSetaffinity(0, &set))
		own <- struct{}{}
		<-own
		cpus, _ := srt.AffinityCPUs()
		set = cpuSet(allowed)
		assert.NoError(t, unix.SchedSetaffinity(0, &set))
		ownDone <- cpus
	}()
	<-own
	before := threadMasks(t, "self")
	procs := runtime.GOMAXPROCS(0)

	restore, err := pinSelf([]int{a})
	require.NoError(t, err)
	pinned := threadMasks(t, "self")
	assert.Len(t, pinned, 1, "every thread pinned: %v", pinned)
	assert.Contains(t, pinned, FormatCPUList([]int{a}))
	assert.Equal(t, 1, runtime.GOMAXPROCS(0))
	// Whatever thread a goroutine runs on now is pinned.
	done := make(chan []int)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cpus, _ := srt.AffinityCPUs()
		done <- cpus
	}()
	assert.Equal(t, []int{a}, <-done)

	require.NoError(t, restore())
	assert.Equal(t, before, mapKeysOnly(threadMasks(t, "self"), before), "every thread back to its mask")
	own <- struct{}{}
	assert.Equal(t, []int{b}, <-ownDone, "a thread with a mask of its own gets it back")
	assert.Equal(t, procs, runtime.GOMAXPROCS(0))
	now, err := srt.AffinityCPUs()
	require.NoError(t, err)
	assert.Equal(t, allowed, now)
}

// mapKeysOnly returns got with the counts of want, if it has the same
// keys (the number of threads may change between two readings).
func mapKeysOnly(got, want map[string]int) map[string]int {
	if len(got) != len(want) {
		return got
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			return got
		}
	}
	return want
}

func TestStartProcessOnCPUs(t *testing.T) {
	_, b := twoCPUs(t)
	before := threadMasks(t, "self")
	p, err := startProcess(context.Background(), nil, "sluice", HandlerSpec{CPU: 100 * time.Microsecond}, []int{b})
	require.NoError(t, err)
	child := threadMasks(t, strconv.Itoa(p.cmd.Process.Pid))
	assert.Equal(t, map[string]int{FormatCPUList([]int{b}): child[FormatCPUList([]int{b})]}, child, "every thread of the child on CPU %d", b)
	assert.NoError(t, p.Stop())
	assert.Equal(t, before, mapKeysOnly(threadMasks(t, "self"), before), "this process's threads keep their masks")
}
