package lograte

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A limiter allows its burst a second; the next line logged says how many
// were not.
func TestLimiterAllowsBurstASecond(t *testing.T) {
	p := New(10)
	t0 := time.Unix(1000, 0)
	for i := range 10 {
		ok, dropped := p.Allow(t0.Add(time.Duration(i) * time.Millisecond))
		require.True(t, ok)
		require.Zero(t, dropped)
	}
	for range 25 {
		ok, _ := p.Allow(t0.Add(500 * time.Millisecond))
		assert.False(t, ok)
	}
	ok, dropped := p.Allow(t0.Add(time.Second))
	assert.True(t, ok, "a new second")
	assert.Equal(t, int64(25), dropped)
	ok, dropped = p.Allow(t0.Add(time.Second + time.Millisecond))
	assert.True(t, ok)
	assert.Zero(t, dropped)
}
