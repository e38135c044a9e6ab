//go:build !linux

package sched

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewFailsOffLinux(t *testing.T) {
	s, err := New(Config{Workers: 1})
	require.Error(t, err)
	assert.Nil(t, s)
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	assert.Contains(t, err.Error(), "needs Linux")
}

func TestAwaitIsAPlainCallOffLinux(t *testing.T) {
	ctx := context.Background()
	assert.False(t, InCoroutine(ctx))
	v, err := Await(ctx, func(context.Context) (int, error) { return 7, nil })
	require.NoError(t, err)
	assert.Equal(t, 7, v)
	assert.NoError(t, Yield(ctx))
}
