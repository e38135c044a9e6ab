//go:build !linux

package netpoll

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestListenFailsOffLinux(t *testing.T) {
	l, err := Listen(nil, "127.0.0.1:0", Options{}, func(*Conn) {})
	require.Error(t, err)
	assert.Nil(t, l)
	assert.ErrorIs(t, err, errors.ErrUnsupported)

	l, err = Adopt(nil, 3, Options{}, func(*Conn) {})
	require.Error(t, err)
	assert.Nil(t, l)
	assert.ErrorIs(t, err, errors.ErrUnsupported)
}
