package tenant

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// AgentOptions configures an Agent. Store is required; the rest has
// defaults.
type AgentOptions struct {
	// Store is where the fleet meets: NewMemoryStore for servers in one
	// process, NewRedisStore for a fleet.
	Store Store
	// Tracker is this server's tenant policy, whose reports the agent
	// pushes and to which it applies the drop table; nil for a controller
	// that serves no requests (sluice controller).
	Tracker *Tracker
	// Controller, when set, makes this agent one of the fleet's
	// candidate controllers: each period it takes or keeps the lease in
	// the store, and while it holds it, it computes and writes the drop
	// table. Give every server one (embedded), or run one or more
	// controller processes and none in the servers.
	Controller *Controller
	// ID names this agent in the store (its reports, its lease); empty
	// means host name, process ID and a random suffix.
	ID string
	// Period is the control period; zero means 1 s.
	Period time.Duration
	// Timeout bounds each round trip to the store; zero means a quarter
	// of Period. A request is never blocked on the store: the agent works
	// on its own goroutine and the tracker reads only memory.
	Timeout time.Duration
	// StaleAfter is how long the last drop table read is enforced once
	// the store cannot be read, or once the table has stopped changing
	// (its controller is gone: a leader writes a new version every
	// period); after it, the agent clears the drops (fail open: each
	// server protects itself with its own gates). Zero means 5 periods.
	StaleAfter time.Duration
	// ReportTTL is how long a pushed report counts once its server stops
	// pushing; zero means 3 periods.
	ReportTTL time.Duration
	// LeaseTTL is how long a controller's lease lasts without renewal;
	// zero means 3 periods. A standby takes over at most this long after
	// the leader dies.
	LeaseTTL time.Duration
	// Clock returns monotonic nanoseconds; nil means the real clock. The
	// simulation gives virtual time.
	Clock func() int64
	// OnError, when set, is called with each failure to reach the store
	// (they are counted in AgentStats either way).
	OnError func(error)
}

// Agent runs one server's (or one controller's) side of the control loop,
// once a period (Tick):
//
//  1. the tracker's counts are collected and pushed to the store, in one
//     round trip;
//  2. a controller agent takes or keeps the lease; the leader reads every
//     server's report, steps the controller and writes the drop table;
//  3. the drop table is read, in one read, and applied to the tracker.
//
// When the store is down or slow, each step fails within Timeout, the
// failure is counted, and the tracker keeps the last table for StaleAfter,
// then drops nothing until the store answers again; the same happens when
// the table stops changing (no controller leads). Requests never wait for
// the store.
type Agent struct {
	opts    AgentOptions
	tracker *Tracker
	ctrl    *Controller

	mu      sync.Mutex
	seq     uint64
	lastOK  int64 // clock reading of the last read of a new table version
	hasOK   bool
	version uint64 // the version of that table
	cleared bool
	stats   AgentStats
}

// AgentStats counts what an agent did.
type AgentStats struct {
	// Ticks counts periods run.
	Ticks int64
	// PushFailures, ReadFailures and LeadFailures count failed round
	// trips to the store: pushing a report, reading the table, and the
	// controller's lease, reports and table write.
	PushFailures, ReadFailures, LeadFailures int64
	// Leader reports whether this agent led the last period.
	Leader bool
	// Leaderships counts the periods in which it took the lease from no
	// one or another agent.
	Leaderships int64
	// Version is the version of the last table read.
	Version uint64
	// Stale reports whether the drops have been cleared because the
	// store could not be read, or the table did not change, for
	// StaleAfter.
	Stale bool
	// Err is the last failure, or nil.
	Err error
}

