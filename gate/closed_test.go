package gate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestClosedTime(t *testing.T) {
	var now int64 = 1000
	reads := 0
	clock := func() int64 { reads++; return now }
	var c ClosedTime
	c.Admitted(clock) // open: nothing to do, no clock read
	assert.Equal(t, 0, reads)
	assert.Equal(t, time.Duration(0), c.Total(clock))

	c.Refused(clock) // closes at 1000
	now = 1500
	c.Refused(clock) // still closed: no clock read
	assert.Equal(t, time.Duration(500), c.Total(clock), "an open interval counts up to now")
	now = 1800
	c.Admitted(clock) // reopens: 800 closed
	now = 5000
	assert.Equal(t, time.Duration(800), c.Total(clock))
	c.Refused(clock)
	now = 5100
	c.Admitted(clock)
	assert.Equal(t, time.Duration(900), c.Total(clock))
}
