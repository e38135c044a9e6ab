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

// goBlocks returns the code of the ```go blocks of a Markdown text, each
// with the line it starts on.
func goBlocks(md string) (blocks []string, lines []int) {
	var cur []string
	in := false
	for i, l := range strings.Split(md, "\n") {
		switch {
		case !in && strings.TrimSpace(l) == "```go":
			in, cur = true, nil
			lines = append(lines, i+2)
		case in && strings.TrimSpace(l) == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n"))
		case in:
			cur = append(cur, l)
		}
	}
	return blocks, lines
}

// trimmed is text with each line's leading and trailing blanks removed
// and blank lines dropped, so that code indented in a function matches
// the same code at the margin.
func trimmed(text string) string {
	var out []string
	for l := range strings.SplitSeq(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Every Go block of the README is code that compiles as written: it
// appears, line for line, in one of the module's example tests (files
// whose names end in example_test.go), which go vet and go test compile. Nothing in a
// block is elided ("...") or left undefined: a newcomer copies them.
func TestReadmeGoBlocksCompile(t *testing.T) {
	md, err := os.ReadFile("README.md")
	require.NoError(t, err)
	blocks, lines := goBlocks(string(md))
	require.NotEmpty(t, blocks)
	var examples []string
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(d.Name(), "example_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			examples = append(examples, trimmed(string(b)))
		}
		return nil
	})
	require.NoError(t, err)
	for i, b := range blocks {
		code := trimmed(b)
		assert.NotContains(t, code, "...", "README.md:%d: a Go block elides code", lines[i])
		found := false
		for _, e := range examples {
			if strings.Contains(e, code) {
				found = true
				break
			}
		}
		assert.True(t, found, "README.md:%d: this Go block is in no example test, so nothing compiles it:\n%s", lines[i], b)
	}
}

func TestGoBlocks(t *testing.T) {
	blocks, lines := goBlocks("text\n```go\na := 1\n\n\tb := 2\n```\n```sh\nls\n```\n```go\nc\n```\n")
	assert.Equal(t, []string{"a := 1\n\n\tb := 2", "c"}, blocks)
	assert.Equal(t, []int{3, 11}, lines)
	assert.Equal(t, "a := 1\nb := 2", trimmed(blocks[0]))
}
