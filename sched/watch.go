package sched

import (
	"errors"
	"fmt"
)

// Watch is a file descriptor registered with a worker's epoll instance. Its
// handler runs on the worker with the ready events, when the worker parks in
// epoll_wait and, while it is busy, every Config.PollEvery tasks. A handler
// should be short: typically it queues the real work in the right lane
// (accepting a connection is Upstream work, resuming a request's read is
// Continuation work).
type Watch struct {
	w    *Worker
	fd   int
	slot int32
	gen  uint32
	h    func(events uint32)
}

// ErrClosedWatch is returned by the methods of a Watch already closed.
var ErrClosedWatch = errors.New("sched: watch closed")

// Watch registers fd for events (EPOLLIN, EPOLLOUT, EPOLLET, ... from
// golang.org/x/sys/unix) and calls h with the ready events. Local: call it
// only on w. The worker does not own fd: close the Watch before closing fd.
func (w *Worker) Watch(fd int, events uint32, h func(events uint32)) (*Watch, error) {
	if h == nil {
		return nil, errors.New("sched: Watch with a nil handler")
	}
	defer w.leave(w.enter())
	var slot int32
	if n := len(w.freeSlots); n > 0 {
		slot = w.freeSlots[n-1]
		w.freeSlots = w.freeSlots[:n-1]
	} else {
		slot = int32(len(w.watches))
		w.watches = append(w.watches, nil)
	}
	wt := &Watch{w: w, fd: fd, slot: slot, h: h}
	w.gen++
	wt.gen = w.gen
	ev := epollEvent{Events: events, Fd: slot, Pad: int32(wt.gen)}
	if err := epollAdd(w.epfd, fd, &ev); err != nil {
		w.freeSlots = append(w.freeSlots, slot)
		return nil, fmt.Errorf("sched: watch fd %d: %w", fd, err)
	}
	w.watches[slot] = wt
	w.nwatch++
	return wt, nil
}

// FD returns the watched descriptor.
func (wt *Watch) FD() int { return wt.fd }

// Modify changes the events watched. Local.
func (wt *Watch) Modify(events uint32) error {
	if wt.w == nil {
		return ErrClosedWatch
	}
	defer wt.w.leave(wt.w.enter())
	ev := epollEvent{Events: events, Fd: wt.slot, Pad: int32(wt.gen)}
	if err := epollMod(wt.w.epfd, wt.fd, &ev); err != nil {
		return fmt.Errorf("sched: modify watch of fd %d: %w", wt.fd, err)
	}
	return nil
}

// Close removes the descriptor from the worker's epoll instance; events
// already collected for it are discarded. It does not close the descriptor.
// Local.
func (wt *Watch) Close() error {
	w := wt.w
	if w == nil {
		return ErrClosedWatch
	}
	defer w.leave(w.enter())
	wt.w = nil
	w.watches[wt.slot] = nil
	w.freeSlots = append(w.freeSlots, wt.slot)
	w.nwatch--
	if err := epollDel(w.epfd, wt.fd); err != nil {
		return fmt.Errorf("sched: unwatch fd %d: %w", wt.fd, err)
	}
	return nil
}
