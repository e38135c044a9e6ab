//go:build linux

package bench

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestNeighbourSpinsOnItsCPU(t *testing.T) {
	_, cpu := twoCPUs(t)
	nb, err := startNeighbour(context.Background(), nil, cpu, 5, 30*time.Second)
	require.NoError(t, err)
	pid := nb.cmd.Process.Pid
	var set unix.CPUSet
	require.NoError(t, unix.SchedGetaffinity(pid, &set))
	assert.Equal(t, 1, set.Count())
	assert.True(t, set.IsSet(cpu), "on CPU %d", cpu)
	nice, err := unix.Getpriority(unix.PRIO_PROCESS, pid)
	require.NoError(t, err)
	assert.Equal(t, 20-5, nice, "getpriority returns 20 - nice")
	assert.Eventually(t, func() bool { return nb.CPUTime() > 0 }, 10*time.Second, 10*time.Millisecond, "it spins")
	require.NoError(t, nb.Stop())
	_, err = os.Stat("/proc/" + strconv.Itoa(pid) + "/stat")
	assert.True(t, os.IsNotExist(err), "gone once stopped")
}

func TestNeighbourStopsByItselfAtItsBound(t *testing.T) {
	a, _ := twoCPUs(t)
	nb, err := startNeighbour(context.Background(), nil, a, 0, 100*time.Millisecond)
	require.NoError(t, err)
	select {
	case err := <-nb.done:
		assert.NoError(t, err, "a clean exit at the bound")
	case <-time.After(10 * time.Second):
		_ = nb.cmd.Process.Kill()
		<-nb.done
		t.Fatal("still spinning past its bound")
	}
}

func TestRunNeighbourRefusesABadSpec(t *testing.T) {
	assert.ErrorContains(t, runNeighbour("{", strings.NewReader(""), &strings.Builder{}), "bad "+NeighbourEnv)
	assert.ErrorContains(t, runNeighbour(`{"for":0}`, strings.NewReader(""), &strings.Builder{}), "no time bound")
	var out strings.Builder
	assert.NoError(t, runNeighbour(`{"for":1000000000}`, strings.NewReader(""), &out), "stops at the end of its input")
	assert.Equal(t, "spinning\n", out.String())
}

func TestRunQueueFromSchedstat(t *testing.T) {
	st, ok := parseSchedstat("353487596 121775 5\n")
	require.True(t, ok)
	assert.Equal(t, schedTimes{run: 353487596, wait: 121775}, st)
	_, ok = parseSchedstat("12")
	assert.False(t, ok)
	_, ok = parseSchedstat("a b c")
	assert.False(t, ok)

	before := map[int]schedTimes{1: {run: 100 * time.Millisecond, wait: 50 * time.Millisecond}, 2: {run: 0, wait: 0}, 3: {wait: time.Second}}
	after := map[int]schedTimes{
		1: {run: 400 * time.Millisecond, wait: 550 * time.Millisecond}, // waited 0.5 s of 1 s
		2: {run: 900 * time.Millisecond, wait: 100 * time.Millisecond},
		4: {run: 10 * time.Millisecond, wait: 200 * time.Millisecond}, // started meanwhile
	} // 3 ended meanwhile: not counted
	rq := runQueue(before, after, time.Second)
	assert.InDelta(t, 0.8, rq.Wait, 1e-9)
	assert.InDelta(t, 0.5, rq.MaxThread, 1e-9)
	assert.InDelta(t, 0.3, rq.MaxThreadRun, 1e-9)
	assert.Equal(t, RunQueue{}, runQueue(before, after, 0))

	threads, err := threadSched(os.Getpid())
	require.NoError(t, err)
	assert.Contains(t, threads, unix.Gettid(), "this thread is among them")
}
