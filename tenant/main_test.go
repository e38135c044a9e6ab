package tenant

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the package's tests leave no goroutine behind
// (a Redis client not closed, a store loop not stopped).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
