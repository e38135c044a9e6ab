package admit

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-go/sluice/reject"
)

// TimeoutHeader is the header field that carries the time a request's
// caller has left, in the format of gRPC's grpc-timeout: one to eight ASCII
// digits followed by a unit, H (hours), M (minutes), S (seconds), m
// (milliseconds), u (microseconds) or n (nanoseconds): "250m" is 250 ms.
// The value is relative, so that the clocks of the two machines need not
// agree: it counts from when the request was sent, and the receiver counts
// it from when it received the request (the kernel's receive stamp on the
// sluice server). Package client and await's Transport send it; the
// pipeline reads it (Config.Deadline).
const TimeoutHeader = "Sluice-Timeout"

// GRPCTimeoutHeader is gRPC's field for a call's deadline, in the format
// TimeoutHeader borrows. With DeadlineConfig.Header unset, the pipeline
// reads it on a POST (every gRPC call is one) that has no TimeoutHeader.
// An adapter that picks header fields (Attempt.Picked) does not pick it:
// gRPC's calls come over HTTP/2, whose requests carry their whole header
// map (Attempt.Header).
const GRPCTimeoutHeader = "Grpc-Timeout"

// DeadlineConfig configures how a pipeline treats the time a request's
// caller has left (TimeoutHeader). The zero value honours the field: a
// request whose time has run out by the time it is decided is rejected
// unstarted, with the reason "deadline", and a request that waits in the
// queue is rejected ("queue-timeout") when its time runs out, if that comes
// before the queue's own timeout. A request without the field is not
// affected.
type DeadlineConfig struct {
	// Header is the field to read; empty means TimeoutHeader, or, on a
	// POST without it, gRPC's own grpc-timeout (GRPCTimeoutHeader: a gRPC
	// call's deadline, which its clients send). Its value must have
	// TimeoutHeader's format, grpc-timeout's; a field that does not parse
	// is ignored.
	Header string
	// MinLeft is the least time a request must have left when it is
	// decided to be worth starting: the server cannot know how long a
	// handler will take, so this is the operator's estimate (the
	// handler's usual latency, say). Zero means that any time left is
	// enough.
	MinLeft time.Duration
	// Ignore turns the deadline off: the field is not read.
	Ignore bool
}

// deadlineRule is a pipeline's DeadlineConfig, settled.
type deadlineRule struct {
	key     string // canonical header key; empty when off
	grpc    bool   // read GRPCTimeoutHeader when key is absent
	minLeft int64
}

func newDeadlineRule(o DeadlineConfig) deadlineRule {
	if o.Ignore {
		return deadlineRule{}
	}
	key := o.Header
	if key == "" {
		key = TimeoutHeader
	}
	return deadlineRule{key: http.CanonicalHeaderKey(key), grpc: o.Header == "", minLeft: int64(max(o.MinLeft, 0))}
}

// refusedDeadline is the refusal of a request whose time has run out: no
// Retry-After, since it has no time left to retry in.
var refusedDeadline = &Refusal{Reason: reject.Deadline, RetryAfter: -1}

// deadlineRefusal reads t's time left, records when it runs out (t.until,
// on the pipeline's clock) and returns the refusal when that is too close
// to start it; nil otherwise. It runs in Decide, after the age limit, which
// has set t.arrived when the arrival is known.
func (p *Pipeline) deadlineRefusal(t *Ticket, now int64) *Refusal {
	t.until = 0
	if p.deadline.key == "" {
		return nil
	}
	v := t.firstValue(p.deadline.key)
	if v == "" && p.deadline.grpc && t.Method == http.MethodPost {
		v = t.firstValue(GRPCTimeoutHeader) // gRPC calls are POSTs: other requests skip the lookup
	}
	if v == "" {
		return nil
	}
	left, ok := ParseTimeout(v)
	if !ok {
		return nil
	}
	from := now
	if t.known {
		from = t.arrived
	}
	t.until = from + int64(left)
	if t.until-now <= p.deadline.minLeft {
		return refusedDeadline
	}
	return nil
}

// waitFrom returns the arrival to push t into the queue with, and whether
// there is one (else the queue counts from now). A request with a deadline
// earlier than the queue's own is pushed as if it had arrived earlier, so
// that its deadline in the queue (arrival plus the queue's timeout) is its
// own: the queue keeps one timeout for all its entries, and this keeps its
// lists in deadline order. In FIFO order such a request is served ahead of
// those whose time runs out later (earliest deadline first); its wait, in
// the queue's counters, counts from that earlier arrival.
func (p *Pipeline) waitFrom(t *Ticket) (int64, bool) {
	if t.until == 0 {
		return t.arrived, t.known
	}
	from := t.arrived
	if !t.known {
		from = p.clock()
	}
	return min(from, t.until-int64(p.q.Timeout())), true
}

// Deadline returns when the time left by the request's caller
// (TimeoutHeader) runs out, on the wall clock, and whether it sent one. It
// is valid after Decide, for an admitted request: adapters end the
// request's context then, so that what the handler calls downstream with
// it (await's Transport, package client) forwards the time that is left.
func (t *Ticket) Deadline() (time.Time, bool) {
	if t.until == 0 || t.p == nil {
		return time.Time{}, false
	}
	return time.Now().Add(time.Duration(t.until - t.p.clock())), true
}

// Timeout units of TimeoutHeader, from the finest.
var timeoutUnits = [...]struct {
	unit byte
	d    time.Duration
}{{'n', time.Nanosecond}, {'u', time.Microsecond}, {'m', time.Millisecond}, {'S', time.Second}, {'M', time.Minute}, {'H', time.Hour}}

// maxTimeoutValue is the largest value of TimeoutHeader: eight digits.
const maxTimeoutValue = 99_999_999

// FormatTimeout returns d in TimeoutHeader's format, in the finest unit
// whose value fits in eight digits, rounded down (a positive d is at least
// "1n"); a d that is not positive is "0n".
func FormatTimeout(d time.Duration) string {
	if d <= 0 {
		return "0n"
	}
	for _, u := range timeoutUnits {
		if v := d / u.d; v <= maxTimeoutValue {
			return strconv.FormatInt(int64(v), 10) + string(u.unit)
		}
	}
	return strconv.FormatInt(maxTimeoutValue, 10) + "H" // beyond any Duration
}

// ParseTimeout parses a value of TimeoutHeader's format; ok is false when
// it does not have that format.
func ParseTimeout(s string) (d time.Duration, ok bool) {
	if len(s) < 2 || len(s) > 9 {
		return 0, false
	}
	var v int64
	for i := 0; i < len(s)-1; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	for _, u := range timeoutUnits {
		if u.unit == s[len(s)-1] {
			if v > int64(maxDuration/u.d) {
				return maxDuration, true
			}
			return time.Duration(v) * u.d, true
		}
	}
	return 0, false
}

const maxDuration = time.Duration(1<<63 - 1)
