//go:build !linux

package server

import (
	"errors"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestListenAndServeFailOffLinux(t *testing.T) {
	h := HTTPHandler(http.NotFoundHandler())
	srv, err := Listen(nil, "127.0.0.1:0", h, Config{})
	require.Error(t, err)
	assert.Nil(t, srv)
	assert.ErrorIs(t, err, errors.ErrUnsupported)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	srv, err = Serve(nil, l, h, Config{})
	require.Error(t, err)
	assert.Nil(t, srv)
	assert.ErrorIs(t, err, errors.ErrUnsupported)
}
