package ratelimit

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a settable clock in nanoseconds, safe for concurrent use.
type fakeClock struct{ t atomic.Int64 }

func (c *fakeClock) now() int64          { return c.t.Load() }
func (c *fakeClock) set(t time.Duration) { c.t.Store(int64(t)) }

// newLimiter returns a Limiter on a fake clock at zero.
func newLimiter(t testing.TB, cfg Config) (*Limiter, *fakeClock) {
	t.Helper()
	clk := &fakeClock{}
	cfg.Clock = clk.now
	l, err := New(cfg)
	require.NoError(t, err)
	return l, clk
}

// allowN asks n times for key and returns how many were allowed.
func allowN(l *Limiter, key string, n int) int {
	ok := 0
	for range n {
		if l.Allow(key).Allowed {
			ok++
		}
	}
	return ok
}
