package tenantsim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/sluice-go/sluice/tenant"
)

// errStoreDown is what a call to the store returns during an outage.
var errStoreDown = errors.New("tenantsim: the store is down (simulated outage)")

// simStore is the fleet's store as the simulation models it: one
// tenant.MemoryStore on the virtual clock, reached by each agent through
// its own storeClient. A call takes delay of virtual time, the round trip,
// and acts on the store at its end; a call that ends during the outage
// fails instead.
type simStore struct {
	mem             *tenant.MemoryStore
	clock           func() int64
	delay           int64
	outFrom, outTo  int64 // the outage, [outFrom, outTo); outTo 0: none
	calls, failures int64
}

func (st *simStore) down(now int64) bool { return st.outTo != 0 && now >= st.outFrom && now < st.outTo }

// storeClient is one agent's connection to the store: a tenant.Store whose
// calls, made on the agent's goroutine, wait on virtual time by handing the
// loop back to the simulation until the round trip is over.
type storeClient struct {
	st *simStore
	a  *agentRun
}

var _ tenant.Store = (*storeClient)(nil)

// call waits out the round trip, then says whether the call may act.
func (c *storeClient) call(ctx context.Context) error {
	if c.st.delay > 0 {
		c.a.wait(c.st.delay)
	}
	c.st.calls++
	if now := c.st.clock(); c.st.down(now) {
		c.st.failures++
		return errStoreDown
	}
	return ctx.Err()
}

// Push implements tenant.Store.
func (c *storeClient) Push(ctx context.Context, r tenant.Report, ttl time.Duration) error {
	if err := c.call(ctx); err != nil {
		return err
	}
	return c.st.mem.Push(ctx, r, ttl)
}

// Reports implements tenant.Store. The reports come sorted by server (the
// MemoryStore's order is a map's), so that the controller adds them up in
// the same order in every run.
func (c *storeClient) Reports(ctx context.Context) ([]tenant.Report, error) {
	if err := c.call(ctx); err != nil {
		return nil, err
	}
	rs, err := c.st.mem.Reports(ctx)
	slices.SortFunc(rs, func(a, b tenant.Report) int { return strings.Compare(a.Server, b.Server) })
	return rs, err
}

// SetTable implements tenant.Store.
func (c *storeClient) SetTable(ctx context.Context, t tenant.Table) error {
	if err := c.call(ctx); err != nil {
		return err
	}
	return c.st.mem.SetTable(ctx, t)
}

// Table implements tenant.Store.
func (c *storeClient) Table(ctx context.Context) (tenant.Table, error) {
	if err := c.call(ctx); err != nil {
		return tenant.Table{}, err
	}
	return c.st.mem.Table(ctx)
}

// Lead implements tenant.Store.
func (c *storeClient) Lead(ctx context.Context, id string, ttl time.Duration) (bool, error) {
	if err := c.call(ctx); err != nil {
		return false, err
	}
	return c.st.mem.Lead(ctx, id, ttl)
}

// agentRun is one server's tenant.Agent on virtual time, run as
// Agent.Run does: Report once a period, Control half a period after. Each
// half runs on a goroutine of its own, since a store call inside it must
// let virtual time pass; but only one goroutine ever runs at a time: the
// loop hands over to the half and waits until it either waits on a store
// call (it has scheduled its resume event) or ends. So the simulation
// stays deterministic, and nothing in it runs concurrently.
type agentRun struct {
	s      *sim
	srv    *server
	agent  *tenant.Agent
	ctrl   *tenant.Controller
	tick   event // the Report half
	ctl    event // the Control half
	resume event
	yield  chan bool     // the tick's goroutine gives the loop back: true when the tick ended
	wake   chan struct{} // the loop gives the tick's goroutine its turn
	busy   bool          // a tick is under way
	missed int64         // ticks skipped because the last one had not ended
}

func newAgentRun(s *sim, srv *server) *agentRun {
	a := &agentRun{s: s, srv: srv, yield: make(chan bool), wake: make(chan struct{})}
	a.tick.fire = func() { a.start(&a.tick, a.agent.Report) }
	a.ctl.fire = func() { a.start(&a.ctl, a.agent.Control) }
	a.resume.fire = func() {
		a.wake <- struct{}{}
		a.follow()
	}
	return a
}

// start begins a half (ev's), on the loop's goroutine, and schedules ev
// again a period later.
func (a *agentRun) start(ev *event, half func(context.Context) error) {
	if next := a.s.loop.now + a.s.period; next < a.s.end {
		a.s.loop.schedule(ev, next)
	}
	if a.busy {
		a.missed++ // as a time.Ticker drops ticks for a slow receiver
		return
	}
	a.busy = true
	go func() {
		_ = half(context.Background()) // failures are counted in its stats
		a.yield <- true
	}()
	a.follow()
}

// follow waits, on the loop's goroutine, until the tick's goroutine waits
// on the store or ends.
func (a *agentRun) follow() {
	if ended := <-a.yield; ended {
		a.busy = false
		a.s.ticked(a)
	}
}

// wait lets d of virtual time pass, on the tick's goroutine.
func (a *agentRun) wait(d int64) {
	a.s.loop.schedule(&a.resume, a.s.loop.now+d)
	a.yield <- false
	<-a.wake
}
