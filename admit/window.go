package admit

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/reject"
)

// The window is a measure the pipeline takes lazily, when a refusal or an
// adapter asks: the rate of admissions over the last 50 ms or more, which
// sizes a closed loop the server can serve (Servable), and the refusals the
// standing line's lower limit made in that time, which tell whether
// refusing shortens the line at all (futile).
const (
	// windowMin is the shortest window, windowStale the longest: a window
	// longer than that (a server idle, then busy) tells nothing of now,
	// so the measure starts again and knows no rate meanwhile.
	windowMin   = 50 * time.Millisecond
	windowStale = time.Second
	// FutileRatio is how many refusals under the standing line's lower
	// limit (Target) per admission, over FutileWindows windows in a row,
	// most of them of requests resent at once (Ticket.Resent), make that
	// limit futile for the rest of the standing period. Clients that
	// resend the moment they are refused (a closed loop: wrk, a retry loop
	// without backoff) put every refused request back in the line at
	// once, so the line does not shorten; they were refused 15 to 48 times
	// per admission in the runs of docs/design.md ("Clients that resend at
	// once"), each refusal costing CPU that serves nobody. An open-loop
	// overload of x times capacity refuses about x-1 per admission on
	// average, but over 50 ms windows at 10x that ranged from 12 to 54:
	// the ratio alone cannot tell them apart, the resends can. Past 8
	// times FutileRatio the resends do not matter: refusing that much
	// and admitting next to nothing (2,048 wrk connections admitted none
	// in most windows, their resends slowed past ResendWindow by wrk's
	// own load) serves nobody, whoever sends. The limit then stays MaxAge
	// until the line stops standing.
	FutileRatio = 12
	// ResendWindow is how soon after a refusal a request on the same
	// connection counts as resent at once (Ticket.Resent): wrk's resends
	// came within it nine times in ten, the benchmark generator's pooled
	// connections brought a new request that soon one time in five.
	ResendWindow = time.Millisecond
	// FutileWindows is how many windows in a row, each of at least 50 ms
	// and spent whole in one standing period, must be over FutileRatio:
	// the line that an open-loop overload built up before the state
	// began is refused in its first windows, which can look futile (44
	// refusals per admission in the second window of an overload at 10x).
	FutileWindows = 2
)

// window is the measure's state: the counts at the start of the current
// window and what the last one found.
type window struct {
	mu       sync.Mutex   // held by the caller that closes a window
	at       atomic.Int64 // the current window's start, on the pipeline's clock; 0: none yet (read before the lock)
	admitted int64        // admissions when it started
	lowered  int64        // refusals under the lowered limit when it started
	resent   int64        // those of them resent at once (Ticket.Resent)
	episode  uint64       // the standing episode when it started, +1; 0: not standing
	over     int          // windows in a row of this standing period over FutileRatio
	rate     atomic.Int64
	// futile is 1 + the standing episode (queue.Detector.Episode) in which
	// the lowered limit was found futile; 0: none.
	futile atomic.Uint64
}

// measure closes the current window if it is due.
func (p *Pipeline) measure(now int64) {
	w := &p.window
	if at := w.at.Load(); at != 0 && now-at < int64(windowMin) || !w.mu.TryLock() {
		return
	}
	defer w.mu.Unlock()
	var admitted, lowered, resent int64
	for i := range p.shards {
		admitted += p.shards[i].admitted.Load()
		lowered += p.shards[i].lowered.Load()
		resent += p.shards[i].resent.Load()
	}
	var episode uint64
	if p.det != nil && p.det.Standing(now) {
		episode = p.det.Episode() + 1
	}
	at := w.at.Load()
	gap := now - at
	switch {
	case at == 0 || gap > int64(windowStale):
		w.rate.Store(-1)
	case gap >= int64(windowMin):
		da, dl, dr := admitted-w.admitted, lowered-w.lowered, resent-w.resent
		w.rate.Store(da * int64(time.Second) / gap)
		// Only windows spent whole in one standing period, and
		// FutileWindows of them in a row: the first ones of an
		// overload also refuse the line that built up before the
		// state was entered, however it arrived.
		switch {
		case episode == 0 || episode != w.episode:
			w.over = 0
		case dl > FutileRatio*max(da, 1) && (2*dr > dl || dl > 8*FutileRatio*max(da, 1)):
			if w.over++; w.over >= FutileWindows {
				w.futile.Store(episode)
			}
		default:
			w.over = 0
		}
	default:
		return // another caller closed it meanwhile
	}
	w.at.Store(now)
	w.admitted, w.lowered, w.resent, w.episode = admitted, lowered, resent, episode
}

