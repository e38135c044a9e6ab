package sluice

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Every package of every module of the workspace builds and vets, tests
// included, on the platforms where the executor does not run: a Linux-only
// call outside a _linux.go file (or a file without the linux build tag)
// fails here, not on a Mac developer's machine.
func TestOtherPlatformsBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles the modules three times")
	}
	if os.Getenv("CI") == "true" {
		t.Skip(".ci/run cross-compiles in a step of its own, before the tests")
	}
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	patterns := modulePatterns(t)
	if work, err := exec.Command(gotool, "env", "GOWORK").Output(); err == nil && strings.TrimSpace(string(work)) == "" {
		patterns = []string{"./..."} // GOWORK=off: the library's module alone
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	for _, goos := range []string{"darwin", "windows", "freebsd"} {
		for _, verb := range []string{"build", "vet"} {
			cmd := exec.CommandContext(ctx, gotool, append([]string{verb}, patterns...)...)
			cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("GOOS=%s go %s %v: no answer within the test's time: %v", goos, verb, patterns, ctx.Err())
			}
			if err != nil {
				t.Errorf("GOOS=%s go %s %v: %v\n%s", goos, verb, patterns, err, out)
			}
		}
	}
}
