package redistest

import (
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A server answers while its test runs and is gone once the test ends.
func TestStart(t *testing.T) {
	var addr string
	t.Run("server", func(t *testing.T) {
		addr = Start(t)
		require.NoError(t, ping(addr))
		// A second server for the same test gets its own port.
		other := Start(t)
		assert.NotEqual(t, addr, other)
		require.NoError(t, ping(other))
	})
	if addr == "" {
		t.Skip("no server was started")
	}
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	assert.Error(t, err, "the server still listens after its test ended")
}

// A server stopped mid-test refuses connections, and answers again on the
// same address once restarted; a paused one accepts but does not answer
// until resumed.
func TestServerStopRestartPause(t *testing.T) {
	s := StartServer(t)
	addr := s.Addr()
	require.NoError(t, ping(addr))

	s.Stop()
	assert.Error(t, ping(addr), "a stopped server answered")
	s.Stop() // twice is harmless

	s.Restart()
	assert.Equal(t, addr, s.Addr())
	require.NoError(t, ping(addr))

	s.Pause()
	assert.Error(t, ping(addr), "a paused server answered") // ping gives up after 1 s
	s.Resume()
	require.NoError(t, ping(addr))

	// Paused at the end of the test: the cleanup still stops it promptly.
	s.Pause()
}

func TestLaunch(t *testing.T) {
	if _, err := exec.LookPath(Program); err != nil {
		t.Skipf("%s not installed (%s)", Program, InstallCommand)
	}
	addr, stop, err := Launch(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, ping(addr))
	require.NoError(t, stop())
	assert.Error(t, ping(addr), "stopped")
}
