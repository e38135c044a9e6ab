// Package redistest starts a private redis-server for a test, for the
// packages whose tests need a real Redis (the await recipe, and later a
// Redis-backed controller and rate limiter).
//
// Each server listens on a free loopback port, keeps nothing on disk and
// lives as long as the test that started it. The redis-server program comes
// from PATH; where it is missing the test is skipped with the command that
// installs it (apt-get install -y redis-server), except under CI=true, where
// it fails, so that CI cannot pass without running it.
package redistest

import (
	"bufio"
	"bytes"
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
	path, err := exec.LookPath(Program)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redistest: %s is not installed (%s): %v", Program, InstallCommand, err)
		}
		t.Skipf("redistest: %s is not installed; install it (%s) to run this test", Program, InstallCommand)
	}
	dir := t.TempDir()
	// The free port is found by listening on it and closing it, so another
	// process may take it before the server does; then try another.
	const attempts = 3
	for i := range attempts {
		port, err := freePort()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		s, err := start(path, port, dir)
		if err == nil {
			t.Cleanup(func() {
				if err := s.stop(); err != nil {
					t.Errorf("redistest: %v", err)
				}
				if t.Failed() {
					t.Logf("redistest: %s output:\n%s", Program, s.out.String())
				}
			})
			return s.addr
		}
		if i == attempts-1 || !errors.Is(err, errExited) {
			t.Fatalf("redistest: %v", err)
		}
	}
	panic("unreachable")
}

// errExited is the error of a server that exited before answering, as it
// does when another process took its port first.
var errExited = errors.New("exited before answering")

// server is a started redis-server.
type server struct {
	addr   string
	cmd    *exec.Cmd
	out    syncBuffer
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
	// The kernel kills the server when the thread that started it ends: the
	// goroutine below holds that thread until the server has exited, so
	// only the death of the whole test process can end it sooner.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
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

// stop ends the server with SIGTERM, or SIGKILL if it has not exited
// stopTimeout later, and waits for it.
func (s *server) stop() error {
	select {
	case <-s.exited:
		return nil
	default:
	}
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

// syncBuffer is a bytes.Buffer that the server's output can be written to
// while it is read.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
