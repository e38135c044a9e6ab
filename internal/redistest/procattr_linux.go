package redistest

import "syscall"

// sysProcAttr asks the kernel to kill the server when the thread that
// started it ends.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
