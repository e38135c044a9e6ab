package admit

import (
	"math"
	"math/bits"
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
	aged     int64        // refusals at MaxAge when it started
	episode  uint64       // the standing episode when it started, +1; 0: not standing
	over     int          // windows in a row of this standing period over FutileRatio
	rate     atomic.Int64
	// fewAged is whether the last window refused for their age (at MaxAge
	// or under the lower limit) at most half as many requests as it
	// admitted, and admitted some.
	fewAged atomic.Bool
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
	var admitted, lowered, resent, aged int64
	for i := range p.shards {
		admitted += p.shards[i].admitted.Load()
		lowered += p.shards[i].lowered.Load()
		resent += p.shards[i].resent.Load()
		aged += p.shards[i].aged.Load()
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
		w.fewAged.Store(false)
	case gap >= int64(windowMin):
		da, dl, dr := admitted-w.admitted, lowered-w.lowered, resent-w.resent
		w.rate.Store(da * int64(time.Second) / gap)
		w.fewAged.Store(da > 0 && 2*(aged-w.aged+dl) <= da)
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
	w.admitted, w.lowered, w.resent, w.aged, w.episode = admitted, lowered, resent, aged, episode
}

// lowered reports whether the standing line's lower limit (Target) applies
// at now: the line stands, and its lower limit is not futile (lowerable).
func (p *Pipeline) lowered(now int64) bool {
	return p.det != nil && p.det.Standing(now) && p.lowerable(now)
}

// lowerable reports whether the lower limit of the standing line, which
// the caller knows stands, applies:
//   - refusing has not been found futile in this standing period by the
//     windows (FutileRatio);
//   - the requests that reached MaxAge do not show a closed loop now
//     (resendsPastTheLimit): its line refusing does not shorten, so the
//     lower limit is off from the standing period's first request, without
//     the refusals it would have made before the windows found it futile
//     (about 1,300 in 200 ms, with 64 connections to a 2 ms handler). This
//     finding, unlike the windows', holds only while it is true: an
//     open-loop overload whose pool carries its requests at once, started
//     late at its onset while the record could not tell, looks like a loop
//     until its refusals past the grace outnumber half its admissions, and
//     then gets its lower limit (kept off for the standing period, the
//     soak's overload at 5x ran its line at 150 ms);
//   - nor do they look like one so far: every one sent at once, too few yet
//     to tell, while the server refuses few (fewRefused). A loop's line
//     stands 10 ms after it first reached the limit, when it has brought
//     five such requests with a 2 ms handler.
func (p *Pipeline) lowerable(now int64) bool {
	if p.futileEpisode() || p.resendsPastTheLimit(now) {
		return false
	}
	return p.pastLimit.says(now) != loopSoFar || !p.fewRefused(now)
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

// The requests that reach MaxAge tell whether the line is a closed loop's,
// before the standing line's lower limit has refused anything. A closed
// loop of a few more clients than the server starts within MaxAge (64
// connections of wrk to a 2 ms handler on one worker: a line of about
// 110 ms) has the back of its line reach MaxAge, a few clients each time
// round, and every one of them sent its request the moment its last was
// answered (Ticket.AtOnce), and there are far fewer of them than
// admissions. An open-loop overload brings past MaxAge as many requests as
// it brings beyond what the server completes, at least as many as it
// admits at 2x and more; a pool of connections that reuses the one it got
// back last carries a new request on an answered connection within
// ResendWindow more and more often as the rate grows (one time in four or
// five in the benchmark's generator), so no single request can tell it
// from a closed loop: the record of the latest can.
const (
	// ResendsSeen is how many of the latest requests that reached MaxAge,
	// none a second after the one before, the record must hold before it
	// tells anything: a closed loop brings the few clients past MaxAge
	// together, once each time round.
	ResendsSeen = 8
	// resendsKept is how many the record keeps; more than three in four
	// of those it holds must have been sent at once.
	resendsKept = 16
)

// resends records the latest requests that reached MaxAge: whether each
// was sent at once after its connection's previous answer, and when the
// latest was recorded.
type resends struct {
	// bits holds the AtOnce bit of each of the latest, the newest lowest,
	// in its low resendsKept bits, and how many it holds above them.
	bits atomic.Uint64
	at   atomic.Int64 // the latest's time, on the pipeline's clock
}

// record adds a request that reached MaxAge at now, sent at once or not;
// after a second without one (windowStale), the record starts afresh.
func (r *resends) record(now int64, atOnce bool) {
	fresh := now-r.at.Swap(now) > int64(windowStale)
	for {
		old := r.bits.Load()
		kept, n := old&(1<<resendsKept-1), old>>resendsKept
		if fresh {
			kept, n = 0, 0
		}
		kept = kept << 1 & (1<<resendsKept - 1)
		if atOnce {
			kept |= 1
		}
		n = min(n+1, resendsKept)
		if r.bits.CompareAndSwap(old, kept|n<<resendsKept) {
			return
		}
	}
}

// A reading of the record.
const (
	loopUnknown = iota // empty, or none for a second
	loopSoFar          // fewer than ResendsSeen, every one sent at once
	loopMixed          // fewer than ResendsSeen, some not sent at once
	loopYes            // at least ResendsSeen, more than three in four sent at once
	loopNo             // at least ResendsSeen, fewer sent at once
)

// says reads the record at now.
func (r *resends) says(now int64) int {
	if now-r.at.Load() > int64(windowStale) {
		return loopUnknown
	}
	v := r.bits.Load()
	n, once := int(v>>resendsKept), bits.OnesCount64(v&(1<<resendsKept-1))
	switch {
	case n == 0:
		return loopUnknown
	case n < ResendsSeen && once == n:
		return loopSoFar
	case n < ResendsSeen:
		return loopMixed
	case 4*once > 3*n:
		return loopYes
	}
	return loopNo
}

// resendsPastTheLimit reports whether the latest requests to reach MaxAge
// were those of a closed loop a little longer than the limit: they were
// mostly sent at once (ResendsSeen), and over the last window (of 50 ms or
// more) the refusals for age, at MaxAge and under the lower limit, were at
// most half as many as the admissions. (While an overload's line stands,
// the lower limit refuses more than the server admits, and the few
// requests that reach MaxAge then, after a stall, are no sign of a closed
// loop: a pool that reuses its connections at thousands a second carries a
// new request on them at once.)
func (p *Pipeline) resendsPastTheLimit(now int64) bool {
	if p.pastLimit.says(now) != loopYes {
		return false
	}
	p.measure(now)
	return p.window.fewAged.Load()
}

// startsLate records t, which has waited age, at least MaxAge (limit), and
// reports whether it may start all the same, as a closed loop's
// (Config.LoopGrace): it came on a kept-alive connection after the answer
// to the one before, it has waited less than limit and the grace, and the
// line looks like a closed loop's: the record of the requests that
// reached MaxAge says so, or cannot tell yet (too few, or none for a
// second) and t was sent at once after that answer (AtOnce, Resent); and
// over the last window the server refused for their age at most half as
// many as it admitted, or no window is measured yet. The record holds only
// requests sent after a served answer: how soon a client sends again after
// a refusal is its own retry policy, not a sign of a loop. A loop a little
// longer than the limit is then served whole: its first requests past the
// limit start, as the rest do once the record tells. An open-loop overload's onset may start a few such
// requests late, those that a pool carried at once, until the record
// holds enough to tell, and none once its refusals outnumber half its
// admissions.
func (p *Pipeline) startsLate(t *Ticket, now, age, limit int64) bool {
	if t.Prior == PriorAnswer {
		p.pastLimit.record(now, t.AtOnce())
	}
	if t.Prior == PriorNone || age >= limit+p.grace(limit) {
		return false
	}
	switch p.pastLimit.says(now) {
	case loopNo:
		return false
	case loopYes:
	default:
		if !t.AtOnce() && !t.Resent() {
			return false
		}
	}
	return p.fewRefused(now)
}

// fewRefused reports whether, over the last window, the server refused for
// their age at most half as many requests as it admitted, or no window is
// measured yet.
func (p *Pipeline) fewRefused(now int64) bool {
	p.measure(now)
	return p.window.rate.Load() < 0 || p.window.fewAged.Load()
}

// grace is how long past the age limit limit a closed loop's request may
// start (Config.LoopGrace).
func (p *Pipeline) grace(limit int64) int64 {
	switch {
	case p.loopGrace == 0:
		return limit / 2
	case p.loopGrace < 0:
		return 0
	}
	return int64(p.loopGrace)
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
//   - clients exceeds Servable;
//   - the latest requests to reach MaxAge were those of a closed loop
//     (ResendsSeen), whether the line stands or not; or the line stands, its lower limit was found futile
//     (FutileRatio), and t's own client resent it at once (Ticket.Resent):
//     a pool that carries new requests on its connections, and seldom
//     that soon, is not held for the clients that do;
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
	if t.answer == nil || t.answer.Reason != reject.QueueTimeout || !t.known {
		return 0
	}
	now := p.clock()
	limit := p.maxAge.Load()
	if limit <= 0 || p.answers.retry <= 0 || now-t.arrived < limit || clients <= p.Servable() {
		return 0
	}
	if !p.resendsPastTheLimit(now) && !(t.Resent() && p.futile(now)) {
		return 0
	}
	return p.answers.retry
}
