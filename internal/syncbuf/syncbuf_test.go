package syncbuf

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = b.Write([]byte("x"))
			}
		}()
	}
	wg.Wait()
	assert.Len(t, b.String(), 800)
	got := b.Bytes()
	got[0] = 'y'
	assert.Equal(t, byte('x'), b.Bytes()[0], "Bytes returns a copy")
}
