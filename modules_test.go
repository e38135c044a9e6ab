package sluice

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// workspaceModules returns the folders of go.work's use directives, as
// written there ("." for the library, "./bench", ...).
func workspaceModules(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("go.work")
	require.NoError(t, err)
	return useDirs(string(b))
}

// useDirs returns the folders of the use directives of a go.work file,
// in one block or on lines of their own.
func useDirs(work string) []string {
	var dirs []string
	inBlock := false
	for line := range strings.Lines(work) {
		line, _, _ = strings.Cut(line, "//")
		line = strings.TrimSpace(line)
		switch {
		case inBlock && line == ")":
			inBlock = false
		case inBlock && line != "":
			dirs = append(dirs, line)
		case line == "use (":
			inBlock = true
		case strings.HasPrefix(line, "use "):
			dirs = append(dirs, strings.TrimSpace(strings.TrimPrefix(line, "use ")))
		}
	}
	return dirs
}

// modulePatterns returns the package patterns of every module of the
// workspace, relative to the root: in workspace mode ./... stops at the
// nested modules, so each gets its own.
func modulePatterns(t *testing.T) []string {
	t.Helper()
	var patterns []string
	for _, d := range workspaceModules(t) {
		if d == "." {
			patterns = append(patterns, "./...")
			continue
		}
		patterns = append(patterns, "./"+strings.TrimPrefix(d, "./")+"/...")
	}
	return patterns
}

func TestUseDirs(t *testing.T) {
	assert.Equal(t, []string{".", "./bench", "./cmd"}, useDirs("go 1.26\n\nuse (\n\t. // the library\n\t./bench\n)\n\nuse ./cmd\n"))
	assert.Empty(t, useDirs("go 1.26\n"))
}

// Every nested module is in the workspace, and the README's test command
// and CI's list of modules name every module of it: a module left out
// would have its tests silently skipped.
func TestEveryModuleIsTested(t *testing.T) {
	patterns := modulePatterns(t)
	require.Contains(t, patterns, "./...")

	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.Name() == "go.mod" && path != "go.mod" {
			dir := filepath.ToSlash(filepath.Dir(path))
			assert.Contains(t, patterns, "./"+dir+"/...", "%s is not in go.work", path)
		}
		return nil
	})
	require.NoError(t, err)

	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	command := "go test " + strings.Join(patterns, " ")
	assert.Contains(t, string(readme), "\n"+command+" ", "the README's test command is %q", command)

	ci, err := os.ReadFile(".ci/run")
	require.NoError(t, err)
	assert.Contains(t, string(ci), "\nmodules=("+strings.Join(patterns, " ")+")\n", ".ci/run's modules")
}
