package drop

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestProbability(t *testing.T) {
	for _, c := range []struct{ v, lo, hi, p float64 }{
		{0, 0.6, 0.8, 0}, {0.6, 0.6, 0.8, 0}, {0.7, 0.6, 0.8, 0.5}, {0.8, 0.6, 0.8, 1}, {2, 0.6, 0.8, 1},
		{5, 5, 5, 0}, {5.01, 5, 5, 1}, {-1, 0, 1, 0},
	} {
		assert.InDelta(t, c.p, Probability(c.v, c.lo, c.hi), 1e-12, "%+v", c)
	}
}

func TestThreshold(t *testing.T) {
	assert.Zero(t, Threshold(0))
	assert.Zero(t, Threshold(-1))
	assert.Equal(t, uint64(math.MaxUint64), Threshold(1))
	assert.Equal(t, uint64(math.MaxUint64), Threshold(2))
	assert.Equal(t, uint64(1)<<63, Threshold(0.5))
}
