package attack

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
)

// An Attack is one kind of hostile input.
type Attack struct {
	// Name identifies the attack (sluice attack -attacks).
	Name string
	// About says what it sends, in a sentence.
	About string
	// TLS is set when the attack needs a target that serves HTTPS.
	TLS bool
	// ProbePath is what the probes ask for during this attack; "" means
	// "/". An attack on something other than serving (the metrics, say)
	// probes that.
	ProbePath string
	// Settle is how long the attack runs before the probes start; zero
	// means 300 ms, for an attack in force from its first connections.
	// An attack whose first seconds are a burst of CPU work rather than
	// the attack's steady state sets more, so that the probes meet what
	// the attack tests and not a transient overload, which the age limit
	// sheds by design.
	Settle time.Duration
	// Run sends the attack to env's target until ctx ends, and returns
	// nil then, or an error saying what the target did wrong (served
	// more than its body limit, say). A connection refused or closed by
	// the target is not an error: the attack opens another.
	Run func(ctx context.Context, env Env) error
}

// Env is what an attack needs of its target.
type Env struct {
	// Addr is the target's host:port.
	Addr string
	// TLS is the client's TLS configuration when the target serves
	// HTTPS, nil otherwise.
	TLS *tls.Config
	// Conns is how many connections an attack that holds connections
	// open keeps (slow clients, stalled hellos); zero means its own
	// default. The in-process short form uses fewer.
	Conns int
	// BodyLimit is the request body limit the target enforces (the
	// chunked-overflow attack checks it), 0 for none.
	BodyLimit int64
	// From is the loopback address the attack comes from ("" for any):
	// Run sends it from AttackerAddr and the probes from 127.0.0.1, as an
	// attacker's address differs from the users' (and servers that count
	// per client address can tell them apart).
	From string
}

// AttackerAddr is the address the attacks come from in Run.
const AttackerAddr = "127.0.0.2"

// conns returns env.Conns, or def when it is zero.
func (env Env) conns(def int) int {
	if env.Conns > 0 {
		return env.Conns
	}
	return def
}

// All returns every attack, in the order the suite runs them.
func All() []Attack {
	return []Attack{
		obsFold(),
		chunkOverflow(),
		slowHeads(),
		slowBodies(),
		neverRead(),
		pipelineFlood(),
		stalledHellos(),
		stalledHandshakes(),
		helloFlood(),
		rapidReset(),
		continuationFlood(),
		tenantNames(),
	}
}

// ByName returns the attacks named, in the order named; no names means
// All.
func ByName(names ...string) ([]Attack, error) {
	all := All()
	if len(names) == 0 {
		return all, nil
	}
	var out []Attack
	for _, n := range names {
		i := slices.IndexFunc(all, func(a Attack) bool { return a.Name == n })
		if i < 0 {
			known := make([]string, len(all))
			for j, a := range all {
				known[j] = a.Name
			}
			return nil, fmt.Errorf("attack: no attack %q (known: %s)", n, strings.Join(known, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// dialTimeout bounds an attacker's connect.
const dialTimeout = 2 * time.Second

// dial connects to the target, with TLS when withTLS (the handshake done).
func dial(ctx context.Context, env Env, withTLS bool) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	if env.From != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(env.From)}
	}
	nc, err := d.DialContext(ctx, "tcp", env.Addr)
	if err != nil || !withTLS {
		return nc, err
	}
	tc := tls.Client(nc, env.TLS)
	hctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		nc.Close()
		return nil, err
	}
	return tc, nil
}

// holdOpen keeps n connections open with hold, each on a goroutine of
// its own: hold uses one until it ends (the target closed it, or ctx
// ended), and another is dialled in its place after a short pause, until
// ctx ends. It returns once every connection is closed.
func holdOpen(ctx context.Context, env Env, n int, hold func(ctx context.Context, nc net.Conn)) {
	_ = connLoop(ctx, n, 10*time.Millisecond, plainDial(env), func(ctx context.Context, nc net.Conn) error {
		hold(ctx, nc)
		return nil
	})
}

// flood runs n goroutines, each calling send with a new connection until
// ctx ends, and returns the first error send found.
func flood(ctx context.Context, env Env, n int, send func(ctx context.Context, nc net.Conn) error) error {
	return connLoop(ctx, n, 0, plainDial(env), send)
}

// plainDial dials env's target without TLS.
func plainDial(env Env) func(context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) { return dial(ctx, env, false) }
}

// connLoop runs n goroutines, each dialling a connection with dialConn,
// calling fn with it, closing it (ctx's end closes it too) and pausing for
// pause, over and over until ctx ends; it returns the first error fn
// returned before that.
func connLoop(ctx context.Context, n int, pause time.Duration, dialConn func(context.Context) (net.Conn, error), fn func(ctx context.Context, nc net.Conn) error) error {
	var mu sync.Mutex
	var found error
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				nc, err := dialConn(ctx)
				if err != nil {
					sleep(ctx, 50*time.Millisecond)
					continue
				}
				stop := context.AfterFunc(ctx, func() { nc.Close() })
				err = fn(ctx, nc)
				stop()
				nc.Close()
				if err != nil && ctx.Err() == nil {
					mu.Lock()
					if found == nil {
						found = err
					}
					mu.Unlock()
				}
				if pause > 0 {
					sleep(ctx, pause)
				}
			}
		})
	}
	wg.Wait()
	return found
}

// trickle holds a connection that sends head, then each once a second,
// never ending: a slow client.
func trickle(head, each string) func(ctx context.Context, nc net.Conn) {
	return func(ctx context.Context, nc net.Conn) {
		if _, err := io.WriteString(nc, head); err != nil {
			return
		}
		for ctx.Err() == nil {
			sleep(ctx, time.Second)
			if _, err := io.WriteString(nc, each); err != nil {
				return
			}
		}
	}
}

// sendThenWait holds a connection that sends b, then nothing, until the
// target or ctx closes it.
func sendThenWait(b []byte) func(ctx context.Context, nc net.Conn) {
	return func(_ context.Context, nc net.Conn) {
		if _, err := nc.Write(b); err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, nc)
	}
}

// sleep waits for d or the end of ctx.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
