//go:build !linux

package redistest

import "syscall"

// sysProcAttr is nil: only Linux kills a child when the thread that
// started it ends, so a test process that dies leaves the server running.
func sysProcAttr() *syscall.SysProcAttr { return nil }
