package server

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFreeListTrimsWhatNoGetTook(t *testing.T) {
	var l freeList[int]
	for i := range 100 {
		long := l.put(i)
		assert.Equal(t, i+1 > keepFree, long, "put %d", i)
	}
	assert.True(t, l.trim(), "a first trim drops nothing: the list was never below 0 since the start")
	assert.Len(t, l.free, 100)

	// Ten taken: 90 stayed free the whole time, of which all but keepFree
	// go, the bottom of the stack first.
	for range 10 {
		_, ok := l.get()
		require.True(t, ok)
	}
	assert.False(t, l.trim())
	require.Len(t, l.free, keepFree)
	assert.Equal(t, 90-keepFree, l.free[0], "the entries no get reached went")
	assert.Equal(t, 89, l.free[keepFree-1], "the last put stays on top")

	// Emptied and filled again between two trims: nothing stayed free.
	for range keepFree {
		_, ok := l.get()
		require.True(t, ok)
	}
	_, ok := l.get()
	assert.False(t, ok, "empty")
	for i := range 200 {
		l.put(i)
	}
	assert.True(t, l.trim(), "every entry was taken or new since the last trim: all kept")
	assert.Len(t, l.free, 200)
	assert.False(t, l.trim(), "the next trim drops what stayed free")
	assert.Len(t, l.free, keepFree)

	// The list holds no reference past its length.
	for _, x := range l.free[len(l.free):cap(l.free)] {
		assert.Zero(t, x)
	}
	for range maxFreeBufs + 10 {
		l.put(1)
	}
	assert.Len(t, l.free, maxFreeBufs, "bounded")
}
