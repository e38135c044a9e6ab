// Package redistest starts a private redis-server for a test, for the
// packages whose tests need a real Redis (the await recipe, the rate
// limiter's and the tenant store's), and for the benchmarks that run a
// fleet against one (Launch).
//
// Each server listens on a free loopback port, keeps nothing on disk and
// lives as long as the test that started it. The redis-server program comes
// from PATH; where it is missing the test is skipped with the command that
// installs it (apt-get install -y redis-server), except under CI=true, where
// it fails, so that CI cannot pass without running it.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/syncbuf"
)

// Program is the server program that Start looks for on PATH.
const Program = "redis-server"

// InstallCommand installs Program on Debian and Ubuntu.
const InstallCommand = "apt-get install -y redis-server"

// How long Start waits for a server to answer, and the cleanup for it to
// exit after SIGTERM before killing it.
const (
	startTimeout = 10 * time.Second
	stopTimeout  = 10 * time.Second
)

// Start starts a redis-server for t on a free port of 127.0.0.1, without
// persistence (--save "" --appendonly no, in a temporary working
// directory), waits until it answers PING and returns its address,
// host:port, for a client's Addr. The server is stopped when the test and
// its subtests end (t.Cleanup); it is also killed if the test process dies.
// Without redis-server on PATH, Start skips t, naming InstallCommand, or,
// when the environment variable CI is "true", fails it. A server that does
// not start (its output is in the message) fails t.
func Start(t testing.TB) (addr string) {
	t.Helper()
	return StartServer(t).Addr()
}

// Server is a redis-server started by StartServer, which a test can stop,
// pause and start again on the same address, to see what its clients do
// while Redis is down or slow. Its methods fail the test on error; they are
// safe for concurrent use.
type Server struct {
	t    testing.TB
	path string // the program
	dir  string // its working directory
	port int

	mu  sync.Mutex
	cur *server // the running process, nil once stopped
}

// StartServer starts a redis-server as Start does and returns it, for a test
// that stops or pauses it; Start is StartServer(t).Addr().
func StartServer(t testing.TB) *Server {
	t.Helper()
	path, err := exec.LookPath(Program)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redistest: %s is not installed (%s): %v", Program, InstallCommand, err)
		}
		t.Skipf("redistest: %s is not installed; install it (%s) to run this test", Program, InstallCommand)
	}
	srv := &Server{t: t, path: path, dir: t.TempDir()}
	// The free port is found by listening on it and closing it, so another
	// process may take it before the server does; then try another.
	const attempts = 3
	for i := range attempts {
		port, err := freePort()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		s, err := start(path, port, srv.dir)
		if err == nil {
			srv.port, srv.cur = port, s
			t.Cleanup(func() {
				srv.mu.Lock()
				defer srv.mu.Unlock()
				if srv.cur == nil {
					return
				}
				if err := srv.cur.stop(); err != nil {
					t.Errorf("redistest: %v", err)
				}
				if t.Failed() {
					t.Logf("redistest: %s output:\n%s", Program, srv.cur.out.String())
				}
				srv.cur = nil
			})
			return srv
		}
		if i == attempts-1 || !errors.Is(err, errExited) {
			t.Fatalf("redistest: %v", err)
		}
	}
	panic("unreachable")
}

// ErrNotInstalled is returned by Launch when redis-server is not on PATH;
// its message names InstallCommand.
var ErrNotInstalled = errors.New("redistest: " + Program + " is not installed (" + InstallCommand + ")")

// Launch starts a redis-server outside a test (a benchmark's), as Start
// does, in dir (which it keeps nothing in), and returns its address and
// the function that stops it. Without redis-server on PATH it returns
// ErrNotInstalled.
func Launch(dir string) (addr string, stop func() error, err error) {
	path, err := exec.LookPath(Program)
	if err != nil {
		return "", nil, ErrNotInstalled
	}
	const attempts = 3
	for i := range attempts {
		port, err := freePort()
		if err != nil {
			return "", nil, fmt.Errorf("redistest: %w", err)
		}
		s, err := start(path, port, dir)
		if err == nil {
			return s.addr, func() error {
				if err := s.stop(); err != nil {
					return fmt.Errorf("redistest: %w", err)
				}
				return nil
			}, nil
		}
		if i == attempts-1 || !errors.Is(err, errExited) {
			return "", nil, fmt.Errorf("redistest: %w", err)
		}
	}
	panic("unreachable")
}

// Addr is the server's address, host:port; it stays the same across Stop
// and Restart.
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Stop stops the server (SIGTERM, then SIGKILL) and waits for it to exit:
// its clients then find the port closed. Stopping a stopped server does
// nothing.
func (s *Server) Stop() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return
	}
	if err := s.cur.stop(); err != nil {
		s.t.Errorf("redistest: %v", err)
	}
	s.cur = nil
}

// Restart starts the server again on the same port, empty (nothing is
// persisted), and waits until it answers; it stops it first if it runs.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := start(s.path, s.port, s.dir)
	if err != nil {
		s.t.Fatalf("redistest: restarting on port %d: %v", s.port, err)
	}
	s.cur = cur
}

func (s *Server) signal(sig os.Signal) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		s.t.Fatalf("redistest: %v to a stopped server", sig)
	}
	if err := s.cur.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: %v: %v", sig, err)
	}
}

// errExited is the error of a server that exited before answering, as it
// does when another process took its port first.
var errExited = errors.New("exited before answering")

// server is a started redis-server.
type server struct {
	addr   string
	cmd    *exec.Cmd
	out    syncbuf.Buffer
	exited chan struct{} // closed once the process has been waited for
}

// start runs redis-server on port and waits until it answers.
func start(path string, port int, dir string) (*server, error) {
	s := &server{
		addr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		exited: make(chan struct{}),
	}
	s.cmd = exec.Command(path,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--daemonize", "no", "--logfile", "")
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	// On Linux the kernel kills the server when the thread that started it
	// ends (see SysProcAttr): the goroutine below holds that thread until
	// the server has exited, so only the death of the whole test process
	// can end it sooner.
	s.cmd.SysProcAttr = SysProcAttr()
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(s.exited)
		if err := s.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		s.cmd.Wait() // its error says how the server ended, which stop decides
	}()
	if err := <-started; err != nil {
		return s, fmt.Errorf("starting %s: %w", path, err)
	}

	deadline := time.Now().Add(startTimeout)
	for {
		err := ping(s.addr)
		if err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			return s, fmt.Errorf("%s on port %d %w: %s", Program, port, errExited, s.out.String())
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			return s, fmt.Errorf("%s on port %d did not answer within %v: %w; output: %s", Program, port, startTimeout, err, s.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop ends the server (continued first if paused) with SIGTERM, or SIGKILL if it has not exited
// stopTimeout later, and waits for it.
func (s *server) stop() error {
	select {
	case <-s.exited:
		return nil
	default:
	}
	// A paused server (Server.Pause) would not act on SIGTERM until
	// continued.
	continueProcess(s.cmd.Process)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping %s: %w", Program, err)
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(stopTimeout):
	}
	s.cmd.Process.Kill()
	<-s.exited
	return fmt.Errorf("%s did not exit within %v of SIGTERM and was killed", Program, stopTimeout)
}

// ping sends PING to the server at addr and checks that it answers PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
