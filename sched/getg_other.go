//go:build !amd64 && !arm64

package sched

// getg identifies the caller by its thread: a coroutine runs only on its
// worker's locked thread, and no other goroutine runs there. It costs a system
// call, unlike the assembly versions for amd64 and arm64.
func getg() uintptr { return uintptr(gettid()) }
