package obs

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
)

func TestBounds(t *testing.T) {
	b := Bounds()
	require.Len(t, b, numBuckets-1)
	assert.Equal(t, time.Microsecond, b[0])
	assert.Equal(t, 100*time.Second, b[len(b)-1])
	assert.IsIncreasing(t, b)
	for _, s := range []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10} {
		assert.Contains(t, b, time.Duration(s*float64(time.Second)), "Prometheus's usual bound %v", s)
	}
}

func TestHistCountsAndQuantiles(t *testing.T) {
	var h Hist
	for i := 1; i <= 100; i++ {
		h.Observe(time.Duration(i) * time.Millisecond)
	}
	h.Observe(-time.Second)     // counts as zero
	h.Observe(1000 * time.Hour) // beyond the last bound
	c := h.Counts()
	assert.Equal(t, uint64(102), c.Count)
	assert.Equal(t, 5050*time.Millisecond+1000*time.Hour, c.Sum)
	assert.Equal(t, uint64(1), c.Buckets[0])
	assert.Equal(t, uint64(1), c.Buckets[numBuckets-1])
	for _, q := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 51 * time.Millisecond}, {0.9, 92 * time.Millisecond}, {0.99, 100 * time.Millisecond}} {
		got := c.Quantile(q.q)
		assert.InEpsilon(t, float64(q.want), float64(got), 0.25, "q %v: %v", q.q, got)
	}
	assert.Equal(t, 100*time.Second, c.Quantile(1))
	assert.Zero(t, Counts{}.Quantile(0.5))

	prev := c
	h.Observe(3 * time.Millisecond)
	d := h.Counts().Sub(prev)
	assert.Equal(t, uint64(1), d.Count)
	assert.Equal(t, 3*time.Millisecond, d.Sum)
	assert.Equal(t, 3*time.Millisecond, d.Mean())
	assert.Equal(t, 3*time.Millisecond, d.Quantile(1), "the bucket's upper bound")

	cum := h.Counts().Cumulative([]time.Duration{time.Millisecond, 10 * time.Millisecond, 7 * time.Millisecond, time.Second})
	assert.Equal(t, map[float64]uint64{0.001: 2, 0.01: 12, 1: 102}, cum, "7 ms is not a bound: skipped")
}

func TestHistAllocatesNothing(t *testing.T) {
	var h Hist
	assert.Zero(t, testing.AllocsPerRun(1000, func() { h.Observe(42 * time.Microsecond) }))
}

func TestRecorder(t *testing.T) {
	var r Recorder
	a := &admit.Attempt{}
	r.Started(a, 2*time.Millisecond)
	r.Ended(a, admit.Outcome{Status: 200, Latency: 5 * time.Millisecond})
	r.Ended(a, admit.Outcome{Status: 500, Err: errors.New("panic")})
	r.Ended(a, admit.Outcome{})
	r.Rejected(a, "busy", 503)
	r.Rejected(a, "busy", 503)
	r.Rejected(a, "rate-limit", 429)
	s := r.Snapshot()
	assert.Equal(t, uint64(1), s.Wait.Count)
	assert.Equal(t, uint64(3), s.Latency.Count)
	assert.Equal(t, [NumClasses]uint64{1, 0, 1, 0, 1, 3}, s.Classes)
	assert.Equal(t, uint64(1), s.Errors)
	assert.Equal(t, []RejectionCount{
		{Rejection{"busy", 503}, 2},
		{Rejection{"rate-limit", 429}, 1},
	}, s.Rejected)
	assert.Equal(t, "other", ClassName(0))
	assert.Equal(t, "4xx", ClassName(4))
	assert.Equal(t, "other", ClassName(9))

	assert.Zero(t, testing.AllocsPerRun(1000, func() {
		r.Started(a, time.Millisecond)
		r.Ended(a, admit.Outcome{Status: 204})
		r.Rejected(a, "busy", 503)
	}))
}

func TestRecorderConcurrentRejections(t *testing.T) {
	var r Recorder
	var wg sync.WaitGroup
	reasons := []string{"a", "b", "c", "d"}
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				r.Rejected(nil, reasons[(g+i)%len(reasons)], 503)
			}
		})
	}
	wg.Wait()
	var total uint64
	for _, rc := range r.Snapshot().Rejected {
		total += rc.N
	}
	assert.Equal(t, uint64(8000), total)
}

// BenchmarkRecorder is what one admitted request costs a Recorder: its
// start and its end.
func BenchmarkRecorder(b *testing.B) {
	var r Recorder
	a := &admit.Attempt{}
	b.ReportAllocs()
	for b.Loop() {
		r.Started(a, 3*time.Millisecond)
		r.Ended(a, admit.Outcome{Status: 200, Latency: 12 * time.Millisecond})
	}
}
