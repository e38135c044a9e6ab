package admit

import (
	"time"

	"github.com/sluice-go/sluice/queue"
)

// Stats are a pipeline's counters since New. Each is read atomically;
// together they are not one snapshot while requests run. Every request
// decided is, in the end, admitted, rejected or canceled: once nothing runs
// or waits, Admitted + Rejected + Canceled is the number of requests
// decided.
type Stats struct {
	// InFlight is the number of admitted requests that have not ended.
	InFlight int64
	// Admitted counts requests started, at once or after waiting.
	Admitted int64
	// Queued counts requests that had to wait, whatever became of them.
	Queued int64
	// Rejected counts requests answered with a rejection; RejectedBy
	// counts them by reason.
	Rejected   int64
	RejectedBy map[string]int64
	// Canceled counts requests whose client went away after they were
	// decided and before they ran (Cancel, Withdraw): an HTTP/2 stream
	// reset while it waited, a connection closed while its request was
	// queued. The server refused none of them.
	Canceled int64
	// Late counts requests started past Config.MaxAge, within
	// Config.LoopGrace, as a closed loop's: they are in Admitted too.
	Late int64
	// GatesClosed is the total time the gates have been closed, as the
	// pipeline saw them: from a refusal (by a gate, or by the age limit),
	// or from a request admitted while the line is full (every request
	// has waited at least Config.Target for an Interval: the server is at
	// its capacity, though it refuses none), until a request is admitted
	// with no one left waiting and the line no longer full; an interval with no refusal, start or end
	// counts for at most Config.Interval unless a request waits.
	GatesClosed time.Duration
	// MaxAge is the age limit in force now: Config.MaxAge, or Target
	// while the line is standing (unless refusing under Target was found
	// futile in this standing period: FutileRatio); zero without a limit.
	MaxAge time.Duration
	// Standing reports whether an overload's line stands: requests at the
	// age limit kept coming for a tenth of an interval, and have not yet
	// been young for a tenth of one or absent for one (see Config.Target).
	Standing bool
	// Queue is the queue's own counters (zero without a queue).
	Queue queue.Stats
}

// Stats returns the counters.
func (p *Pipeline) Stats() Stats {
	var st Stats
	for i := range p.shards {
		st.InFlight += p.shards[i].inFlight.count()
		st.Admitted += p.shards[i].admitted.Load()
		st.Late += p.shards[i].late.Load()
	}
	st.Queued = p.queued.Load()
	st.Rejected, st.RejectedBy = p.answers.counts()
	st.Canceled = p.canceled.Load()
	st.GatesClosed = p.closed.at(p.clock())
	if p.det != nil {
		st.Standing = p.det.Standing(p.clock())
	}
	st.MaxAge = p.ageLimit()
	if p.q != nil {
		st.Queue = p.q.Stats()
	}
	return st
}
