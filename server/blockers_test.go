package server

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A worker's book of routes: an unknown route starts alone and becomes
// quick when its run did not block; found blocked once it is a suspect,
// which starts alone, twice a blocking route, which gives its worker away
// at once but for one probe in 2^score; a probe that blocks raises the
// score, one that does not forgets the route. A stream runs away at once,
// for good; a hijacked route is a quick one.
func TestRouteBook(t *testing.T) {
	var b routeBook
	assert.Equal(t, startAlone, b.start("GET", "/"), "unknown")
	b.ended("GET", "/", startAlone, false)
	assert.Equal(t, startShared, b.start("GET", "/"), "quick")
	assert.Equal(t, startAlone, b.start("POST", "/"), "the method is part of the route")
	assert.Equal(t, 1, b.quick)

	b.found("GET", "/") // a quick route found blocked once
	assert.Zero(t, b.quick, "no longer counted quick")
	assert.Equal(t, startAlone, b.start("GET", "/"), "a suspect starts alone")
	b.ended("GET", "/", startAlone, true) // found counted it
	assert.Equal(t, suspectRoute, b.m[b.key("GET", "/")])
	b.ended("GET", "/", startAlone, false)
	assert.Equal(t, startShared, b.start("GET", "/"), "a suspect that ran without blocking is quick again")

	b.found("GET", "/sleep")
	assert.Equal(t, startAlone, b.start("GET", "/sleep"))
	b.found("GET", "/sleep")
	assert.Equal(t, int8(blockerScore), b.m[b.key("GET", "/sleep")], "twice: a blocking route")
	assert.Equal(t, startRelease, b.begin("GET", "/sleep", startAlone), "queued while unknown, begins given away")
	var how []int
	for range 1 << blockerScore {
		h := b.start("GET", "/sleep")
		how = append(how, h)
		b.ended("GET", "/sleep", h, h == startProbe) // the probe blocks
		if h == startProbe {
			b.found("GET", "/sleep")
		}
	}
	assert.Equal(t, startProbe, how[len(how)-1], "one probe in 2^blockerScore")
	assert.Equal(t, []int{startRelease}, slices.Compact(how[:len(how)-1]))
	assert.Equal(t, int8(blockerScore+1), b.m[b.key("GET", "/sleep")], "a probe that blocked")
	b.ended("GET", "/sleep", startProbe, false)
	assert.Equal(t, startAlone, b.start("GET", "/sleep"), "a probe that did not block: unknown again")

	quick := b.quick
	b.ended("GET", "/events", startAlone, false)
	assert.Equal(t, quick+1, b.quick)
	b.streamed("GET", "/events") // a quick route that streams
	assert.Equal(t, quick, b.quick, "no longer counted quick")
	assert.Equal(t, startAway, b.start("GET", "/events"), "a stream runs away at once")
	assert.Equal(t, startAway, b.begin("GET", "/events", startAlone), "queued while unknown, begins away")
	b.ended("GET", "/events", startAway, false)
	b.found("GET", "/events")
	assert.Equal(t, startAway, b.start("GET", "/events"), "a run away tells nothing; a stream found blocked stays a stream")
	b.streamed("GET", "/sleep")
	assert.Equal(t, startAway, b.start("GET", "/sleep"), "a blocking route that streams is a stream")

	b.hijacked("GET", "/ws")
	assert.Equal(t, startShared, b.start("GET", "/ws"), "a WebSocket starts shared")
	b.hijacked("GET", "/events")
	assert.Equal(t, streamRoute, b.m[b.key("GET", "/events")], "a stream stays one")
}

// A full book forgets its quick routes to learn a new one, and when it
// holds nothing but blocking routes, a new route starts as before the book.
func TestRouteBookBounds(t *testing.T) {
	var b routeBook
	for i := range maxRoutes {
		b.ended("GET", fmt.Sprint("/q", i), startAlone, false)
	}
	assert.Len(t, b.m, maxRoutes)
	assert.Equal(t, maxRoutes, b.quick)
	b.streamed("GET", "/events")
	assert.Len(t, b.m, 1, "the quick routes went to make room")
	assert.Zero(t, b.quick)
	for i := range maxRoutes - 1 {
		b.streamed("GET", fmt.Sprint("/b", i))
	}
	assert.Len(t, b.m, maxRoutes)
	assert.Equal(t, startShared, b.start("GET", "/new"), "full of streams")
	b.streamed("GET", "/new")
	b.found("GET", "/new")
	assert.Len(t, b.m, maxRoutes, "not learned")
}
