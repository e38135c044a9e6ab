package admit

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sluice-go/sluice/queue"
)

// Defaults for the zero values of Config.
const (
	// DefaultMaxAge is the longest a request may wait, from its arrival to
	// its start, before it is rejected unstarted: 100 ms, the timed queue's
	// timeout (see docs/background.md for why one fixed value).
	DefaultMaxAge = queue.DefaultTimeout
	// DefaultTarget is the age limit while the waiting line is standing:
	// 5 ms, CoDel's target.
	DefaultTarget = queue.DefaultTarget
	// DefaultInterval is how long every request must have waited at least
	// Target for the line to count as standing: 100 ms, CoDel's interval.
	DefaultInterval = queue.DefaultInterval
	// DefaultStatus is the status of a rejection for an overload.
	DefaultStatus = http.StatusServiceUnavailable
	// DefaultRetryAfter is the Retry-After of a rejection.
	DefaultRetryAfter = time.Second
)

// Config configures a Pipeline. The zero value protects a sluice server by
// the age of its requests alone: one that waited 100 ms from its arrival in
// the kernel (its head complete) is rejected unstarted, and once requests
// have kept reaching that limit for 10 ms (an overload's line, standing in
// the sockets), 5 ms is the limit until the line is gone (longer for a
// handler so slow that two requests per worker take more to start).
type Config struct {
	// Policies are asked first, in order, once per request: the first that
	// refuses rejects the request at once (a quota, a tenant's share,
	// shedding by latency or errors). Waiting would not change their
	// answer, so their refusals never queue.
	Policies []Policy
	// Gates say whether the server has room now: they are asked, in
	// order, after the Policies and again each time the queue tries to
	// start a waiting request. The first that refuses makes the request
	// wait in the queue, or, without one, rejects it. Package gate has
	// them: busy workers, concurrency limits, memory, CPU.
	Gates []Policy
	// Queue, if set, makes requests that a gate refuses wait, up to
	// MaxAge from their arrival, and start as soon as the gates admit
	// them. It needs at least one gate.
	Queue *QueueConfig

	// MaxAge is the longest a request may wait, counted from its arrival,
	// before it starts: in the kernel's socket buffers (the sluice server
	// reads the kernel's receive stamp of the request's first bytes) and
	// in the queue together. An older request is rejected unstarted, with
	// the reason "queue-timeout". Zero means DefaultMaxAge; negative means
	// no limit, which a queue does not allow.
	MaxAge time.Duration
	// Target and Interval set the standing state, CoDel's rule with the
	// age limit (queue.Detector, SetLimit): once requests at MaxAge have
	// kept coming for Interval / 10, every request between them at least
	// Target old (or, within Interval of the state's last end, once every
	// request has been at least Target old for Interval), Target is the
	// age limit (and the queue, in CoDel order, gives newcomers Target and
	// serves the newest first), until the requests have been younger than
	// Target for Interval / 10, or none has come for Interval. While the
	// line stands, the limit is longer than Target when the server takes
	// longer than Target to start two requests per worker (per shard) at
	// the rate it admits them, up to MaxAge / 2: with a slow handler, a
	// limit of one start leaves a worker idle whenever no request came
	// during the last one it ran. A line that stands below MaxAge is
	// served. Target is dropped, MaxAge the limit
	// again, for the rest of a standing period in which it refused more
	// than FutileRatio requests per admission over a window, and while the
	// latest requests to reach MaxAge are those of a closed loop
	// (ResendsSeen), or, too few yet to tell, all look so: clients that
	// send again at once, whose line refusing does not shorten.
	// Zero means DefaultTarget and DefaultInterval; a negative Target
	// turns the standing state off.
	Target, Interval time.Duration
	// LoopGrace is how long past MaxAge the requests of a closed loop may
	// still start: clients that each send their next request the moment
	// their last is answered (wrk, hey, a fleet of callers each waiting for
	// its answer), whose line cannot grow, since it holds at most one
	// request per client. Refusing the back of such a line shortens
	// nothing, as its clients send again at once; a loop a little longer
	// than MaxAge is served whole instead. It applies to a request sent at
	// once after its connection's previous answer (Ticket.AtOnce) while
	// the requests that reached MaxAge lately were mostly sent so too, and
	// the server refused for their age at most half as many as it admitted
	// (docs/design.md, "A loop a little longer than the limit"). It
	// applies to the wait in the sockets, not in the queue. Zero means
	// MaxAge / 2; negative means none.
	LoopGrace time.Duration

	// Rejection configures the answer to refused requests.
	Rejection Rejection

	// Deadline configures how the time left by the request's caller
	// (TimeoutHeader) is honoured; the zero value honours it.
	Deadline DeadlineConfig
}

// QueueConfig configures the timed queue of a pipeline. Its timeout is
// Config.MaxAge, counted from each request's arrival, and its standing
// state is the pipeline's.
type QueueConfig struct {
	// Order is the order within a class: queue.FIFO (the default),
	// queue.LIFO, or queue.CoDel (newest first and the short timeout while
	// the line is standing).
	Order queue.Order
	// MaxLen bounds the number of waiting requests; zero means
	// queue.DefaultMaxLen.
	MaxLen int
	// Classify gives a request its priority class; nil means
	// queue.Default for all. ClassFromHeader reads a header field. A
	// request that a ShareKeeper says is beyond its share waits in the
	// least important class whatever Classify says.
	Classify func(a *Attempt) queue.Class
}