// lowered reports whether the standing line's lower limit (Target) applies
// at now: the line stands, and refusing has not been found futile in this
// standing period.
func (p *Pipeline) lowered(now int64) bool {
	return p.det != nil && p.det.Standing(now) && !p.futileEpisode()
}

// futile reports whether the line stands and the lower limit has been
// found futile in this standing period: clients that resend at once.
func (p *Pipeline) futile(now int64) bool {
	return p.det != nil && p.det.Standing(now) && p.futileEpisode()
}

// futileEpisode reports whether the lower limit was found futile in the
// detector's current (or last) standing period; the caller knows the line
// stands.
func (p *Pipeline) futileEpisode() bool {
	return p.window.futile.Load() == p.det.Episode()+1
}

// standingStarts is how many requests each shard must be able to start
// within the standing line's age limit: the limit is at least the time the
// server takes to start that many per shard at the rate it admits them.
const standingStarts = 2

// lowLimit is the age limit while the line stands, in nanoseconds:
// Config.Target, or, when it is longer, the time the server takes to start
// standingStarts requests per shard at the rate it last admitted them (a
// slow handler's: with 5 ms of CPU a request on one worker, about 10 ms),
// but no more than half of MaxAge. A limit shorter than two starts leaves
// a worker without a request young enough whenever none arrived during the
// last one it ran: with Poisson arrivals at twice its capacity and a limit
// of one start, one time in seven (e^-2), and the worker idles while the
// line is refused (docs/design.md, "The standing limit covers two
// starts").
func (p *Pipeline) lowLimit() int64 {
	target := int64(p.det.Target())
	rate := p.window.rate.Load()
	if rate <= 0 {
		return target
	}
	starts := standingStarts * int64(len(p.shards)) * int64(time.Second) / rate
	return max(target, min(starts, p.maxAge.Load()/2))
}

// Servable returns how many clients that each resend at once (a closed
// loop) the server can keep in its line with their requests starting within
// half of Config.MaxAge (DefaultMaxAge without an age limit): the rate at
// which it admitted requests over the last 50 ms or more, times that time,
// and at least one per shard. It answers math.MaxInt until a
// window has been measured, and again after a second without a refusal or
// a call.
func (p *Pipeline) Servable() int {
	p.measure(p.clock())
	rate := p.window.rate.Load()
	if rate < 0 {
		return math.MaxInt
	}
	horizon := time.Duration(p.maxAge.Load())
	if horizon <= 0 {
		horizon = DefaultMaxAge
	}
	return int(max(rate*int64(horizon)/int64(2*time.Second), int64(len(p.shards))))
}

// Hold returns how long the adapter should leave a client unread after
// answering its rejected ticket t, when clients others are being read:
// Rejection.RetryAfter (DefaultRetryAfter; none when the answers carry no
// Retry-After) when
//   - t was refused because its request had waited Config.MaxAge or more,
//     in the sockets or in the queue: the server's own limit, not the
//     standing line's lower one;
//   - the line stands and its lower limit was found futile (FutileRatio):
//     the clients resend at once;
//   - t's own client resent it at once (Ticket.Resent): a pool that
//     carries new requests on its connections, and seldom that soon, is
//     not held for the clients that do;
//   - clients exceeds Servable;
//
// and 0 otherwise. A client that resends the moment it is refused then
// waits in its socket, at no cost to the server, as one that honours
// Retry-After would have; the clients within Servable are served as a
// closed loop whose line stays under the limit. The fast refusals of an
// open-loop overload (under the lower limit, or by gates and policies)
// are never held: an open-loop client, or a pool of connections carrying
// many clients' requests, retries them elsewhere. The sluice server parks
// the connection (server.Config.HoldRefused).
func (p *Pipeline) Hold(t *Ticket, clients int) time.Duration {
	if t.answer == nil || t.answer.Reason != reject.QueueTimeout || !t.known || !t.Resent {
		return 0
	}
	now := p.clock()
	limit := p.maxAge.Load()
	if limit <= 0 || p.answers.retry <= 0 || now-t.arrived < limit || !p.futile(now) || clients <= p.Servable() {
		return 0
	}
	return p.answers.retry
}
