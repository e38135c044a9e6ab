package queue

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hEntry is a caller's per-request struct with an embedded Entry, as the
// server has. state is 1 from just before Push until a callback or a
// successful Remove resolves it; a second resolution is a bug.
type hEntry struct {
	e      Entry
	state  atomic.Int32
	start  func()
	reject func(Reason)
}

type hammerCounts struct {
	pushes, resolved, removes, starts, rejects, bad atomic.Int64
}

func (hc *hammerCounts) newEntry() *hEntry {
	h := &hEntry{}
	h.start = func() {
		if !h.state.CompareAndSwap(1, 0) {
			hc.bad.Add(1)
		}
		hc.starts.Add(1)
		hc.resolved.Add(1)
	}
	h.reject = func(Reason) {
		if !h.state.CompareAndSwap(1, 0) {
			hc.bad.Add(1)
		}
		hc.rejects.Add(1)
		hc.resolved.Add(1)
	}
	return h
}

// TestHammer runs Push, Remove, Pump, Expire, Stats and Wait from many
// goroutines at once (run it with -race) and checks that every entry is
// resolved exactly once: by one callback, or by a Remove that returned true.
func TestHammer(t *testing.T) {
	const (
		owners    = 8
		perOwner  = 16
		ownerOps  = 20000
		waiters   = 4
		waiterOps = 1000
	)
	clk := &fakeClock{}
	q := New(Config{Clock: clk.now, Order: CoDel, MaxLen: 64,
		Timeout: 3 * time.Millisecond, Target: time.Millisecond / 2, Interval: 2 * time.Millisecond})
	var hc hammerCounts
	var waitStarts, waitRejects, waitCancels, waitDeadlines atomic.Int64

	var work sync.WaitGroup // owners and waiters
	var bg sync.WaitGroup   // pumpers and the expirer
	stop := make(chan struct{})
	var progress atomic.Int64

	for o := range owners {
		work.Add(1)
		go func() {
			defer work.Done()
			r := rand.New(rand.NewPCG(uint64(o), 1))
			es := make([]*hEntry, perOwner)
			for i := range es {
				es[i] = hc.newEntry()
			}
			for i := range ownerOps {
				// Close the queue while the owners still push.
				if progress.Add(1) == owners*ownerOps*9/10 {
					q.Close()
				}
				h := es[i%perOwner]
				switch {
				case h.state.Load() == 0:
					h.state.Store(1)
					hc.pushes.Add(1)
					q.Push(&h.e, Class(r.IntN(4)), h.start, h.reject)
				case r.IntN(4) == 0:
					if q.Remove(&h.e) {
						if !h.state.CompareAndSwap(1, 0) {
							hc.bad.Add(1)
						}
						hc.removes.Add(1)
						hc.resolved.Add(1)
					}
				}
				if r.IntN(8) == 0 {
					n := r.IntN(3)
					q.Pump(func(*Entry) bool { n--; return n >= 0 })
				}
			}
		}()
	}
	for w := range waiters {
		work.Add(1)
		go func() {
			defer work.Done()
			r := rand.New(rand.NewPCG(uint64(w), 2))
			for range waiterOps {
				ctx, cancel := context.WithCancel(context.Background())
				switch r.IntN(3) {
				case 0:
					cancel() // Wait pushes nothing
				case 1:
					// Ends at some real time, usually while waiting.
					ctx, cancel = context.WithTimeout(ctx, time.Duration(r.IntN(50))*time.Microsecond)
				}
				err := q.Wait(ctx, Class(r.IntN(3)))
				cancel()
				switch err {
				case nil:
					waitStarts.Add(1)
				case context.Canceled:
					waitCancels.Add(1)
				case context.DeadlineExceeded:
					waitDeadlines.Add(1)
				default:
					waitRejects.Add(1)
				}
			}
		}()
	}
	for p := range 2 {
		bg.Add(1)
		go func() {
			defer bg.Done()
			r := rand.New(rand.NewPCG(uint64(p), 3))
			for {
				select {
				case <-stop:
					return
				default:
				}
				q.Pump(func(*Entry) bool { return r.IntN(3) != 0 })
				runtime.Gosched() // let the owners and waiters run
			}
		}()
	}
	bg.Add(1)
	go func() {
		defer bg.Done()
		r := rand.New(rand.NewPCG(9, 4))
		for {
			select {
			case <-stop:
				return
			default:
			}
			clk.add(r.Int64N(ms / 4))
			q.Expire()
			_ = q.Stats()
			_ = q.Len()
			runtime.Gosched()
		}
	}()

	work.Wait()
	close(stop)
	bg.Wait()
	q.Close()

	require.Zero(t, hc.bad.Load(), "an entry resolved twice")
	require.Equal(t, hc.pushes.Load(), hc.resolved.Load(), "every push resolved once")
	require.Equal(t, 0, q.Len())
	st := q.Stats()
	var rejected uint64
	for _, n := range st.Rejected {
		rejected += n
	}
	assert.Equal(t, st.Pushes, st.Started+st.Removed+rejected, "stats add up")
	assert.Equal(t, uint64(hc.starts.Load()+waitStarts.Load()), st.Started)
	assert.Equal(t, uint64(hc.rejects.Load()+waitRejects.Load()), rejected)
	// A Wait whose context ended removed its entry, unless the context had
	// ended before it pushed (then it pushed nothing).
	waitRemoved := st.Removed - uint64(hc.removes.Load())
	assert.LessOrEqual(t, waitRemoved, uint64(waitDeadlines.Load()))
	assert.Equal(t, uint64(hc.pushes.Load()+waiters*waiterOps-waitCancels.Load()-waitDeadlines.Load())+waitRemoved, st.Pushes)
	t.Logf("pushes %d started %d removed %d rejected %v; waits: %d started, %d rejected, %d cancelled, %d timed out",
		st.Pushes, st.Started, st.Removed, st.Rejected, waitStarts.Load(), waitRejects.Load(), waitCancels.Load(), waitDeadlines.Load())
	assert.Positive(t, st.Started)
	assert.Positive(t, st.Removed)
	assert.Positive(t, st.Rejected[Closed])
}
