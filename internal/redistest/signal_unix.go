//go:build unix

package redistest

import (
	"os"
	"syscall"
)

// Pause stops the server process with SIGSTOP: connections stay open and
// the port accepts, but nothing is answered, as with a Redis that hangs.
// Resume continues it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a server stopped by Pause (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

// continueProcess continues p if Pause stopped it.
func continueProcess(p *os.Process) { _ = p.Signal(syscall.SIGCONT) }
