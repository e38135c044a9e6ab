package client

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sluice-go/sluice/await"
)

// Clock is the time the client reads and waits on: its backoffs, the
// breakers' windows and open times, the retry budget's window, the latency
// averages and the resolver's period. Tests pass a fake one.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits for d or until ctx ends, and returns ctx's error in the
	// second case. Inside a sluice handler it must release the worker
	// meanwhile, as await.Sleep does.
	Sleep(ctx context.Context, d time.Duration) error
}

// realClock is the Clock of a zero Config: the wall clock, and await.Sleep,
// which releases the worker when called from a sluice handler.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return await.Sleep(ctx, d)
}

// rng is the client's random source, safe for concurrent use.
type rng struct {
	mu sync.Mutex
	r  *rand.Rand // nil: math/rand/v2's own source
}

func newRNG(src rand.Source) *rng {
	if src == nil {
		return &rng{}
	}
	return &rng{r: rand.New(src)}
}

// intN returns a number in [0, n).
func (g *rng) intN(n int) int {
	if g.r == nil {
		return rand.IntN(n)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.r.IntN(n)
}

// int64N returns a number in [0, n).
func (g *rng) int64N(n int64) int64 {
	if g.r == nil {
		return rand.Int64N(n)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.r.Int64N(n)
}
