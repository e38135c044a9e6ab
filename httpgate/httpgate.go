package httpgate

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/queue"
	"github.com/sluice-go/sluice/reject"
)

// Options configures an Admission.
type Options struct {
	// Gate decides whether a request may start now. Nil admits every
	// request (the middleware then only counts).
	Gate gate.Gate

	// Queue, if set, is the configuration of the timed queue in which
	// refused requests wait; nil rejects them at once. The middleware
	// creates the queue and sets its Arm, which must be nil, as must Admit
	// (New panics otherwise). See the package documentation.
	Queue *queue.Options

	// Classify returns a request's priority class in the queue. Nil means
	// the class named by the ClassHeader field of the request (see
	// queue.ClassFromHeader) if ClassHeader is set, else queue.Default. It
	// is called only for requests that wait.
	Classify func(*http.Request) queue.Class
	// ClassHeader names the header field whose value ("critical",
	// "default", "sheddable") is the class, when Classify is nil. Clients
	// can claim any class with it: set it only behind a proxy of your own
	// that controls the field.
	ClassHeader string

	// Rejection configures the answer to refused requests.
	Rejection Rejection
}

// Rejection configures the answer to requests refused before they started.
// The zero value answers as the sluice server does: 503 Service
// Unavailable, Retry-After: 1, Sluice-Not-Started: 1, Sluice-Reject-Reason
// and a one-line text body.
type Rejection struct {
	// Status is the status code; zero means 503.
	Status int
	// RetryAfter is sent as Retry-After, rounded up to whole seconds; zero
	// means 1 s, negative means no Retry-After field.
	RetryAfter time.Duration
	// Header holds extra fields for every rejection.
	Header http.Header
	// OnReject, if set, is called for each rejection, before the answer is
	// written, with the request and the reason. It runs on the request's
	// goroutine.
	OnReject func(r *http.Request, reason string)
}

// Stats are an Admission's counters since New.
type Stats struct {
	// InFlight is the number of admitted requests whose handlers run.
	InFlight int64
	// Admitted counts requests served, at once or after waiting.
	Admitted int64
	// Queued counts requests that entered the queue (whatever became of
	// them).
	Queued int64
	// Rejected counts requests answered with the rejection; RejectedBy
	// counts them by reason.
	Rejected   int64
	RejectedBy map[string]int64
	// GateClosed is the total time the gate has been closed, as the
	// middleware saw it: from a refusal to the next admission.
	GateClosed time.Duration
	// Queue is the queue's own counters (zero without a queue).
	Queue queue.Stats
}

// Reasons of rejections by the queue (the gates' reasons are their names).
const (
	ReasonQueueTimeout  = reject.QueueTimeout
	ReasonQueueFull     = reject.QueueFull
	ReasonQueueEvicted  = reject.QueueEvicted
	ReasonQueueClosed   = reject.QueueClosed
	ReasonQueueCanceled = "queue-canceled" // the client's context ended while it waited
)

// queueReasons maps queue.Reason values to rejection reasons.
var queueReasons = [...]string{
	queue.Timeout: ReasonQueueTimeout,
	queue.Full:    ReasonQueueFull,
	queue.Evicted: ReasonQueueEvicted,
	queue.Closed:  ReasonQueueClosed,
}

func queueReason(r queue.Reason) string {
	if int(r) < len(queueReasons) {
		return queueReasons[r]
	}
	return "queue-" + r.String()
}

// chooser is a gate made of others that names the member that refused
// (gate.Chain).
type chooser interface {
	Admit() (refused gate.Gate, ok bool)
}

// Admission is the admission middleware: Wrap puts it in front of a
// handler. It is safe for concurrent use; one Admission may wrap several
// handlers, which then share its gate, queue and counters.
type Admission struct {
	gate    gate.Gate
	chooser chooser
	name    string
	idle    func() bool // the gate's AcquireIdle, or Acquire
	timed   bool        // the gate may learn from latencies: measure them
	closed  gate.ClosedTime

	q     *queue.Queue
	timer *time.Timer
	once  sync.Once

	classify func(*http.Request) queue.Class

	// The counters, written by every request, on cache lines of their own
	// so that the fields above, read by every request, stay shared.
	_        [64]byte
	inFlight atomic.Int64
	admitted atomic.Int64
	queued   atomic.Int64
	_        [64]byte
	rej      rejecter
}

// New returns an Admission configured by opts. With a queue, and a gate
// that implements gate.Waker, it registers a callback with the gate for
// good (Waker has no way to remove one): an Admission that is dropped
// stays reachable from its gate. It panics if opts.Queue sets Arm or Admit.
func New(opts Options) *Admission {
	a := &Admission{gate: opts.Gate, classify: opts.Classify}
	a.rej.init(&opts.Rejection)
	if a.classify == nil {
		if h := opts.ClassHeader; h != "" {
			a.classify = func(r *http.Request) queue.Class { return queue.ClassFromHeader(r.Header, h) }
		} else {
			a.classify = func(*http.Request) queue.Class { return queue.Default }
		}
	}
	if g := a.gate; g != nil {
		a.name = g.Name()
		a.timed = learns(g)
		if c, ok := g.(chooser); ok {
			a.chooser = c
		}
		if ia, ok := g.(gate.IdleAcquirer); ok {
			a.idle = ia.AcquireIdle
		} else {
			a.idle = g.Acquire
		}
	}
	if opts.Queue != nil {
		qo := *opts.Queue
		if qo.Arm != nil || qo.Admit != nil {
			panic("httpgate: Options.Queue must not set Arm or Admit: the middleware sets them")
		}
		a.timer = time.AfterFunc(time.Hour, a.expire)
		a.timer.Stop()
		qo.Arm = a.arm
		a.q = queue.New(qo)
		if w, ok := a.gate.(gate.Waker); ok {
			w.OnOpen(a.wake)
		}
	}
	return a
}

