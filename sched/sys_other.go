//go:build !linux

package sched

import (
	"errors"
	"fmt"
	"runtime"
)

// The executor needs epoll, eventfd and Linux's thread affinity. Off Linux
// New fails with errNotLinux before any worker exists, so the functions
// below, which stand in for the system calls of sys_linux.go, are never
// reached; they fail the same way should one be.

// epollEvent has the fields of Linux's struct epoll_event that the worker
// reads.
type epollEvent struct {
	Events uint32
	Fd     int32
	Pad    int32
}

// errNotLinux is New's error off Linux. It wraps errors.ErrUnsupported.
var errNotLinux = fmt.Errorf("sched: the executor needs Linux (epoll, eventfd, pinned threads); on %s, sluice.Listen serves on net/http instead (%w)",
	runtime.GOOS, errors.ErrUnsupported)

// supported reports whether the executor can run here: off Linux, never.
func supported() error { return errNotLinux }

func openPoll(int) (epfd, evfd int, err error) { return -1, -1, errNotLinux }

func closeFD(int) {}

func epollWait(int, []epollEvent, int) (int, error) { return 0, errNotLinux }

func epollAdd(int, int, *epollEvent) error { return errNotLinux }

func epollMod(int, int, *epollEvent) error { return errNotLinux }

func epollDel(int, int) error { return errNotLinux }

func readFD(int, []byte) (int, error) { return 0, errNotLinux }

func writeFD(int, []byte) (int, error) { return 0, errNotLinux }

// gettid returns 0: off Linux no worker thread exists to be told apart.
func gettid() int { return 0 }

func pinThread(int) error { return errNotLinux }
