package server

import (
	"sync"
	"time"
)

// panicBurst is how many handler panics a server logs in one second, with
// their stacks; the others are counted, and the next one logged says how
// many were not. A handler that panics on every request must not fill the
// disk during an incident.
const panicBurst = 10

// panicLog rate-limits the log lines of handler panics.
type panicLog struct {
	mu      sync.Mutex
	sec     int64 // the second being counted (Unix time)
	n       int   // panics logged in it
	dropped int64 // panics not logged since the last one that was
}

// allow reports whether a panic at now is logged and, if it is, how many
// were not since the last one that was.
func (p *panicLog) allow(now time.Time) (ok bool, dropped int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sec := now.Unix(); sec != p.sec {
		p.sec, p.n = sec, 0
	}
	if p.n >= panicBurst {
		p.dropped++
		return false, 0
	}
	p.n++
	dropped, p.dropped = p.dropped, 0
	return true, dropped
}
