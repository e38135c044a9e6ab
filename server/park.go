package server

import (
	"time"

	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/sched"
)

// Parking: a client that resends the moment it is refused (wrk, hey, a
// retry loop without backoff) keeps its request in the line whatever the
// server answers, and the server spends its CPU refusing the same clients
// again and again: with 2,048 such connections on two CPUs, a fast handler
// served 3% of what net/http serves. So, unless Config.HoldRefused is
// negative, once the pipeline has found that its clients resend at once
// (admit.FutileRatio), a connection whose request was resent at once and
// refused for waiting the whole age limit is parked with its answer: the
// refusal is written when the hold ends, and nothing of the connection is
// read meanwhile. A client that resends once answered waits for the
// answer at no cost, as a client that honours Retry-After would have
// waited. The request held is one refused anyway: a pool that reuses the
// connection it got back last (an open-loop generator, Go's Transport)
// sends its next request on another connection, where it can start,
// rather than into a parked socket that would keep it past its deadline.
//
// Only the connections beyond those the server can serve in time are
// parked: those open beyond admit.Pipeline.Servable, the clients a closed
// loop may have while its line stays within half the age limit. A worker
// with nothing to do ends its latest hold (workerIdle). docs/design.md
// ("Clients that resend at once") says why, with figures.

// holdAfter returns how long to park the connection after its current
// refusal when admit.Pipeline.Hold holds it, for the open connections not
// parked: Config.HoldRefused when it is positive, the hold Hold gives
// (the refusal's Retry-After) when it is zero; 0 when it is negative or
// Hold does not hold.
func (c *conn) holdAfter() time.Duration {
	srv := c.srv
	set := srv.cfg.HoldRefused
	if set < 0 {
		return 0
	}
	hold := srv.adm.Hold(&c.t, int(srv.open.Load()-srv.parked.Load()))
	if hold <= 0 || set == 0 {
		return hold
	}
	return set
}

// park stops reading the connection for hold, its refusal's answer held
// (c.held), then writes it and waits for the next request as idle does. A
// client that closes meanwhile is seen then.
func (c *conn) park(hold time.Duration) {
	c.state = connParked
	c.srv.parked.Add(1)
	c.srv.holds.Add(1)
	c.ws.parked.add(c)
	c.releaseBuf()
	if c.unparkFn == nil {
		c.unparkFn = c.unpark
	}
	// Nothing is read, but a client that leaves ends the hold at once
	// (its socket would sit in CLOSE_WAIT until then): Continuation work,
	// as freeing what the server holds comes before new work.
	if err := c.nc.OnReadable(lanes.Continuation, nil); err != nil {
		c.close()
		return
	}
	if err := c.nc.OnHangup(c.unparkFn); err != nil {
		c.close()
		return
	}
	c.arm(hold)
}

// unpark ends a hold (its time is up, its client hung up, the worker went
// idle, the server shuts down): the refusal held is written, the
// connection reads again, and a request its client pipelined behind the
// refused one starts (or is refused for its age) as any other, and a
// hang-up is read as one.
func (c *conn) unpark() {
	if c.state != connParked {
		return
	}
	c.unlist()
	_ = c.nc.OnHangup(nil)
	b := c.held
	c.held = nil
	c.state = connActive
	c.writeRefusal(b)
	if c.state == connIdle {
		c.nc.QueueRead()
	}
}

// unlist takes a parked connection off its worker's parked list and the count.
func (c *conn) unlist() {
	c.srv.parked.Add(-1)
	c.ws.parked.remove(c)
}

// workerIdle is the server's idle hook: a worker with nothing left to do
// ends the hold of the connection it parked last, so that a hold never
// leaves a worker idle. The connection parked last is the one most likely
// to carry a request that can still start in time: a closed loop's client
// resent the moment it was refused, and a pool reuses its latest
// connection first. The read it queues is work, and the worker does not
// sleep; if that request is refused again, it is the one parked last again,
// and the next idle moment finds its next request.
func (srv *Server) workerIdle(w *sched.Worker) {
	if c := srv.ws[w.ID()].parked.head; c != nil {
		c.unpark()
	}
}
