package sched

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// This file and sys_other.go are the executor's system interface: epoll,
// the worker's eventfd, thread ids and CPU affinity. The Linux versions
// here are the system calls themselves, small enough to be inlined.

// epollEvent is the kernel's struct epoll_event.
type epollEvent = unix.EpollEvent

// supported reports whether the executor can run here: on Linux, always.
func supported() error { return nil }

// openPoll creates a worker's epoll instance and its wake-up eventfd,
// registered in it under eventfdToken.
func openPoll(id int) (epfd, evfd int, err error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return -1, -1, fmt.Errorf("sched: worker %d: epoll_create1: %w", id, err)
	}
	ev, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(ep)
		return -1, -1, fmt.Errorf("sched: worker %d: eventfd: %w", id, err)
	}
	e := unix.EpollEvent{Events: unix.EPOLLIN, Fd: eventfdToken}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, ev, &e); err != nil {
		unix.Close(ep)
		unix.Close(ev)
		return -1, -1, fmt.Errorf("sched: worker %d: register eventfd: %w", id, err)
	}
	return ep, ev, nil
}

func closeFD(fd int) { unix.Close(fd) }

func epollWait(epfd int, events []epollEvent, msec int) (int, error) {
	return unix.EpollWait(epfd, events, msec)
}

func epollAdd(epfd, fd int, ev *epollEvent) error {
	return unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, ev)
}

func epollMod(epfd, fd int, ev *epollEvent) error {
	return unix.EpollCtl(epfd, unix.EPOLL_CTL_MOD, fd, ev)
}

func epollDel(epfd, fd int) error { return unix.EpollCtl(epfd, unix.EPOLL_CTL_DEL, fd, nil) }

func readFD(fd int, p []byte) (int, error) { return unix.Read(fd, p) }

func writeFD(fd int, p []byte) (int, error) { return unix.Write(fd, p) }

// gettid returns the calling thread's kernel id.
func gettid() int { return unix.Gettid() }

// pinThread restricts the calling thread to cpu.
func pinThread(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(0, &set)
}