// ClassFromHeader returns a Classify function that reads the class from
// the header field name ("critical", "default", "sheddable"; see
// queue.ClassFromHeader). Clients can claim any class with it: use it only
// behind a proxy of your own that controls the field.
func ClassFromHeader(name string) func(a *Attempt) queue.Class {
	return func(a *Attempt) queue.Class { return queue.ClassFromHeader(a.Header, name) }
}

// ClassByLane returns a Classify function that gives the requests of each
// lane named in classes (Attempt.Lane) its class, and def to the others:
// give a lane that a gate limits a class below the others, so that its
// requests waiting for that gate are not at the head of the queue before
// requests the gate does not hold back.
func ClassByLane(classes map[string]queue.Class, def queue.Class) func(a *Attempt) queue.Class {
	m := make(map[string]queue.Class, len(classes))
	for k, v := range classes {
		m[k] = v
	}
	return func(a *Attempt) queue.Class {
		if a.Lane == "" {
			return def
		}
		if c, ok := m[a.Lane]; ok {
			return c
		}
		return def
	}
}

// Rejection configures the answer to refused requests. The zero value
// answers 503 Service Unavailable (429 Too Many Requests for a quota's
// refusal) with Retry-After: 1, Sluice-Not-Started: 1, Sluice-Reject-Reason
// and a one-line text body, on a connection that stays open.
type Rejection struct {
	// Status is the status of refusals that do not set their own; zero
	// means DefaultStatus. It must be a 4xx or 5xx code.
	Status int
	// RetryAfter is sent as Retry-After, rounded up to whole seconds, by
	// refusals that do not set their own; zero means DefaultRetryAfter,
	// negative means no Retry-After field.
	RetryAfter time.Duration
	// Header holds extra fields for every rejection.
	Header http.Header
	// OnReject, if set, is called for each rejection, with the request and
	// the reason, on the goroutine that decided it (a worker, a request's
	// goroutine, the queue's timer), before the answer is written. It must
	// not block.
	OnReject func(a *Attempt, reason string)
}

// settings is a Config with its defaults applied and checked.
type settings struct {
	Config
	maxAge, target, interval time.Duration
	status                   int
	retryAfter               time.Duration
}

func (cfg Config) settle() (settings, error) {
	s := settings{Config: cfg, maxAge: cfg.MaxAge, target: cfg.Target, interval: cfg.Interval}
	if s.maxAge == 0 {
		s.maxAge = DefaultMaxAge
	}
	if s.target == 0 {
		s.target = DefaultTarget
	}
	if s.interval <= 0 {
		s.interval = DefaultInterval
	}
	if s.maxAge > 0 && s.target > s.maxAge {
		s.target = s.maxAge
	}
	s.status = cfg.Rejection.Status
	if s.status == 0 {
		s.status = DefaultStatus
	}
	s.retryAfter = cfg.Rejection.RetryAfter
	if s.retryAfter == 0 {
		s.retryAfter = DefaultRetryAfter
	}
	var errs []error
	for i, p := range cfg.Policies {
		if p == nil {
			errs = append(errs, fmt.Errorf("Config.Policies[%d] is nil", i))
		}
	}
	for i, g := range cfg.Gates {
		if g == nil {
			errs = append(errs, fmt.Errorf("Config.Gates[%d] is nil", i))
		}
	}
	if cfg.Queue != nil {
		if len(cfg.Gates) == 0 {
			errs = append(errs, errors.New("a queue needs a gate that can refuse: nothing would ever wait in it; add one to Config.Gates (gate.NewBusy, gate.NewConcurrency, ...) or drop Config.Queue"))
		}
		if cfg.MaxAge < 0 {
			errs = append(errs, fmt.Errorf("a queue needs a wait limit, and Config.MaxAge is %v (none): leave it zero for %v, or set it", cfg.MaxAge, DefaultMaxAge))
		}
		if cfg.Queue.MaxLen < 0 {
			errs = append(errs, fmt.Errorf("QueueConfig.MaxLen is %d: it must not be negative (zero means %d)", cfg.Queue.MaxLen, queue.DefaultMaxLen))
		}
		if cfg.Queue.Order == queue.CoDel && s.target < 0 {
			errs = append(errs, errors.New("QueueConfig.Order is queue.CoDel, which acts on the standing state, and Config.Target is negative (off): drop one"))
		}
		if cfg.Queue.Order > queue.CoDel {
			errs = append(errs, fmt.Errorf("QueueConfig.Order %v is not an order: use queue.FIFO, queue.LIFO or queue.CoDel", cfg.Queue.Order))
		}
	}
	if s.status < 400 || s.status > 599 {
		errs = append(errs, fmt.Errorf("Rejection.Status %d is not an error status: use a 4xx or 5xx code (zero means %d)", s.status, DefaultStatus))
	}
	if err := errors.Join(errs...); err != nil {
		return s, fmt.Errorf("admit: %w", err)
	}
	return s, nil
}
