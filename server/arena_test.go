package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestArenaNeverRewritesWhatItHandedOut(t *testing.T) {
	var a arena
	buf := make([]byte, 0, 2*arenaMaxBytes)
	var kept []string
	var want []string
	for i := range 1000 {
		// Sizes from 1 byte to beyond what the arena takes, through many
		// chunks; the caller's buffer is reused, as the read buffer is.
		n := 1 + i*7%(arenaMaxBytes+200)
		buf = append(buf[:0], strings.Repeat(fmt.Sprintf("%x", i%16), n)...)
		kept = append(kept, a.str(buf))
		want = append(want, string(buf))
		vals := a.strings(1 + i%(arenaMaxVals+5))
		for j := range vals {
			assert.Empty(t, vals[j], "handed out zeroed")
			vals[j] = want[i]
		}
		assert.Equal(t, len(vals), cap(vals), "no room to append into the next one's")
	}
	require.Equal(t, want, kept)
}

func TestNilArenaAllocates(t *testing.T) {
	var a *arena
	assert.Equal(t, "abc", a.str([]byte("abc")))
	assert.Len(t, a.strings(3), 3)
}

func TestArenaAmortisesAllocations(t *testing.T) {
	var a arena
	head := []byte("GET /hello HTTP/1.1\r\nHost: x\r\nUser-Agent: y\r\n\r\n")
	allocs := testing.AllocsPerRun(1000, func() {
		_ = a.str(head)
		_ = a.strings(2)
	})
	// A chunk of bytes serves about 170 such heads and one of strings
	// 128 requests: well under one allocation per request.
	assert.Less(t, allocs, 0.1)
}
