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
