//go:build !linux

package runtime

import (
	"errors"
	goruntime "runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewFailsOffLinux(t *testing.T) {
	rt, err := New(Config{Workers: 1})
	require.Error(t, err)
	assert.Nil(t, rt)
	assert.ErrorIs(t, err, errors.ErrUnsupported)
}

func TestAffinityCPUsOffLinux(t *testing.T) {
	cpus, err := AffinityCPUs()
	require.NoError(t, err)
	assert.Len(t, cpus, goruntime.NumCPU())
}
