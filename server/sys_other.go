//go:build !linux

package server

import (
	"errors"
	"fmt"
	"runtime"
)

// Off Linux there is no executor to serve on: Listen and Serve fail with
// errNotLinux at once, so no connection exists, and the functions below,
// which stand in for sys_linux.go's system calls, are never reached.

// errNotLinux is Listen's and Serve's error off Linux. It wraps
// errors.ErrUnsupported.
var errNotLinux = fmt.Errorf("server: the sluice server needs Linux (its executor uses epoll); on %s, sluice.Listen serves on net/http instead (%w)",
	runtime.GOOS, errors.ErrUnsupported)

// supported reports whether the server can run here: off Linux, never.
func supported() error { return errNotLinux }

func dupFD(uintptr) (int, error) { return -1, errNotLinux }

func closeFD(int) {}

func shutdownWrite(int) error { return errNotLinux }

func shutdownBoth(int) error { return errNotLinux }

func bytesWaiting(int) (int, error) { return 0, errNotLinux }

func readNow(uintptr, []byte) int { return 0 }

func writeNow(uintptr, []byte) int { return 0 }
