package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBackendCPUs(t *testing.T) {
	assert.Nil(t, backendCPUs(nil, 3, 1), "shared: the parent's CPUs")
	assert.Equal(t, []int{1}, backendCPUs([]int{1}, 3, 2), "fewer CPUs than backends: all share them")
	assert.Equal(t, []int{1, 2}, backendCPUs([]int{1, 2}, 3, 0))
	assert.Equal(t, [][]int{{1, 2}, {3, 4, 5}, {6, 7, 8}}, [][]int{
		backendCPUs([]int{1, 2, 3, 4, 5, 6, 7, 8}, 3, 0),
		backendCPUs([]int{1, 2, 3, 4, 5, 6, 7, 8}, 3, 1),
		backendCPUs([]int{1, 2, 3, 4, 5, 6, 7, 8}, 3, 2),
	}, "disjoint, as even as can be")
}
