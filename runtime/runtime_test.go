//go:build linux

package runtime

import (
	"context"
	goruntime "runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/sched"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func stop(t *testing.T, rt *Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, rt.Stop(ctx))
}

func TestDetectCPUs(t *testing.T) {
	info, err := DetectCPUs()
	require.NoError(t, err)
	require.NotEmpty(t, info.Allowed)
	assert.True(t, slices.IsSorted(info.Allowed))
	assert.GreaterOrEqual(t, info.Usable(), 1)
	assert.LessOrEqual(t, info.Usable(), len(info.Allowed))
	aff, err := AffinityCPUs()
	require.NoError(t, err)
	assert.Equal(t, info.Allowed, aff, "the affinity mask, as DetectCPUs reads it")

	assert.Equal(t, 4, CPUInfo{Allowed: []int{0, 1, 2, 3}}.Usable())
	assert.Equal(t, 3, CPUInfo{Allowed: []int{0, 1, 2, 3}, Quota: 2.5}.Usable(), "halves up")
	assert.Equal(t, 2, CPUInfo{Allowed: []int{0, 1, 2, 3}, Quota: 2.4}.Usable())
	assert.Equal(t, 2, CPUInfo{Allowed: []int{0, 1}, Quota: 1.5}.Usable())
	assert.Equal(t, 1, CPUInfo{Allowed: []int{0, 1}, Quota: 1.4}.Usable())
	assert.Equal(t, 1, CPUInfo{Allowed: []int{0, 1}, Quota: 0.5}.Usable())
	assert.Equal(t, 1, CPUInfo{Allowed: []int{0, 1}, Quota: 0.2}.Usable(), "never below one")
	assert.Equal(t, 2, CPUInfo{Allowed: []int{0, 1}, Quota: 3.7}.Usable(), "no more than the mask")
}

func TestWorkersArePinnedToOneCPUEach(t *testing.T) {
	info, err := DetectCPUs()
	require.NoError(t, err)
	rt, err := New(Config{Pinning: PinOn})
	require.NoError(t, err)
	require.Equal(t, info.Usable(), rt.NumWorkers())
	assert.True(t, rt.Pinned())
	require.NoError(t, rt.Start())
	defer stop(t, rt)
	cpus := rt.CPUs()
	require.Len(t, cpus, rt.NumWorkers())
	for i := 0; i < rt.NumWorkers(); i++ {
		w := rt.Worker(i)
		got := make(chan []int, 1)
		require.NoError(t, w.Submit(lanes.Upstream, func() {
			var set unix.CPUSet
			if err := unix.SchedGetaffinity(0, &set); err != nil {
				got <- nil
				return
			}
			var on []int
			for c := 0; c < 1024; c++ {
				if set.IsSet(c) {
					on = append(on, c)
				}
			}
			got <- on
		}))
		assert.Equal(t, []int{cpus[i]}, <-got, "worker %d", i)
		assert.Equal(t, cpus[i], w.CPU())
	}

	// Work Await runs off the workers is not confined to a worker's CPU:
	// the pinned threads' masks are not inherited.
	done := make(chan int, 1)
	require.NoError(t, rt.Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
		n, _ := sched.Await(ctx, func(context.Context) (int, error) {
			var set unix.CPUSet
			if err := unix.SchedGetaffinity(0, &set); err != nil {
				return 0, err
			}
			return set.Count(), nil
		})
		done <- n
	}))
	assert.Equal(t, len(info.Allowed), <-done)
}

func TestMaskTooSmallIsAnError(t *testing.T) {
	info, err := DetectCPUs()
	require.NoError(t, err)
	_, err = New(Config{Workers: len(info.Allowed) + 1, Pinning: PinOn})
	assert.ErrorIs(t, err, ErrAffinity)
	_, err = New(Config{CPUs: []int{1023}})
	assert.ErrorIs(t, err, ErrAffinity)
	_, err = New(Config{CPUs: []int{info.Allowed[0], info.Allowed[0]}})
	assert.Error(t, err)
	_, err = New(Config{Workers: 2, CPUs: []int{info.Allowed[0]}})
	assert.Error(t, err)
	// Unpinned, more workers than CPUs is allowed.
	rt, err := New(Config{Workers: len(info.Allowed) + 1, Pinning: PinOff})
	require.NoError(t, err)
	assert.Nil(t, rt.CPUs())
	require.NoError(t, rt.Start())
	stop(t, rt)
}

func TestFakeDetector(t *testing.T) {
	det := func() (CPUInfo, error) {
		return CPUInfo{Allowed: []int{0, 1, 2, 3, 4, 5, 6, 7}, Quota: 3}, nil
	}
	rt, err := New(Config{Pinning: PinOff, detect: det})
	require.NoError(t, err)
	assert.Equal(t, 3, rt.NumWorkers(), "the quota caps the worker count")
	rt, err = New(Config{Pinning: PinOn, detect: det})
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1, 2}, rt.CPUs())
	_, err = New(Config{Workers: -1, detect: det})
	assert.Error(t, err)
}

