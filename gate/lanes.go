package gate

import (
	"github.com/sluice-go/sluice/admit"
)

// Lanes applies a gate (or any policy) to the requests of some lanes only:
// those whose admit.Attempt.Lane is one of the names given (the sluice
// server sets it from server.Config.Lanes). Requests of other lanes pass it
// as if it were not there. Build it with ForLanes.
type Lanes struct {
	inner admit.Policy
	names []string
}

// ForLanes returns inner applied only to the requests of the lanes named.
// Put it in admit.Config.Gates to give a lane a limit of its own, for
// example a Background lane admitted only while a quarter of the workers
// are busy:
//
//	gate.ForLanes(gate.NewBusy(gate.BusyConfig{Fraction: 0.25}), "background")
//
// or a concurrency limit for a batch route. Its refusals make the lane's
// requests wait in the queue, like any gate's (give the lane a class below
// the others with admit.ClassByLane, so that they do not hold the head of
// the queue), or, in admit.Config.Policies, reject them at once. It
// attaches inner when the pipeline is built if inner needs it (a busy gate
// needs the executor). It panics when no lane is named or inner is nil.
func ForLanes(inner admit.Policy, lanes ...string) *Lanes {
	if inner == nil {
		panic("gate: ForLanes of a nil policy")
	}
	if len(lanes) == 0 {
		panic("gate: ForLanes without a lane: name the lanes it applies to")
	}
	return &Lanes{inner: inner, names: append([]string(nil), lanes...)}
}

// applies reports whether the request is one of the gate's lanes.
func (g *Lanes) applies(a *admit.Attempt) bool {
	if a.Lane == "" {
		return false
	}
	for _, n := range g.names {
		if n == a.Lane {
			return true
		}
	}
	return false
}

// Admit asks the inner policy for requests of the gate's lanes, and admits
// the others.
func (g *Lanes) Admit(a *admit.Attempt) *admit.Refusal {
	if !g.applies(a) {
		return nil
	}
	return g.inner.Admit(a)
}

// Done tells the inner policy of the end of a request it was asked for.
func (g *Lanes) Done(a *admit.Attempt, o admit.Outcome) {
	if g.applies(a) {
		g.inner.Done(a, o)
	}
}

// Attach attaches the inner policy, if it is an admit.Attacher.
func (g *Lanes) Attach(env admit.Env) (func(), error) {
	if at, ok := g.inner.(admit.Attacher); ok {
		return at.Attach(env)
	}
	return nil, nil
}

// Inner returns the policy applied to the gate's lanes, to tune it while
// serving (a busy gate's SetConfig, a concurrency gate's SetLimit).
func (g *Lanes) Inner() admit.Policy { return g.inner }
