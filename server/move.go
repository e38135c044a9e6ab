package server

// A kept-alive connection belongs to the worker that accepted it, and its
// requests run there. Clients do not spread their requests evenly over
// their connections: a pool reuses the connection it got back last (Go's
// http.Transport does), and a worker that answers fast, by refusing, gets
// its connections back first. One worker can then be overloaded, its
// requests refused for their age, while another has nothing to do. So a
// request that has waited behind its worker's work for moveAfter, when
// another worker is idle, takes its connection there and starts at once.

import (
	"time"

	"github.com/sluice-go/sluice/lanes"
)

// moveAfter is how long a request must have waited since its head arrived
// for its connection to move to an idle worker: long enough that a worker
// finishing a short handler keeps its connections, far below the standing
// line's age limit (5 ms), so that the request is still young where it
// lands.
const moveAfter = time.Millisecond

// moveToIdlePeer moves the connection, whose next request has just been
// read (c.buf holds its first bytes, and nothing from before), to another
// worker if the request has waited moveAfter and that worker is idle, and
// reports whether it did: the request is then read there, from the
// buffer. It needs the arrival stamps (the age limit on): without them
// nothing tells that the request waited. Nothing of the connection may be
// left queued on this worker: a timer that fired has its callback queued
// until it sets the timer again or closes the connection, so a connection
// whose timer is not pending stays (netpoll's MoveTo checks its own
// callbacks; the caller, a task of pipelined bytes).
func (c *conn) moveToIdlePeer() bool {
	if len(c.srv.ws) < 2 || !c.srv.stamps || c.arrived == 0 || time.Now().UnixNano()-c.arrived < int64(moveAfter) || c.srv.stopping.Load() {
		return false
	}
	if c.timer != nil && !c.timer.Pending() {
		return false
	}
	peer := c.w.IdlePeer()
	if peer == nil {
		return false
	}
	from := c.ws
	if c.nc.MoveTo(peer) != nil {
		return false // something of it is under way here
	}
	c.stopTimer()
	from.conns.remove(c)
	c.w, c.ws, c.t.Shard = peer, c.srv.ws[peer.ID()], peer.ID()
	c.srv.moves.Add(1)
	if peer.Submit(lanes.Upstream, c.arriveFn) != nil {
		// The scheduler stops: the connection ends here, as it would
		// have on its worker.
		c.state = connClosed
		_ = c.nc.Close()
		if c.buf != nil {
			from.putBuf(c.buf)
			c.buf = nil
		}
		c.srv.connClosed()
	}
	return true
}

// arrive takes a connection moved from another worker (moveToIdlePeer) on
// its new one, and starts the request it brought.
func (c *conn) arrive() {
	c.ws.conns.add(c)
	if err := c.nc.OnReadable(lanes.Upstream, c.onData); err != nil {
		c.close()
		return
	}
	if c.fresh {
		// A first request's head has the header timeout from the accept.
		if ht := c.srv.headTimeout; ht > 0 {
			c.armAt(c.began + int64(ht))
		}
	} else {
		c.arm(c.srv.cfg.IdleTimeout)
	}
	c.parseBuffered()
	if c.srv.stopping.Load() && c.state == connIdle {
		c.shutdown(false)
	}
}
