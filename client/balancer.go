package client

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of BalancerConfig's zero fields.
const (
	// DefaultResolveEvery is how often Resolve is called again.
	DefaultResolveEvery = 10 * time.Second
	// DefaultDecay is the time constant of the latency average and of the
	// fading of a server's load hint.
	DefaultDecay = time.Second
	// rejectedHint is the load hint a not-started rejection stands for:
	// four requests per worker, a backend that has no room.
	rejectedHint = 4.0
	// minLatency is the least latency a cost counts, in seconds.
	minLatency = 50e-6
)

// BalancerConfig configures the set of backends and the choice among
// them.
type BalancerConfig struct {
	// Backends are the backends' base URLs ("http://10.0.0.1:8080"): each
	// request's scheme and host are replaced by the chosen backend's, its
	// path and query kept.
	Backends []string
	// Resolve, if set, returns the backends instead, and is called again
	// every ResolveEvery (zero: DefaultResolveEvery) on a goroutine of the
	// Transport's until Close. A failed call keeps the backends known;
	// New fails if the first call fails. A backend that stays keeps its
	// state (in-flight count, latency, breaker).
	Resolve      func(ctx context.Context) ([]string, error)
	ResolveEvery time.Duration
	// Decay is the time constant of each backend's latency average and of
	// the fading of its load hint; zero means DefaultDecay.
	Decay time.Duration
	// RoundRobin replaces the power of two choices by plain rotation, and
	// ignores latencies and load hints: the naive balancer, to compare
	// with.
	RoundRobin bool
}

// backend is one backend and what the client knows of it.
type backend struct {
	url      *url.URL
	addr     string
	breaker  *breaker
	inFlight atomic.Int64
	sent     atomic.Int64
	rejected atomic.Int64
	failed   atomic.Int64

	mu       sync.Mutex
	latency  float64 // seconds, peak EWMA; 0 before the first answer
	lastSeen time.Time
	hint     float64 // the server's load hint
	hintAt   time.Time
}

// observe records an answer's latency: the average decays with time
// constant tau, and jumps at once to a higher value (peak EWMA, as in
// Finagle), so that a backend that slows down is avoided at once.
func (b *backend) observe(lat time.Duration, now time.Time, tau time.Duration) {
	x := lat.Seconds()
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.latency == 0 || x > b.latency:
		b.latency = x
	default:
		w := math.Exp(-now.Sub(b.lastSeen).Seconds() / tau.Seconds())
		b.latency = b.latency*w + x*(1-w)
	}
	b.lastSeen = now
}

// raise records the latency of an attempt that failed: it can only raise
// the average, so that a backend that fails fast (a connection refused)
// does not look fast and draw the traffic.
func (b *backend) raise(lat time.Duration, now time.Time) {
	x := lat.Seconds()
	b.mu.Lock()
	defer b.mu.Unlock()
	if x > b.latency {
		b.latency, b.lastSeen = x, now
	}
}

// setHint records a load hint received at now.
func (b *backend) setHint(h float64, now time.Time) {
	b.mu.Lock()
	b.hint, b.hintAt = h, now
	b.mu.Unlock()
}

// cost is the backend's load, lower is better: the latency average times
// the requests this client has in flight there plus one, times one plus
// the server's load hint, which fades with its age.
func (b *backend) cost(now time.Time, tau time.Duration) float64 {
	b.mu.Lock()
	lat, hint, at := b.latency, b.hint, b.hintAt
	b.mu.Unlock()
	if hint > 0 {
		hint *= math.Exp(-now.Sub(at).Seconds() / tau.Seconds())
	}
	// A floor, so that the other factors still count before the first
	// answer, and below the clock's resolution.
	lat = max(lat, minLatency)
	return lat * float64(b.inFlight.Load()+1) * (1 + hint)
}

// set is the backends at one time; replaced whole when resolved again.
type set struct{ backends []*backend }

// balancer picks a backend for each attempt.
type balancer struct {
	cfg     BalancerConfig
	breaker BreakerConfig
	clock   Clock
	rand    *rng
	change  func(addr string, from, to State)

	cur  atomic.Pointer[set]
	next atomic.Uint64 // round robin
	mu   sync.Mutex    // serialises updates
}

// update replaces the backends by addrs, keeping the state of those that
// stay.
func (bl *balancer) update(addrs []string) error {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	old := map[string]*backend{}
	if s := bl.cur.Load(); s != nil {
		for _, b := range s.backends {
			old[b.addr] = b
		}
	}
	ns := &set{}
	seen := map[string]bool{}
	for _, a := range addrs {
		u, err := url.Parse(a)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return fmt.Errorf("client: backend %q is not a base URL such as http://host:port", a)
		}
		addr := u.Scheme + "://" + u.Host
		if seen[addr] {
			continue
		}
		seen[addr] = true
		if b, ok := old[addr]; ok {
			ns.backends = append(ns.backends, b)
			continue
		}
		b := &backend{url: &url.URL{Scheme: u.Scheme, Host: u.Host}, addr: addr}
		var onChange func(from, to State)
		if bl.change != nil {
			onChange = func(from, to State) { bl.change(addr, from, to) }
		}
		b.breaker = newBreaker(bl.breaker, bl.clock.Now(), onChange)
		ns.backends = append(ns.backends, b)
	}
	bl.cur.Store(ns)
	return nil
}

// pick chooses a backend for an attempt, among those not in skip whose
// breaker lets a request through, and takes the breaker's permission; avoid
// is taken only when nothing else is left. It returns nil when no backend
// can be used: none known, all skipped, or all breakers open.
func (bl *balancer) pick(skip []*backend, avoid *backend) *backend {
	s := bl.cur.Load()
	if s == nil {
		return nil
	}
	now := bl.clock.Now()
	var cands [8]*backend
	ok := cands[:0]
	for _, b := range s.backends {
		if !slices.Contains(skip, b) && b != avoid && b.breaker.ready(now) {
			ok = append(ok, b)
		}
	}
	if len(ok) == 0 && avoid != nil && !slices.Contains(skip, avoid) && avoid.breaker.ready(now) {
		ok = append(ok, avoid)
	}
	for len(ok) > 0 {
		var b *backend
		i := 0
		switch {
		case len(ok) == 1:
		case bl.cfg.RoundRobin:
			// Rotate over the whole set so that exclusions do not skew it.
			n := bl.next.Add(1) - 1
			i = int(n % uint64(len(ok)))
		default:
			i = bl.rand.intN(len(ok))
			j := bl.rand.intN(len(ok) - 1)
			if j >= i {
				j++
			}
			if ci, cj := ok[i].cost(now, bl.cfg.Decay), ok[j].cost(now, bl.cfg.Decay); cj < ci {
				i = j
			}
		}
		b = ok[i]
		if b.breaker.allow(now) {
			return b
		}
		ok = slices.Delete(ok, i, i+1) // its state changed meanwhile
	}
	return nil
}

// resolveLoop calls Resolve every ResolveEvery until ctx ends.
func (bl *balancer) resolveLoop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	for {
		if bl.clock.Sleep(ctx, bl.cfg.ResolveEvery) != nil {
			return
		}
		addrs, err := bl.cfg.Resolve(ctx)
		if err != nil || len(addrs) == 0 {
			continue // keep what is known
		}
		_ = bl.update(addrs) // a bad list keeps what is known
	}
}
