package monotime

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestClock(t *testing.T) {
	c := Clock()
	a := c()
	assert.GreaterOrEqual(t, a, int64(0))
	time.Sleep(time.Millisecond)
	b := c()
	assert.GreaterOrEqual(t, b-a, int64(time.Millisecond), "monotonic, in nanoseconds")
}
