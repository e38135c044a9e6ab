package admit

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Observer is told of each request as the pipeline decides and ends it, for
// what counters cannot give: histograms of the wait before the start and of
// the run time, answers by status. Pipeline.Observe adds one; package
// metrics (Prometheus) and package dashboard each add their own.
//
// Its methods are called on the goroutine that decided or ended the
// request (a worker, a request's goroutine, the queue's timer), sometimes
// with the queue's lock held: like a Policy's, they must be quick, must not
// block, must not call the Pipeline, and should allocate nothing. The
// Attempt must not be kept or modified.
type Observer interface {
	// Started is called when a request is admitted, at once or after
	// waiting in the queue; wait is the time from its arrival (the kernel's
	// receive stamp where the adapter reads it, otherwise the decision) to
	// its start: its time in the socket buffers and in the queue. A request
	// admitted from the queue that cannot run after all (Cancel) is
	// reported Started, then Canceled.
	Started(a *Attempt, wait time.Duration)
	// Ended is called when an admitted request ends (Done), after the
	// policies and gates were told, with its outcome.
	Ended(a *Attempt, o Outcome)
	// Rejected is called for each rejection, with its reason and the
	// status it is answered with.
	Rejected(a *Attempt, reason string, status int)
	// Canceled is called for a request whose client went away after it was
	// decided and before it ran (Cancel, Withdraw): the server refused
	// nothing, so it is not a rejection.
	Canceled(a *Attempt)
}

// observers is the pipeline's set of observers, replaced whole when one is
// added or removed, and read with one atomic load per event.
type observers struct {
	mu   sync.Mutex // serializes Observe and its removals
	list atomic.Pointer[[]*observerEntry]
}

// observerEntry wraps an observer so that the same one added twice is
// removed once per Observe.
type observerEntry struct{ o Observer }

// Observe adds o to the pipeline's observers, from now on, and returns the
// function that removes it (safe to call more than once). An event that is
// being reported while o is added or removed may or may not reach it.
func (p *Pipeline) Observe(o Observer) (remove func()) {
	if o == nil {
		return func() {}
	}
	e := &observerEntry{o: o}
	obs := &p.observers
	obs.mu.Lock()
	var next []*observerEntry
	if cur := obs.list.Load(); cur != nil {
		next = slices.Clone(*cur)
	}
	next = append(next, e)
	obs.list.Store(&next)
	obs.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			obs.mu.Lock()
			defer obs.mu.Unlock()
			cur := obs.list.Load()
			if cur == nil {
				return
			}
			next := slices.DeleteFunc(slices.Clone(*cur), func(x *observerEntry) bool { return x == e })
			if len(next) == 0 {
				obs.list.Store(nil)
				return
			}
			obs.list.Store(&next)
		})
	}
}

// started reports t's start at now.
func (obs *observers) started(t *Ticket, now int64) {
	if l := obs.list.Load(); l != nil {
		wait := time.Duration(max(now-t.arrived, 0))
		for _, e := range *l {
			e.o.Started(&t.Attempt, wait)
		}
	}
}

// ended reports the end of t.
func (obs *observers) ended(t *Ticket, o Outcome) {
	if l := obs.list.Load(); l != nil {
		for _, e := range *l {
			e.o.Ended(&t.Attempt, o)
		}
	}
}

// canceled reports the cancellation of t.
func (obs *observers) canceled(t *Ticket) {
	if l := obs.list.Load(); l != nil {
		for _, e := range *l {
			e.o.Canceled(&t.Attempt)
		}
	}
}

// rejected reports the rejection of t, whose answer is set.
func (obs *observers) rejected(t *Ticket, reason string) {
	if l := obs.list.Load(); l != nil {
		status := 0
		if t.answer != nil {
			status = t.answer.Status
		}
		for _, e := range *l {
			e.o.Rejected(&t.Attempt, reason, status)
		}
	}
}