// NewAgent returns an agent configured by opts; it fails for options that
// cannot work, naming the value.
func NewAgent(opts AgentOptions) (*Agent, error) {
	if opts.Store == nil {
		return nil, errors.New("tenant: AgentOptions.Store is nil: give NewMemoryStore(nil) for servers in one process, or NewRedisStore for a fleet")
	}
	if opts.Tracker == nil && opts.Controller == nil {
		return nil, errors.New("tenant: AgentOptions has neither a Tracker nor a Controller: an agent serves a server (Tracker), leads the fleet (Controller), or both")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Period", opts.Period}, {"Timeout", opts.Timeout}, {"StaleAfter", opts.StaleAfter}, {"ReportTTL", opts.ReportTTL}, {"LeaseTTL", opts.LeaseTTL}} {
		if d.v < 0 {
			return nil, fmt.Errorf("tenant: AgentOptions.%s %v: must be zero (the default) or positive", d.name, d.v)
		}
	}
	o := opts
	o.Period = cmp.Or(o.Period, time.Second)
	o.Timeout = cmp.Or(o.Timeout, o.Period/4)
	o.StaleAfter = cmp.Or(o.StaleAfter, 5*o.Period)
	o.ReportTTL = cmp.Or(o.ReportTTL, 3*o.Period)
	o.LeaseTTL = cmp.Or(o.LeaseTTL, 3*o.Period)
	if o.ID == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.ID = fmt.Sprintf("%s-%d-%s", cmp.Or(host, "host"), os.Getpid(), hex.EncodeToString(b[:]))
	}
	if o.Clock == nil {
		o.Clock = realClock()
	}
	return &Agent{opts: o, tracker: o.Tracker, ctrl: o.Controller}, nil
}

// ID returns the agent's name in the store.
func (a *Agent) ID() string { return a.opts.ID }

// Period returns the control period.
func (a *Agent) Period() time.Duration { return a.opts.Period }

// Run ticks once a period until ctx is done, and returns ctx's error.
func (a *Agent) Run(ctx context.Context) error {
	t := time.NewTicker(a.opts.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			a.Tick(ctx)
		}
	}
}

// Tick runs one period: push, lead, read (see Agent). It returns the
// first failure, which is also counted in Stats; the agent goes on either
// way.
func (a *Agent) Tick(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stats.Ticks++
	var first error
	fail := func(count *int64, what string, err error) {
		*count++
		err = fmt.Errorf("tenant: agent %s: %s: %w", a.opts.ID, what, err)
		a.stats.Err = err
		if first == nil {
			first = err
		}
		if a.opts.OnError != nil {
			a.opts.OnError(err)
		}
	}
	call := func(f func(ctx context.Context) error) error {
		cctx, cancel := context.WithTimeout(ctx, a.opts.Timeout)
		defer cancel()
		return f(cctx)
	}
	if a.tracker != nil {
		r := a.tracker.Collect(a.opts.Period)
		a.seq++
		r.Server, r.Seq = a.opts.ID, a.seq
		if err := call(func(ctx context.Context) error { return a.opts.Store.Push(ctx, r, a.opts.ReportTTL) }); err != nil {
			fail(&a.stats.PushFailures, "pushing its report", err)
		}
	}
	if a.ctrl != nil {
		if err := call(a.lead); err != nil {
			fail(&a.stats.LeadFailures, "leading", err)
		}
	}
	var table Table
	err := call(func(ctx context.Context) (err error) {
		table, err = a.opts.Store.Table(ctx)
		return err
	})
	now := a.opts.Clock()
	if err == nil && (!a.hasOK || table.Version != a.version) {
		a.lastOK, a.hasOK, a.version, a.cleared = now, true, table.Version, false
		a.stats.Version, a.stats.Stale = table.Version, false
		if a.ctrl != nil {
			a.ctrl.SetVersion(table.Version)
		}
		if a.tracker != nil {
			if err := a.tracker.Apply(table); err != nil {
				fail(&a.stats.ReadFailures, "applying the drop table", err)
			}
		}
		return first
	}
	if err != nil {
		fail(&a.stats.ReadFailures, "reading the drop table", err)
	}
	if a.hasOK && now-a.lastOK >= int64(a.opts.StaleAfter) && !a.cleared {
		a.stats.Stale, a.cleared = true, true
		if a.tracker != nil {
			_ = a.tracker.Apply(Table{})
		}
	}
	return first
}

// lead takes or keeps the lease and, while leading, steps the controller.
func (a *Agent) lead(ctx context.Context) error {
	was := a.stats.Leader
	ok, err := a.opts.Store.Lead(ctx, a.opts.ID, a.opts.LeaseTTL)
	a.stats.Leader = ok && err == nil
	if err != nil || !ok {
		return err
	}
	if !was {
		a.stats.Leaderships++
		if t, err := a.opts.Store.Table(ctx); err == nil {
			a.ctrl.SetVersion(t.Version)
		}
	}
	reports, err := a.opts.Store.Reports(ctx)
	if err != nil {
		return err
	}
	return a.opts.Store.SetTable(ctx, a.ctrl.Step(reports))
}

// Stats returns what the agent did so far.
func (a *Agent) Stats() AgentStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}
