package admit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestClosedTime(t *testing.T) {
	var c closedTime
	c.admitted(1000) // open: nothing to do
	assert.Equal(t, time.Duration(0), c.at(1000))

	c.refused(1000) // closes at 1000
	c.refused(1500) // still closed
	assert.Equal(t, time.Duration(500), c.at(1500), "an open interval counts up to now")
	c.admitted(1800) // reopens: 800 closed
	assert.Equal(t, time.Duration(800), c.at(5000))
	c.refused(5000)
	c.admitted(5100)
	assert.Equal(t, time.Duration(900), c.at(6000))

	// A clock that starts at 0 still closes.
	var z closedTime
	z.refused(0)
	assert.Equal(t, time.Duration(9), z.at(10))
}
