//go:build linux

package bench

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	ServeChild() // the child processes of StartProcess
	goleak.VerifyTestMain(m)
}
