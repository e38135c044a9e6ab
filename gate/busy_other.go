//go:build !linux

package gate

// schedIdleHook returns nil: the executor exists only on Linux.
func schedIdleHook(BusySource) func(fn func()) { return nil }
