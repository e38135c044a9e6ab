package ascii

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEqualFold(t *testing.T) {
	assert.True(t, EqualFold("Content-Length", "content-length"))
	assert.True(t, EqualFold("", ""))
	assert.True(t, EqualFold("chunked", "CHUNKED"))
	assert.False(t, EqualFold("chunked", "chunke"))
	assert.False(t, EqualFold("chunked", "chunkef"))
	assert.False(t, EqualFold("\u017f", "s"), "no Unicode folding")
	assert.False(t, EqualFold("[", "{"), "only letters fold")
}
