//go:build linux

package bench

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPointDescribe(t *testing.T) {
	assert.Equal(t, "sweep 2x", Point{Multiple: 2}.describe("sweep"))
	assert.Equal(t, "noisy 800/s", Point{Rate: 800}.describe("noisy"))
	assert.Equal(t, "stray trivial", Point{Part: "trivial"}.describe("stray"))
	assert.True(t, strings.HasPrefix(Point{Part: "cpu+stray", Multiple: 2}.describe("stray"), "stray cpu+stray 2x"))
}
