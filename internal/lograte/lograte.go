// Package lograte limits how many lines of one kind a process logs a
// second: during an incident (a handler that panics on every request, one
// that blocks its worker on every call) the log must stay readable and the
// disk must not fill. Lines over the limit are counted, and the next line
// logged says how many were not.
package lograte

import (
	"sync"
	"time"
)

// Limiter allows Burst lines in each second of wall-clock time. The zero
// value allows none; use New.
type Limiter struct {
	burst int

	mu      sync.Mutex
	sec     int64 // the second being counted (Unix time)
	n       int   // lines logged in it
	dropped int64 // lines not logged since the last one that was
}

// New returns a Limiter that allows burst lines a second.
func New(burst int) *Limiter { return &Limiter{burst: burst} }

// Allow reports whether a line at now is logged and, if it is, how many were
// not since the last one that was. It is safe from any goroutine.
func (l *Limiter) Allow(now time.Time) (ok bool, dropped int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sec := now.Unix(); sec != l.sec {
		l.sec, l.n = sec, 0
	}
	if l.n >= l.burst {
		l.dropped++
		return false, 0
	}
	l.n++
	dropped, l.dropped = l.dropped, 0
	return true, dropped
}
