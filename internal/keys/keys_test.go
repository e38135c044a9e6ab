package keys

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestShorten(t *testing.T) {
	assert.Equal(t, "short", Shorten("short", 32))
	exact := strings.Repeat("x", 32)
	assert.Equal(t, exact, Shorten(exact, 32))

	long := strings.Repeat("x", 1000)
	k := Shorten(long, 256)
	assert.Len(t, k, 256)
	assert.Equal(t, strings.Repeat("x", 256-17)+"#", k[:256-16])
	assert.Equal(t, k, Shorten(long, 256), "the same name each time")
	assert.NotEqual(t, k, Shorten(strings.Repeat("x", 999)+"y", 256), "another key with the same start")

	// A cut inside a character moves back to its start.
	multi := strings.Repeat("é", 100) // 2 bytes each
	k = Shorten(multi, 32)            // 15 bytes of prefix: 7 characters and half of one
	assert.True(t, utf8.ValidString(k), "%q", k)
	assert.Equal(t, strings.Repeat("é", 7)+"#", k[:15])
	assert.LessOrEqual(t, len(k), 32)
}

func TestLabel(t *testing.T) {
	assert.Equal(t, "acme", Label("acme", 256))
	assert.Equal(t, "\uFFFDok", Label("\xff\xfeok", 256), "one replacement per invalid sequence")
	k := Label(strings.Repeat("\xff", 10000), 256)
	assert.True(t, utf8.ValidString(k))
	assert.LessOrEqual(t, len(k), 256)
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = Label("acme-corp", 256) }), "a good name is returned as it is")
}
