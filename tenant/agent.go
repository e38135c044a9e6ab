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

	"github.com/sluice-go/sluice/internal/monotime"
)

// AgentConfig configures an Agent. Store is required; the rest has
// defaults.
type AgentConfig struct {
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
	// OnStep, when set, is called each time this agent, leading, has
	// written a drop table, with the controller's decision; took reports
	// whether this is its first table since it took the lease (from no
	// one, or another controller), even when the period that took the
	// lease failed to write one. It runs on the agent's goroutine: it must
	// not call the agent.
	OnStep func(d Decision, took bool)
}

// Agent runs one server's (or one controller's) side of the control loop,
// in two halves of each period (Run):
//
//  1. Report: the tracker's counts are collected and pushed to the store,
//     in one round trip;
//  2. Control, half a period later: a controller agent takes or keeps the
//     lease; the leader reads every server's report, steps the controller
//     and writes the drop table;
//
// and after each half the drop table is read, in one read, and applied to
// the tracker.
//
// When the store is down or slow, each step fails within Timeout, the
// failure is counted, and the tracker keeps the last table for StaleAfter,
// then drops nothing until the store answers again; the same happens when
// the table stops changing (no controller leads). Requests never wait for
// the store.
type Agent struct {
	opts    AgentConfig
	tracker *Tracker
	ctrl    *Controller

	mu      sync.Mutex
	seq     uint64
	lastOK  int64 // clock reading of the last read of a new table version
	hasOK   bool
	version uint64 // the version of that table
	cleared bool
	stepped bool // it has written a table since it last took the lease
	stats   AgentStats
}

// AgentStats counts what an agent did.
type AgentStats struct {
	// Ticks counts periods run (Report calls).
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

// NewAgent returns an agent configured by opts; it fails for settings that
// cannot work, naming the value.
func NewAgent(opts AgentConfig) (*Agent, error) {
	if opts.Store == nil {
		return nil, errors.New("tenant: AgentConfig.Store is nil: give NewMemoryStore(nil) for servers in one process, or NewRedisStore for a fleet")
	}
	if opts.Tracker == nil && opts.Controller == nil {
		return nil, errors.New("tenant: AgentConfig has neither a Tracker nor a Controller: an agent serves a server (Tracker), leads the fleet (Controller), or both")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Period", opts.Period}, {"Timeout", opts.Timeout}, {"StaleAfter", opts.StaleAfter}, {"ReportTTL", opts.ReportTTL}, {"LeaseTTL", opts.LeaseTTL}} {
		if d.v < 0 {
			return nil, fmt.Errorf("tenant: AgentConfig.%s %v: must be zero (the default) or positive", d.name, d.v)
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
		o.Clock = monotime.Clock()
	}
	return &Agent{opts: o, tracker: o.Tracker, ctrl: o.Controller}, nil
}

// ID returns the agent's name in the store.
func (a *Agent) ID() string { return a.opts.ID }

// Period returns the control period.
func (a *Agent) Period() time.Duration { return a.opts.Period }

// Run works until ctx is done, and returns ctx's error: Report once a
// period, Control half a period after each Report.
func (a *Agent) Run(ctx context.Context) error {
	t := time.NewTicker(a.opts.Period / 2)
	defer t.Stop()
	for half := 0; ; half++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if half%2 == 0 {
				a.Report(ctx)
			} else {
				a.Control(ctx)
			}
		}
	}
}

// Tick runs a whole period at once, Report then Control, for callers that
// drive the agent themselves once a period. Run spreads the two half a
// period apart instead, so that the leader's step sees the reports the
// other servers pushed half a period after their last one.
func (a *Agent) Tick(ctx context.Context) error {
	return errors.Join(a.Report(ctx), a.Control(ctx))
}

// Report is the server's half of a period: the tracker's counts are
// collected and pushed to the store (one round trip), and the drop table
// is read (one read) and applied. Without a tracker it only reads. It
// returns the first failure, also counted in Stats; the agent goes on
// either way.
func (a *Agent) Report(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stats.Ticks++
	var first error
	if a.tracker != nil {
		r := a.tracker.Collect(a.opts.Period)
		a.seq++
		r.Server, r.Seq = a.opts.ID, a.seq
		if err := a.call(ctx, func(ctx context.Context) error { return a.opts.Store.Push(ctx, r, a.opts.ReportTTL) }); err != nil {
			first = a.storeFailed(ctx, &a.stats.PushFailures, "pushing its report", err)
		}
	}
	return cmp.Or(first, a.read(ctx))
}

// Control is the controller's half of a period: a controller agent takes
// or keeps the lease and, while it holds it, reads every server's report,
// steps the controller and writes the table; then the table is read and
// applied, as in Report (so a server reads the table twice a period, half
// a period after each step of a leader that runs on the same schedule).
func (a *Agent) Control(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var first error
	if a.ctrl != nil {
		if err := a.call(ctx, a.lead); err != nil {
			first = a.storeFailed(ctx, &a.stats.LeadFailures, "leading", err)
		}
	}
	return cmp.Or(first, a.read(ctx))
}

// call runs f with the agent's timeout.
func (a *Agent) call(ctx context.Context, f func(ctx context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, a.opts.Timeout)
	defer cancel()
	return f(cctx)
}

// storeFailed is fail for a call to the store made with ctx, unless ctx
// itself has ended: an agent being stopped has not failed to reach its
// store, and says nothing (it returns ctx's error).
func (a *Agent) storeFailed(ctx context.Context, count *int64, what string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return a.fail(count, what, err)
}

// fail counts and reports a failure, and returns it wrapped. Called with
// mu held.
func (a *Agent) fail(count *int64, what string, err error) error {
	*count++
	err = fmt.Errorf("tenant: agent %s: %s: %w", a.opts.ID, what, err)
	a.stats.Err = err
	if a.opts.OnError != nil {
		a.opts.OnError(err)
	}
	return err
}

// read reads the drop table and applies it if it is new; it clears the
// drops once no new table has been read for StaleAfter. Called with mu
// held.
func (a *Agent) read(ctx context.Context) error {
	var table Table
	err := a.call(ctx, func(ctx context.Context) (err error) {
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
				return a.fail(&a.stats.ReadFailures, "applying the drop table", err)
			}
		}
		return nil
	}
	if err != nil {
		err = a.storeFailed(ctx, &a.stats.ReadFailures, "reading the drop table", err)
	}
	if a.hasOK && now-a.lastOK >= int64(a.opts.StaleAfter) && !a.cleared {
		a.stats.Stale, a.cleared = true, true
		if a.tracker != nil {
			_ = a.tracker.Apply(Table{})
		}
	}
	return err
}

// lead takes or keeps the lease and, while leading, steps the controller.
func (a *Agent) lead(ctx context.Context) error {
	was := a.stats.Leader
	ok, err := a.opts.Store.Lead(ctx, a.opts.ID, a.opts.LeaseTTL)
	a.stats.Leader = ok && err == nil
	if err != nil || !ok {
		a.stepped = false
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
	if err := a.opts.Store.SetTable(ctx, a.ctrl.Step(reports)); err != nil {
		return err
	}
	took := !a.stepped
	a.stepped = true
	if a.opts.OnStep != nil {
		a.opts.OnStep(a.ctrl.Last(), took)
	}
	return nil
}

// Stats returns what the agent did so far.
func (a *Agent) Stats() AgentStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}
