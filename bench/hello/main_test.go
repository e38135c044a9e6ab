//go:build linux

package hello

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the idle-connection client or the load client when the test
// binary was started as one (see BenchmarkIdleConnMemory and
// loadClientMain), and otherwise the tests and benchmarks, then
// checks for leaked goroutines. Two of fasthttp's are let through: its Date
// refresher, started by its first response and never stopped, and the
// worker pool's cleaner, which notices that its server has stopped only when
// it wakes up, up to 10 seconds later.
func TestMain(m *testing.M) {
	if addr := os.Getenv(envIdleClient); addr != "" {
		os.Exit(idleClientMain(addr))
	}
	if addr := os.Getenv(envLoadClient); addr != "" {
		os.Exit(loadClientMain(addr))
	}
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
	)
}
