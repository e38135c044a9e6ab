//go:build unix

package chaos

import (
	"errors"

	"golang.org/x/sys/unix"
)

// smallBuffers sets the socket fd's receive and send buffers to 4 KiB.
func smallBuffers(fd uintptr) error {
	return errors.Join(
		unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096),
		unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, 4096))
}
