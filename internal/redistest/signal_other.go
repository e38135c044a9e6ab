//go:build !unix

package redistest

import (
	"os"
	"runtime"
)

// Pause fails the test: without SIGSTOP a process cannot be paused.
func (s *Server) Pause() {
	s.t.Helper()
	s.t.Fatalf("redistest: Pause needs SIGSTOP, which %s does not have", runtime.GOOS)
}

// Resume fails the test, as Pause does.
func (s *Server) Resume() {
	s.t.Helper()
	s.t.Fatalf("redistest: Resume needs SIGCONT, which %s does not have", runtime.GOOS)
}

// continueProcess does nothing: no process was paused.
func continueProcess(*os.Process) {}
