package server

import "golang.org/x/sys/unix"

// This file and sys_other.go are the server's own system calls on its
// connections' sockets (the rest are netpoll's).

// supported reports whether the server can run here: on Linux, always.
func supported() error { return nil }

// dupFD duplicates the descriptor fd, close-on-exec.
func dupFD(fd uintptr) (int, error) { return unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }

func closeFD(fd int) { unix.Close(fd) }

// shutdownWrite ends the connection's sending side.
func shutdownWrite(fd int) error { return unix.Shutdown(fd, unix.SHUT_WR) }

// shutdownBoth ends both sides of the connection.
func shutdownBoth(fd int) error { return unix.Shutdown(fd, unix.SHUT_RDWR) }

// bytesWaiting returns how many bytes wait in the socket's receive queue.
func bytesWaiting(fd int) (int, error) { return unix.IoctlGetInt(fd, unix.SIOCINQ) }

// readNow reads what the non-blocking socket fd holds now into b: the
// count, or 0 when it holds nothing, has ended or fails.
func readNow(fd uintptr, b []byte) int {
	for {
		n, err := unix.Read(int(fd), b)
		if err == unix.EINTR {
			continue
		}
		return max(n, 0)
	}
}

// writeNow writes what the non-blocking socket fd takes of b now: the
// count, or 0 when it takes nothing or fails.
func writeNow(fd uintptr, b []byte) int {
	for {
		n, err := unix.Write(int(fd), b)
		if err == unix.EINTR {
			continue
		}
		return max(n, 0)
	}
}
