package server

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A worker's book of routes: an unknown route starts alone and becomes
// quick or blocking by how its run went; a blocking one gives its worker
// away at once but for one probe in 2^score, each probe that blocks
// raising the score, and a probe that did not block forgets it.
func TestRouteBook(t *testing.T) {
	var b routeBook
	assert.Equal(t, startAlone, b.start("GET", "/"), "unknown")
	b.ran("GET", "/", startAlone, false)
	assert.Equal(t, startShared, b.start("GET", "/"), "quick")
	assert.Equal(t, startAlone, b.start("POST", "/"), "the method is part of the route")

	assert.Equal(t, startAlone, b.start("GET", "/events"))
	b.ran("GET", "/events", startAlone, true)
	var how []int
	for range 1 << blockerScore {
		h := b.start("GET", "/events")
		how = append(how, h)
		b.ran("GET", "/events", h, false) // a run given away tells nothing
	}
	assert.Equal(t, startProbe, how[len(how)-1], "one probe in 2^blockerScore")
	assert.Equal(t, []int{startRelease}, slices.Compact(how[:len(how)-1]))
	assert.Equal(t, startAlone, b.start("GET", "/events"), "the probe did not block: unknown again")

	assert.Equal(t, 1, b.quick)
	b.ran("GET", "/", startShared, true) // a quick route found blocking
	assert.Zero(t, b.quick, "no longer counted quick")
	assert.Equal(t, int8(blockerScore), b.m[b.key("GET", "/")])
	assert.Equal(t, startRelease, b.start("GET", "/"))

	b.hijacked("GET", "/ws") // a WebSocket: its requests start shared
	assert.Equal(t, startShared, b.start("GET", "/ws"))
	b.hijacked("GET", "/") // a blocking route stays one
	assert.Equal(t, int8(blockerScore), b.m[b.key("GET", "/")])
}

// A full book forgets its quick routes to learn a new one, and when it
// holds nothing but blocking routes, a new route starts as before the book.
func TestRouteBookBounds(t *testing.T) {
	var b routeBook
	for i := range maxRoutes {
		b.ran("GET", fmt.Sprint("/q", i), startAlone, false)
	}
	assert.Len(t, b.m, maxRoutes)
	assert.Equal(t, maxRoutes, b.quick)
	b.ran("GET", "/events", startAlone, true)
	assert.Len(t, b.m, 1, "the quick routes went to make room")
	assert.Zero(t, b.quick)
	for i := range maxRoutes - 1 {
		b.ran("GET", fmt.Sprint("/b", i), startAlone, true)
	}
	assert.Len(t, b.m, maxRoutes)
	assert.Equal(t, startShared, b.start("GET", "/new"), "full of blocking routes")
	b.ran("GET", "/new", startShared, true)
	assert.Len(t, b.m, maxRoutes, "not learned")
}
