package redistest

import "syscall"

// SysProcAttr returns the attributes of a server process started for a
// test: on Linux, a request that the kernel kill it with SIGKILL when the
// thread that started it ends (Pdeathsig), so that it cannot outlive the
// test process; run cmd.Start on a goroutine locked to its thread
// (runtime.LockOSThread) that lives until the process is waited for.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