func TestGOMAXPROCSPolicy(t *testing.T) {
	assert.Equal(t, 3, goProcsFor(2))
	assert.Equal(t, 2, goProcsFor(1))
	assert.Equal(t, 24, goProcsFor(16))

	prev := goruntime.GOMAXPROCS(2)
	defer goruntime.GOMAXPROCS(prev)
	rt, err := New(Config{Workers: 2, Pinning: PinOff})
	require.NoError(t, err)
	require.NoError(t, rt.Start())
	assert.Equal(t, 3, goruntime.GOMAXPROCS(0), "raised to workers + max(1, workers/2)")
	stop(t, rt)
	assert.Equal(t, 2, goruntime.GOMAXPROCS(0), "restored by Stop")

	rt, err = New(Config{Workers: 2, Pinning: PinOff, GOMAXPROCS: -1})
	require.NoError(t, err)
	require.NoError(t, rt.Start())
	assert.Equal(t, 2, goruntime.GOMAXPROCS(0), "left alone")
	stop(t, rt)

	rt, err = New(Config{Workers: 2, Pinning: PinOff, GOMAXPROCS: 5})
	require.NoError(t, err)
	require.NoError(t, rt.Start())
	assert.Equal(t, 5, goruntime.GOMAXPROCS(0))
	stop(t, rt)
	assert.Equal(t, 2, goruntime.GOMAXPROCS(0))

	_, err = New(Config{Workers: 2, Pinning: PinOff, GOMAXPROCS: 2})
	assert.Error(t, err, "GOMAXPROCS must exceed the worker count")
}

func TestLaneOptionsAndRegistration(t *testing.T) {
	rt, err := New(Config{Workers: 1, Pinning: PinOff, Policy: lanes.Shares, Guard: time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, lanes.Shares, rt.Lanes().Policy())
	assert.Equal(t, time.Millisecond, rt.Lanes().Guard())
	bg, err := rt.RegisterLane(lanes.Spec{Name: "background", Priority: 2, Shares: 10})
	require.NoError(t, err)
	require.NoError(t, rt.Start())
	defer stop(t, rt)
	_, err = rt.RegisterLane(lanes.Spec{Name: "late"})
	assert.ErrorIs(t, err, lanes.ErrFrozen)
	require.NoError(t, rt.Lanes().SetShares(bg, 50), "shares are tunable while running")
	ran := make(chan struct{})
	require.NoError(t, rt.Submit(bg, func() { close(ran) }))
	<-ran
	_, err = New(Config{Policy: lanes.Policy(9), Pinning: PinOff})
	assert.Error(t, err)
}

func TestIsolatedBlockingNeverDeadlocks(t *testing.T) {
	// Handlers that block without Await hold their workers; with every
	// worker blocked, work Await runs off the workers still completes and
	// the blocked handlers finish.
	rt, err := New(Config{Workers: 2, Pinning: PinOff})
	require.NoError(t, err)
	require.NoError(t, rt.Start())
	defer stop(t, rt)
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		require.NoError(t, rt.Worker(i).Submit(lanes.Upstream, func() {
			defer wg.Done()
			ch := make(chan int)
			go func() { time.Sleep(10 * time.Millisecond); ch <- 1 }()
			<-ch // blocks the worker: the isolated model
		}))
	}
	wg.Wait()
	assert.Eventually(t, func() bool { return rt.Busy() == 0 }, 10*time.Second, time.Millisecond)
}

func TestConfigLanesRegisterInOrder(t *testing.T) {
	rt, err := New(Config{Workers: 1, Pinning: PinOff, Lanes: []lanes.Spec{
		{Name: "background", Priority: 2, Shares: 10},
		{Name: "reports", Priority: 1},
	}})
	require.NoError(t, err)
	bg, ok := rt.Lanes().Lookup("background")
	require.True(t, ok)
	assert.Equal(t, lanes.ID(2), bg)
	rep, ok := rt.Lanes().Lookup("reports")
	require.True(t, ok)
	assert.Equal(t, lanes.ID(3), rep)
	sp, err := rt.Lanes().Spec(bg)
	require.NoError(t, err)
	assert.Equal(t, uint32(10), sp.Shares)

	_, err = New(Config{Workers: 1, Pinning: PinOff, Lanes: []lanes.Spec{{Name: "upstream"}}})
	require.ErrorIs(t, err, lanes.ErrDuplicate)
	assert.Contains(t, err.Error(), "Config.Lanes")
}
