package queue

import "time"

// Stats are a queue's counters since [New]. Each field is read atomically,
// without the queue's lock, so Stats may be called from any goroutine at any
// time; the fields are not one consistent snapshot while the queue is in use.
// When it is idle, Pushes equals Started + Removed + the sum of Rejected +
// Len.
type Stats struct {
	// Len is the number of waiting entries.
	Len int
	// Pushes counts calls to Push, including those rejected at once.
	Pushes uint64
	// Started counts entries started by Pump.
	Started uint64
	// Removed counts entries taken out by Remove (and by Wait when its
	// context ended).
	Removed uint64
	// Rejected counts rejections, indexed by [Reason].
	Rejected [numReasons]uint64
	// Waits, WaitTotal and WaitMax summarize the time entries spent in the
	// queue: how many left it after waiting (started, rejected by timeout,
	// eviction or Close, or removed; not those rejected at once by Push),
	// the sum of their waits and the longest.
	Waits     uint64
	WaitTotal time.Duration
	WaitMax   time.Duration
	// Overloaded reports a standing queue, as its [Detector] judges it
	// from the sojourn times of the entries that left (whatever the
	// order). Under [CoDel] this is the state in which entries get the
	// short timeout and are started newest first.
	Overloaded bool
}

// MeanWait returns WaitTotal / Waits, or zero when nothing has waited.
func (s Stats) MeanWait() time.Duration {
	if s.Waits == 0 {
		return 0
	}
	return s.WaitTotal / time.Duration(s.Waits)
}

// Stats returns the queue's counters. It takes no lock.
func (q *Queue) Stats() Stats {
	s := Stats{
		Len:       int(q.length.Load()),
		Pushes:    q.pushes.Load(),
		Started:   q.started.Load(),
		Removed:   q.removed.Load(),
		Waits:     q.waits.Load(),
		WaitTotal: time.Duration(q.waitSum.Load()),
		WaitMax:   time.Duration(q.waitMax.Load()),
	}
	for i := range s.Rejected {
		s.Rejected[i] = q.rejected[i].Load()
	}
	s.Overloaded = q.det.Standing(q.clock())
	return s
}
