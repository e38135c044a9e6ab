package gate

import (
	"strings"
	"time"
)

// Chain is several gates together: a request is admitted iff every member
// admits it, and the first member that refuses says why.
//
// Admit asks the members in order and stops at the first refusal; the
// members it had acquired are given back with Release(Undo), in reverse
// order, so none of them counts the request, learns from it or calls its
// OnOpen callbacks. Put the cheapest and most often closed gate first (Busy,
// then Memory, then the concurrency limits): a refusal then costs one
// decision. Release releases every member, in reverse order.
type Chain struct {
	gates []Gate
	name  string
}

// All returns the chain of gates, in that order. Nil gates are skipped and
// the members of a Chain given as a member are taken in its place, so that
// Admit always reports a gate that decided.
func All(gates ...Gate) *Chain {
	c := &Chain{}
	for _, g := range gates {
		switch g := g.(type) {
		case nil:
		case *Chain:
			c.gates = append(c.gates, g.gates...)
		default:
			c.gates = append(c.gates, g)
		}
	}
	names := make([]string, len(c.gates))
	for i, g := range c.gates {
		names[i] = g.Name()
	}
	c.name = strings.Join(names, "+")
	return c
}

// Gates returns the members in order. The slice must not be modified.
func (c *Chain) Gates() []Gate { return c.gates }

// Admit acquires every member and reports ok, or returns the first member
// that refused (having given back the ones before it). On ok the caller must
// call Release once when the request ends.
func (c *Chain) Admit() (refused Gate, ok bool) {
	for i, g := range c.gates {
		if !g.Acquire() {
			c.undo(i)
			return g, false
		}
	}
	return nil, true
}

// AdmitIdle is Admit for a caller that the busy count does not include (see
// IdleAcquirer): members that implement IdleAcquirer are asked with
// AcquireIdle, the others with Acquire.
func (c *Chain) AdmitIdle() (refused Gate, ok bool) {
	for i, g := range c.gates {
		var yes bool
		if ia, isIdle := g.(IdleAcquirer); isIdle {
			yes = ia.AcquireIdle()
		} else {
			yes = g.Acquire()
		}
		if !yes {
			c.undo(i)
			return g, false
		}
	}
	return nil, true
}

// undo gives back the first n members.
func (c *Chain) undo(n int) {
	for j := n - 1; j >= 0; j-- {
		c.gates[j].Release(Undo)
	}
}

// Acquire reports whether every member admits the request.
func (c *Chain) Acquire() bool {
	_, ok := c.Admit()
	return ok
}

// AcquireIdle is AdmitIdle without the reason.
func (c *Chain) AcquireIdle() bool {
	_, ok := c.AdmitIdle()
	return ok
}

// Release releases every member, in reverse order.
func (c *Chain) Release(latency time.Duration) {
	for j := len(c.gates) - 1; j >= 0; j-- {
		c.gates[j].Release(latency)
	}
}

// Name returns the members' names joined by "+", such as "busy+memory".
// Rejection reasons should use the name of the member Admit returns.
func (c *Chain) Name() string { return c.name }

// Reserves reports whether every gate of the chain reserves a slot per
// Acquire (see Reserver): one that reads a measurement makes the chain's
// answer a reading too.
func (c *Chain) Reserves() bool {
	for _, g := range c.gates {
		if !Reserves(g) {
			return false
		}
	}
	return true
}

// OnOpen registers fn with every member that is a Waker: it may be called
// when any of them may have opened, so it is called more often than the
// whole chain opens (spuriously, as Waker allows).
func (c *Chain) OnOpen(fn func()) {
	for _, g := range c.gates {
		if w, ok := g.(Waker); ok {
			w.OnOpen(fn)
		}
	}
}
