//go:build !linux

package redistest

import "syscall"

// SysProcAttr returns nil: only Linux kills a child when the thread that
// started it ends, so here a test process that dies leaves its server
// running.
func SysProcAttr() *syscall.SysProcAttr { return nil }
