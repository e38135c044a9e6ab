package admit

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/internal/monotime"
	"github.com/sluice-go/sluice/queue"
)

// Decision is what Decide says of a request.
type Decision uint8

const (
	// Admitted: the request starts now; the adapter calls Done when it
	// ends.
	Admitted Decision = iota
	// Queued: the request waits; OnStart or OnReject will be called.
	Queued
	// Rejected: the request is answered with the Ticket's Answer, unstarted.
	Rejected
)

// String returns "admitted", "queued" or "rejected".
func (d Decision) String() string {
	switch d {
	case Admitted:
		return "admitted"
	case Queued:
		return "queued"
	case Rejected:
		return "rejected"
	}
	return fmt.Sprintf("decision(%d)", uint8(d))
}

// Host is what the adapter that owns a pipeline (the sluice server, the
// net/http middleware) tells it about where it runs. Users configure a
// pipeline with Config; adapters add the Host.
type Host struct {
	// Executor is the sluice executor the requests run on, or nil.
	Executor Executor
	// Shards is the number of counter shards (one per worker); zero
	// means one.
	Shards int
	// Clock returns monotonic nanoseconds; nil means the real clock. The
	// queue's deadlines, the standing state, latencies and the
	// gates-closed time are all on it.
	Clock func() int64
	// AfterFunc starts the queue's timer: it calls f once d has passed
	// on Clock's time base, until stopped or reset. Nil means
	// time.AfterFunc; a simulation on virtual time gives its own.
	AfterFunc func(d time.Duration, f func()) Timer
}

// Timer is what the pipeline needs of a timer; *time.Timer implements it.
type Timer interface {
	Reset(d time.Duration) bool
	Stop() bool
}

// Pipeline is the whole admission decision of one server: the request-age
// limit, the policies, the gates, the timed queue, the rejections and the
// counters. Adapters call Decide when a request's head has been read and
// Done when it ends; see the package documentation for the flow.
//
// A Pipeline is safe for concurrent use. Close it when its server stops.
type Pipeline struct {
	policies []Policy
	gates    []Policy
	picked   []string // header names to pick out (PickHeader), set while attaching
	pickDone bool     // attaching is over: PickHeader takes no more
	clock    func() int64
	classify func(a *Attempt) queue.Class
	onReject func(a *Attempt, reason string)

	maxAge     atomic.Int64  // 0: no age limit
	ageLimits  bool          // configured with an age limit: adapters read stamps
	anyUnasked bool          // a policy implements Unasked
	sharers    []ShareKeeper // the policies that implement ShareKeeper
	trims      bool          // trims the excess of clients beyond their share (Env.TrimsShares)
	det        *queue.Detector
	q          *queue.Queue
	timer      Timer // runs the queue's Expire at its earliest deadline

	admitOwn, admitSpare func(e *queue.Entry) bool // bound once

	deadline deadlineRule // the time left by the caller (deadline.go)

	answers  answers
	closed   closedTime
	queued   atomic.Int64
	canceled atomic.Int64 // Cancel and Withdraw
	shards   []shard
	window   window // the rate of admissions and the futility of the lower limit (window.go)
	// pastLimit records whether the requests that reached MaxAge were
	// sent at once after their connection's previous answer (window.go).
	pastLimit resends
	// loopGrace is Config.LoopGrace: 0 for half of MaxAge, negative for
	// none.
	loopGrace time.Duration

	observers observers // see Observe (observe.go)

	closeOnce sync.Once
	detach    []func()
}

// shard holds the counters of one worker, on cache lines of their own.
// inFlight is also the running count that blame reads while the gates are
// open (closedTime).
type shard struct {
	_        [64]byte
	inFlight runners
	admitted atomic.Int64
	// lowered counts refusals by the standing line's lower limit alone
	// (window.go).
	lowered atomic.Int64
	// resent counts those of them whose client resent at once
	// (Ticket.Resent).
	resent atomic.Int64
	// aged counts refusals at MaxAge (window.go).
	aged atomic.Int64
	// late counts requests started past MaxAge as a closed loop's
	// (Config.LoopGrace).
	late atomic.Int64
	_    [16]byte
}

