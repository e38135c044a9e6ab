//go:build !linux

package netpoll

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"time"
)

// Off Linux there is no executor (sched.New fails), so no Listener or Conn
// can exist: Listen and Adopt fail with errNotLinux at once. The functions
// below stand in for the system calls of sys_linux.go so that the package
// builds; they fail the same way should one be reached.

// errNotLinux is Listen's and Adopt's error off Linux. It wraps
// errors.ErrUnsupported.
var errNotLinux = fmt.Errorf("netpoll: the executor needs Linux (epoll, SO_TIMESTAMPNS); on %s, sluice.Listen serves on net/http instead (%w)",
	runtime.GOOS, errors.ErrUnsupported)

// supported reports whether the executor can run here: off Linux, never.
func supported() error { return errNotLinux }

// Linux's epoll and poll(2) event bits, which only the Linux system calls
// interpret.
const (
	epollIn        = 0x1
	epollOut       = 0x4
	epollRDHup     = 0x2000
	epollErr       = 0x8
	epollHup       = 0x10
	epollET        = 0x80000000
	epollExclusive = 0x10000000

	pollIn  = 0x1 | 0x2000
	pollOut = 0x4
)

// sockaddr stands in for a socket address.
type sockaddr = any

func closeFD(int) error { return errNotLinux }

func setNoDelay(int) {}

func accept(int) (int, sockaddr, error) { return -1, nil, errNotLinux }

func shutdownRead(int) error { return errNotLinux }

func localAddr(int) (netip.AddrPort, error) { return netip.AddrPort{}, errNotLinux }

func addrPort(sockaddr) netip.AddrPort { return netip.AddrPort{} }

func parseStamp([]byte) int64 { return 0 }

func readFD(int, []byte) (int, error) { return 0, errNotLinux }

func recvFD(int, []byte, []byte) (n, oobn int, err error) { return 0, 0, errNotLinux }

func writeFD(int, []byte) ([]byte, error) { return nil, errNotLinux }

func pollFor(int, int16, time.Duration) error { return errNotLinux }

func sendFileFD(int, int, int64) (int64, error) { return 0, errNotLinux }

func adoptFD(int, bool) (netip.AddrPort, error) { return netip.AddrPort{}, errNotLinux }

func checkListening(int) error { return errNotLinux }

// dualStack is false: nothing is listened on.
func dualStack() bool { return false }

func listenFD(listenAddr, uint16, sockOpts) (int, uint16, error) { return -1, 0, errNotLinux }
