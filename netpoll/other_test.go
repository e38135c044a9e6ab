//go:build !linux

package netpoll

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestListenFailsOffLinux(t *testing.T) {
	l, err := Listen(nil, "127.0.0.1:0", Config{}, func(*Conn) {})
	require.Error(t, err)
	assert.Nil(t, l)
	assert.ErrorIs(t, err, errors.ErrUnsupported)

	l, err = Adopt(nil, 3, Config{}, func(*Conn) {})
	require.Error(t, err)
	assert.Nil(t, l)
	assert.ErrorIs(t, err, errors.ErrUnsupported)
}