// New builds the pipeline that cfg describes, on host, and attaches its
// policies and gates (Attacher). It fails, naming what to change, when the
// configuration cannot work: a nil policy, a queue with nothing that can
// refuse or with no wait limit, a status that is not an error, a gate that
// needs the sluice executor outside it or that serves another one.
func New(cfg Config, host Host) (*Pipeline, error) {
	s, err := cfg.settle()
	if err != nil {
		return nil, err
	}
	p := &Pipeline{
		policies:  append([]Policy(nil), cfg.Policies...),
		gates:     append([]Policy(nil), cfg.Gates...),
		clock:     host.Clock,
		onReject:  cfg.Rejection.OnReject,
		shards:    make([]shard, max(host.Shards, 1)),
		answers:   answers{status: s.status, retry: s.retryAfter, header: cfg.Rejection.Header},
		deadline:  newDeadlineRule(cfg.Deadline),
		loopGrace: cfg.LoopGrace,
	}
	if p.clock == nil {
		p.clock = monotime.Clock()
	}
	if s.maxAge > 0 {
		p.maxAge.Store(int64(s.maxAge))
		p.ageLimits = true
	}
	if s.target > 0 {
		p.det = queue.NewDetector(queue.DetectorConfig{Target: s.target, Interval: s.interval})
		p.det.SetLimit(max(s.maxAge, 0))
	}
	p.admitOwn = func(e *queue.Entry) bool { return p.admitEntry(e, false) }
	p.admitSpare = func(e *queue.Entry) bool { return p.admitEntry(e, true) }
	if q := cfg.Queue; q != nil {
		p.classify = q.Classify
		afterFunc := host.AfterFunc
		if afterFunc == nil {
			afterFunc = func(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
		}
		p.timer = afterFunc(time.Hour, p.expire)
		p.timer.Stop()
		p.q = queue.New(queue.Config{
			Timeout:  s.maxAge,
			Order:    q.Order,
			MaxLen:   q.MaxLen,
			Detector: p.det, // nil only when the standing state is off
			Clock:    p.clock,
			Arm:      p.arm,
		})
	}
	// Trims by age alone, or queues a request beyond its share behind
	// every other (enqueue).
	p.trims = p.ageLimits && (len(p.gates) == 0 || p.q != nil)
	for _, pol := range append(p.policies[:len(p.policies):len(p.policies)], p.gates...) {
		if b, ok := pol.(BlameUser); ok && b.UsesBlame() {
			p.closed.blame = true
		}
	}
	p.closed.stale = int64(s.interval)
	if p.q != nil {
		p.closed.waiting = func() bool { return p.q.Len() > 0 }
	}
	for i := range p.shards {
		p.closed.shards = append(p.closed.shards, &p.shards[i].inFlight)
	}
	for _, pol := range p.policies {
		if _, ok := pol.(Unasked); ok {
			p.anyUnasked = true
		}
		if s, ok := pol.(ShareKeeper); ok {
			p.sharers = append(p.sharers, s)
		}
	}
	if p.deadline.key != "" {
		p.pickHeader(p.deadline.key) // read for every request
	}
	env := Env{
		Executor:    host.Executor,
		Wake:        p.wake,
		Now:         p.clock,
		GatesClosed: func() time.Duration { return p.closed.at(p.clock()) },
		Shards:      len(p.shards),
		PickHeader:  p.pickHeader,
		TrimsShares: p.trims,
	}
	attach := func(kind string, i int, pol Policy) error {
		a, ok := pol.(Attacher)
		if !ok {
			return nil
		}
		detach, err := a.Attach(env)
		if err != nil {
			return fmt.Errorf("admit: %s[%d] (%T): %w", kind, i, pol, err)
		}
		if detach != nil {
			p.detach = append(p.detach, detach)
		}
		return nil
	}
	for i, pol := range p.policies {
		err = errors.Join(err, attach("Config.Policies", i, pol))
	}
	for i, g := range p.gates {
		err = errors.Join(err, attach("Config.Gates", i, g))
	}
	p.pickDone = true
	if err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Decide decides for the request t describes, on the calling goroutine:
//
//  1. a request older than the age limit is rejected ("queue-timeout");
//  2. the policies are asked in order; the first refusal rejects it;
//  3. if requests wait in the queue, it joins them, so as not to overtake
//     them; otherwise the gates are asked in order, and the first refusal
//     makes it wait (with a queue) or rejects it;
//  4. otherwise it is admitted.
//
// Admitted: the adapter runs the request and calls Done when it ends.
// Queued: the adapter leaves the request alone (reads nothing more of its
// connection) until OnStart or OnReject is called; Withdraw takes it back.
// Rejected: the adapter answers with t.Answer, without running anything.
// The caller is the request's own goroutine or worker: the gates count it
// as running (Attempt.Spare unset).
func (p *Pipeline) Decide(t *Ticket) Decision {
	t.p = p
	t.Spare = false
	t.policies = false
	t.answer, t.extra = nil, nil
	now := p.clock()
	t.arrived, t.known = now, false // unknown: the wait counts from now
	if t.Stamp != 0 {
		if limit := p.maxAge.Load(); limit > 0 {
			age := max(time.Now().UnixNano()-t.Stamp, 0)
			t.arrived, t.known = now-age, true
			lowered := false
			if p.trims && age >= limit/2 && age < limit && p.share(t) == ShareBeyond {
				lowered, limit = true, limit/2
			}
			if p.det != nil && p.det.Observe(now, age) && p.lowerable(now) {
				p.measure(now)
				if target := p.lowLimit(); age >= target && age < limit && p.share(t) != ShareWithin {
					lowered, limit = true, target
				}
			}
			if age >= limit/2 {
				// A line forms: the window's measure (window.go) will
				// know the rate before it reaches the limit.
				p.measure(now)
			}
			if age >= limit && !lowered && p.startsLate(t, now, age, limit) {
				p.shard(t).late.Add(1)
			} else if age >= limit {
				if lowered {
					sh := p.shard(t)
					sh.lowered.Add(1)
					if t.Resent() {
						sh.resent.Add(1)
					}
					p.measure(now)
				} else {
					p.shard(t).aged.Add(1)
				}
				// The server is behind its arrivals: as closed as a
				// gate's refusal (with the age limit alone, it is the
				// only sign of overload).
				p.closed.refused(now)
				p.unasked(p.policies, t, refusedTooOld)
				return p.rejectNow(t, refusedTooOld)
			}
		}
	}
	if r := p.deadlineRefusal(t, now); r != nil {
		p.unasked(p.policies, t, r)
		return p.rejectNow(t, r)
	}
	for i, pol := range p.policies {
		if r := pol.Admit(&t.Attempt); r != nil {
			giveBack(p.policies[:i], &t.Attempt)
			p.unasked(p.policies[i+1:], t, r)
			return p.rejectNow(t, r)
		}
	}
	t.policies = true
	if len(p.gates) > 0 {
		if p.q != nil && p.q.Len() > 0 {
			return p.enqueue(t)
		}
		if r := p.acquire(t); r != nil {
			p.closed.refused(now)
			if p.q != nil {
				return p.enqueue(t)
			}
			p.releasePolicies(t)
			return p.rejectNow(t, r)
		}
	}
	p.admit(t, now, true)
	return Admitted
}

// share is where t stands by the pipeline's ShareKeepers together:
// beyond its share when some keeper says so, within it when every keeper
// (and at least one) says so, unknown otherwise.
func (p *Pipeline) share(t *Ticket) Share {
	all := ShareUnknown
	for i, s := range p.sharers {
		switch sh := s.Share(&t.Attempt); {
		case sh == ShareBeyond:
			return ShareBeyond
		case i == 0:
			all = sh
		case sh != ShareWithin:
			all = ShareUnknown
		}
	}
	return all
}

// unasked tells the policies of pols that implement Unasked of the
// refusal r of t, made before they were asked.
func (p *Pipeline) unasked(pols []Policy, t *Ticket, r *Refusal) {
	if !p.anyUnasked {
		return
	}
	for _, pol := range pols {
		if u, ok := pol.(Unasked); ok {
			u.Unasked(&t.Attempt, r)
		}
	}
}

// acquire asks the gates in order for t; on a refusal it gives back the
// gates that had admitted it and returns the refusal.
func (p *Pipeline) acquire(t *Ticket) *Refusal {
	for i, g := range p.gates {
		if r := g.Admit(&t.Attempt); r != nil {
			giveBack(p.gates[:i], &t.Attempt)
			return r
		}
	}
	return nil
}

// giveBack tells pols, in reverse order, that an admission never ran.
func giveBack(pols []Policy, a *Attempt) {
	for i := len(pols) - 1; i >= 0; i-- {
		pols[i].Done(a, Outcome{Canceled: true})
	}
}

// releasePolicies gives back what the policies hold for t, if they do.
func (p *Pipeline) releasePolicies(t *Ticket) {
	if t.policies {
		t.policies = false
		giveBack(p.policies, &t.Attempt)
	}
}

// admit counts t as admitted at now; open says whether the gates are open
// from now (no one is left waiting).
func (p *Pipeline) admit(t *Ticket, now int64, open bool) {
	sh := p.shard(t)
	sh.admitted.Add(1)
	t.started = now
	// While the line is full (it stands, and the server is refusing
	// requests for their age, or every request waits, though none for
	// too long), the server is saturated: the gates close, or stay
	// closed, though this one starts (so that a tenant controller keeps
	// the drops that keep the server from refusing).
	if p.det != nil && p.det.Full(now) {
		p.closed.refused(now)
		open = false
	}
	t.blameAt, t.blamed = p.closed.start(now, open, &sh.inFlight)
	p.observers.started(t, now)
}

func (p *Pipeline) shard(t *Ticket) *shard {
	if uint(t.Shard) < uint(len(p.shards)) {
		return &p.shards[t.Shard]
	}
	return &p.shards[0]
}

// end counts t out of the requests running at now, and returns its blame
// (zero when it was not counted for blame).
func (p *Pipeline) end(t *Ticket, now int64) time.Duration {
	r := &p.shard(t).inFlight
	if !t.blamed {
		r.out()
		return 0
	}
	t.blamed = false
	return p.closed.end(now, t.blameAt, r)
}

// rejectNow counts a rejection of t for r and sets its answer.
func (p *Pipeline) rejectNow(t *Ticket, r *Refusal) Decision {
	p.refuse(t, r)
	return Rejected
}

func (p *Pipeline) refuse(t *Ticket, r *Refusal) {
	t.answer, t.extra = p.answers.count(r), r.Header
	if p.onReject != nil {
		p.onReject(&t.Attempt, r.Reason)
	}
	p.observers.rejected(t, r.Reason)
}

// enqueue makes t wait, then pumps once: the gates may have opened between
// their refusal and the push, and the caller's place is what the head would
// take. A decision made meanwhile (the push rejects at once, this pump or
// another goroutine's starts t) is returned here rather than through the
// callbacks.
func (p *Pipeline) enqueue(t *Ticket) Decision {
	p.queued.Add(1)
	t.Class = 0
	if p.classify != nil {
		t.Class = p.classify(&t.Attempt)
	}
	if p.trims && p.share(t) == ShareBeyond {
		// Behind every request within its share (ShareKeeper).
		t.Class = queue.MaxClasses - 1
	}
	if t.startFn == nil {
		t.startFn = func() { t.p.started(t) }
		t.rejectFn = func(r queue.Reason) { t.p.dropped(t, r) }
	}
	t.entry.Value = t
	t.phase.Store(phaseDeciding)
	if arrived, ok := p.waitFrom(t); ok {
		p.q.PushArrived(&t.entry, t.Class, arrived, t.startFn, t.rejectFn)
	} else {
		p.q.Push(&t.entry, t.Class, t.startFn, t.rejectFn)
	}
	p.pump(1, false)
	if t.phase.CompareAndSwap(phaseDeciding, phaseWaiting) {
		return Queued
	}
	if t.phase.Swap(phaseIdle) == phaseStartedEarly {
		return Admitted
	}
	return Rejected
}

// admitEntry is the queue's admit function for a waiting ticket: the gates,
// asked with Spare as given. It runs with the queue's lock held.
func (p *Pipeline) admitEntry(e *queue.Entry, spare bool) bool {
	t := e.Value.(*Ticket)
	t.Spare = spare
	return p.acquire(t) == nil
}

// started is a waiting ticket's start callback, on the goroutine that
// pumped.
func (p *Pipeline) started(t *Ticket) {
	p.admit(t, p.clock(), p.q.Len() == 0)
	if !t.phase.CompareAndSwap(phaseDeciding, phaseStartedEarly) {
		t.phase.Store(phaseIdle)
		t.OnStart()
	}
}

// dropped is a waiting ticket's reject callback.
func (p *Pipeline) dropped(t *Ticket, r queue.Reason) {
	p.releasePolicies(t)
	p.refuse(t, queueRefusal(r))
	if !t.phase.CompareAndSwap(phaseDeciding, phaseRejectedEarly) {
		t.phase.Store(phaseIdle)
		t.OnReject()
	}
}

// Done ends an admitted request with its outcome: the gates and then the
// policies are told, in reverse order, with the latency measured here, and
// the request's place goes to the head of the queue.
func (p *Pipeline) Done(t *Ticket, o Outcome) {
	now := p.clock()
	o.Latency = time.Duration(max(now-t.started, 0))
	o.Canceled = false
	o.Blame = p.end(t, now)
	for i := len(p.gates) - 1; i >= 0; i-- {
		p.gates[i].Done(&t.Attempt, o)
	}
	if t.policies {
		t.policies = false
		for i := len(p.policies) - 1; i >= 0; i-- {
			p.policies[i].Done(&t.Attempt, o)
		}
	}
	p.observers.ended(t, o)
	p.pump(1, false)
}

// Cancel takes back the admission of a request that will not run after all
// (its client went away, its connection closed, between its admission and
// its handler): the policies learn nothing, it counts as canceled
// (Stats.Canceled) rather than as admitted, and its place goes to the head
// of the queue. Answer then gives an answer with the reason
// "queue-canceled", if the client is still there to read it.
func (p *Pipeline) Cancel(t *Ticket) {
	p.retract(t)
	p.cancel(t)
	p.pump(1, false)
}

// retract undoes t's admission: the count, its run, what the gates and
// policies hold for it.
func (p *Pipeline) retract(t *Ticket) {
	p.shard(t).admitted.Add(-1)
	p.end(t, p.clock())
	giveBack(p.gates, &t.Attempt)
	p.releasePolicies(t)
}

// Expire takes back the admission of a request that waited past the age
// limit between its admission and its start (an HTTP/2 stream in its
// worker's queue): as Cancel, except that it counts as rejected, with the
// reason "queue-timeout", as a request that waited as long in a socket.
func (p *Pipeline) Expire(t *Ticket) { p.Refuse(t, refusedTooOld) }

// Refuse takes back the admission of a request that the adapter found it
// cannot start after all, for the reason r gives (the sluice server's
// HTTP/2 stream of a route that blocks its thread, with no spare thread
// left): as Cancel, except that it counts as rejected for r, and Answer
// gives r's answer.
func (p *Pipeline) Refuse(t *Ticket, r *Refusal) {
	p.retract(t)
	p.refuse(t, r)
	p.pump(1, false)
}

// Withdraw takes a waiting request out of the queue, for a client that went
// away, and reports whether it did: then no callback will be called, the
// request counts as canceled (Stats.Canceled), and Answer gives an answer
// with the reason "queue-canceled". It returns false when the request no
// longer waits: its OnStart or OnReject has been or is about to be called.
func (p *Pipeline) Withdraw(t *Ticket) bool {
	if p.q == nil || !p.q.Remove(&t.entry) {
		return false
	}
	t.phase.Store(phaseIdle)
	p.releasePolicies(t)
	p.cancel(t)
	return true
}

// cancel counts t as canceled and gives it its answer.
func (p *Pipeline) cancel(t *Ticket) {
	t.answer, t.extra = p.answers.answer(refusedCanceled, false), nil
	p.canceled.Add(1)
	p.observers.canceled(t)
}

// pump starts up to n waiting requests (n <= 0: as many as the gates
// admit); spare says whether the caller is the goroutine the request takes
// the place of (see Attempt.Spare).
func (p *Pipeline) pump(n int, spare bool) {
	if p.q == nil || p.q.Len() == 0 {
		return
	}
	if spare {
		p.q.PumpN(n, p.admitSpare)
	} else {
		p.q.PumpN(n, p.admitOwn)
	}
}

// wake is Env.Wake: a gate may have opened for n more requests.
func (p *Pipeline) wake(n int) { p.pump(n, true) }

// arm is the queue's Arm: the timer is kept set to the earliest deadline.
// It runs with the queue's lock held.
func (p *Pipeline) arm(deadline int64) {
	p.timer.Reset(time.Duration(max(deadline-p.clock(), 0)))
}

// expire runs on the timer's goroutine at the earliest deadline; the
// queue's Expire rearms the timer through arm while requests still wait.
func (p *Pipeline) expire() { p.q.Expire() }

// Close detaches the policies and gates (their wake-ups and the executor's
// idle hooks are removed, so nothing they live on keeps the pipeline
// reachable), rejects the requests still waiting with "queue-closed", and
// stops the queue's timer. Later decisions still work: gates are still
// asked, and a refusal is rejected at once ("queue-closed" with a queue).
// Close may be called more than once.
func (p *Pipeline) Close() {
	p.closeOnce.Do(func() {
		for i := len(p.detach) - 1; i >= 0; i-- {
			p.detach[i]()
		}
		p.detach = nil
		if p.q != nil {
			p.q.Close()
			p.timer.Stop()
		}
	})
}

// Classify returns the priority class the pipeline gives the request of a
// (Config.Queue's Classify), and false when the pipeline classifies
// nothing (no queue, or no Classify): an adapter that routes requests by
// their class, as the sluice server's lanes do, asks it rather than reading
// the configuration itself.
func (p *Pipeline) Classify(a *Attempt) (queue.Class, bool) {
	if p.classify == nil {
		return 0, false
	}
	return p.classify(a), true
}

// Classifies reports whether Classify gives requests a class.
func (p *Pipeline) Classifies() bool { return p.classify != nil }

// AgeLimited reports whether the pipeline was built with an age limit, so
// that an adapter that can read when requests arrived (Ticket.Stamp)
// should.
func (p *Pipeline) AgeLimited() bool { return p.ageLimits }

// TooOld reports whether something that arrived at stamp (Unix
// nanoseconds, as Ticket.Stamp) has waited past the age limit that holds
// now: MaxAge, or the standing-line target while an overload's line
// stands. It decides nothing and counts nothing: a server asks it
// before work that comes ahead of a request, such as a TLS handshake, so
// as not to spend that work on a request the age limit would refuse. It
// is false without an age limit or a stamp.
func (p *Pipeline) TooOld(stamp int64) bool {
	limit := p.ageLimit()
	return limit > 0 && stamp != 0 && time.Now().UnixNano()-stamp >= int64(limit)
}

// ageLimit is the age limit in force: MaxAge, or the standing line's
// target while the line stands; 0 without an age limit.
func (p *Pipeline) ageLimit() time.Duration {
	limit := time.Duration(p.maxAge.Load())
	if limit > 0 && p.lowered(p.clock()) {
		limit = min(limit, time.Duration(p.lowLimit()))
	}
	return max(limit, 0)
}

// SetMaxAge changes the age limit live (and the queue's timeout, for the
// requests that start waiting afterwards). It fails for a limit that is not
// positive, and for a pipeline built without one (its adapter reads no
// arrival stamps).
func (p *Pipeline) SetMaxAge(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("admit: SetMaxAge(%v): the limit must be positive", d)
	}
	if !p.ageLimits {
		return errors.New("admit: SetMaxAge on a pipeline built without an age limit (Config.MaxAge negative)")
	}
	p.maxAge.Store(int64(d))
	if p.det != nil {
		p.det.SetLimit(d)
	}
	if p.q != nil {
		p.q.SetTimeout(d)
	}
	return nil
}

// Queue returns the timed queue, or nil without one.
func (p *Pipeline) Queue() *queue.Queue { return p.q }
