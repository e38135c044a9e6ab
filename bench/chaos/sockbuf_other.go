//go:build !unix

package chaos

// smallBuffers leaves the socket's buffers as they are: without the unix
// socket options, the chaos clients' small windows are the system's
// default ones.
func smallBuffers(uintptr) error { return nil }