// Middleware returns New(opts).Wrap: the middleware without access to its
// counters and Close.
func Middleware(opts Options) func(http.Handler) http.Handler {
	return New(opts).Wrap
}

// Wrap returns next behind the admission control.
func (a *Admission) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.serve(w, r, next)
	})
}

// Queue returns the queue, or nil without one.
func (a *Admission) Queue() *queue.Queue { return a.q }

// Close closes the queue: waiting requests and later refusals are rejected
// with "queue-closed". It stops the expiry timer. Requests the gate admits
// are still served. Close may be called more than once; without a queue it
// does nothing.
func (a *Admission) Close() {
	if a.q == nil {
		return
	}
	a.once.Do(func() {
		a.q.Close()
		a.timer.Stop()
	})
}

// Stats returns the counters. Each is read atomically; together they are
// not one snapshot while requests run.
func (a *Admission) Stats() Stats {
	st := Stats{
		InFlight: a.inFlight.Load(),
		Admitted: a.admitted.Load(),
		Queued:   a.queued.Load(),
	}
	st.Rejected, st.RejectedBy = a.rej.stats()
	st.GateClosed = a.closed.Total(nanos)
	if a.q != nil {
		st.Queue = a.q.Stats()
	}
	return st
}

func (a *Admission) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if a.gate == nil {
		a.run(w, r, next)
		return
	}
	if a.q == nil || a.q.Len() == 0 {
		reason, ok := a.acquire()
		if ok {
			a.run(w, r, next)
			return
		}
		if a.q == nil {
			a.rej.reject(w, r, reason)
			return
		}
	}
	a.queued.Add(1)
	switch reason, ok := a.wait(r); {
	case !ok:
		a.rej.reject(w, r, reason)
	case r.Context().Err() != nil:
		// Started as its client went away: give the admission back
		// without teaching the gate anything, and pass the place on.
		a.gate.Release(gate.Undo)
		a.pumpOne()
		a.rej.reject(w, r, ReasonQueueCanceled)
	default:
		a.closed.Admitted(nanos)
		a.run(w, r, next)
	}
}

// acquire asks the gate, for the request's own goroutine, and names the gate
// that refused.
func (a *Admission) acquire() (reason string, ok bool) {
	if a.chooser != nil {
		if g, ok := a.chooser.Admit(); !ok {
			reason = g.Name()
		}
	} else if !a.gate.Acquire() {
		reason = a.name
	}
	if reason != "" {
		a.closed.Refused(nanos)
		return reason, false
	}
	a.closed.Admitted(nanos)
	return "", true
}

// run serves an admitted request.
func (a *Admission) run(w http.ResponseWriter, r *http.Request, next http.Handler) {
	a.inFlight.Add(1)
	a.admitted.Add(1)
	if a.gate == nil {
		defer a.inFlight.Add(-1)
		next.ServeHTTP(w, r)
		return
	}
	if !a.timed {
		defer a.done(0)
		next.ServeHTTP(w, r)
		return
	}
	defer a.done(monotonic())
	next.ServeHTTP(w, r)
}

// done ends an admitted request that started at start (also when its
// handler panics): the gate is released with the handler's duration, or 0
// for a gate that ignores it, and the request's place goes to the queue's
// head.
func (a *Admission) done(start time.Duration) {
	a.inFlight.Add(-1)
	var latency time.Duration
	if a.timed {
		latency = max(monotonic()-start, 1) // never 0 nor Undo
	}
	a.gate.Release(latency)
	a.pumpOne()
}

// learns reports whether g may use the latencies given to Release: false
// for the gates of package gate known to ignore them (and chains of only
// those), whose requests are then not timed (two clock reads saved), true
// for the others (Adaptive, and gates from elsewhere).
func learns(g gate.Gate) bool {
	switch g := g.(type) {
	case *gate.Concurrency, *gate.GoSched, *gate.Memory, *gate.CPU, *gate.Busy:
		return false
	case *gate.Chain:
		for _, m := range g.Gates() {
			if learns(m) {
				return true
			}
		}
		return false
	}
	return true
}

var epoch = time.Now()

// monotonic reads the monotonic clock only (time.Now reads the wall clock
// too).
func monotonic() time.Duration { return time.Since(epoch) }

// nanos is monotonic in nanoseconds, the clock of the gate-closed time.
func nanos() int64 { return int64(monotonic()) }

// pumpOne starts the queue's head if the gate admits it, asked with
// Acquire: the caller's goroutine, which a GoSched reading may count, is
// about to stop running (its request ended, or it is about to park in the
// queue), so its place is what the head takes. At most one request starts:
// one goroutine leaving frees one place. Gates that open by more call
// OnOpen (see wake).
func (a *Admission) pumpOne() {
	if a.q == nil || a.q.Len() == 0 {
		return
	}
	done := false
	a.q.Pump(func() bool {
		if done {
			return false
		}
		_, done = a.acquire()
		return done
	})
}

// wake is the gate's OnOpen callback: start as many waiting requests as the
// gate admits, asked with AcquireIdle (the caller is not the goroutine that
// will run them).
func (a *Admission) wake() {
	if a.q.Len() > 0 {
		a.q.Pump(a.idle)
	}
}

// arm is the queue's Arm: keep the timer set to the earliest deadline. It
// runs with the queue's lock held.
func (a *Admission) arm(deadline int64) {
	a.timer.Reset(time.Duration(deadline - a.q.Now()))
}

// expire runs on the timer's goroutine at the earliest deadline. Expire
// rearms the timer through arm while requests still wait.
func (a *Admission) expire() { a.q.Expire() }
