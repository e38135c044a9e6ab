package admit

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// admitN admits and ends n requests at the clock's time.
func admitN(t *testing.T, p *Pipeline, n int) {
	t.Helper()
	for range n {
		r := newReq("/")
		require.Equal(t, Admitted, p.Decide(&r.Ticket))
		p.Done(&r.Ticket, Outcome{Status: 200})
	}
}

// aged decides a request that arrived age ago, and ends it if admitted.
func aged(p *Pipeline, age time.Duration) (*req, Decision) {
	r := newReq("/")
	r.Stamp = time.Now().UnixNano() - int64(age)
	d := p.Decide(&r.Ticket)
	if d == Admitted {
		p.Done(&r.Ticket, Outcome{Status: 200})
	}
	return r, d
}

func TestServable(t *testing.T) {
	clk := newClock(10 * ms)
	p := newPipeline(t, Config{MaxAge: 100 * time.Millisecond}, Host{Clock: clk.now, Shards: 2})

	assert.Equal(t, math.MaxInt, p.Servable(), "nothing measured yet: no bound")
	admitN(t, p, 10)
	clk.add(30 * ms)
	assert.Equal(t, math.MaxInt, p.Servable(), "a window shorter than 50 ms is not closed")
	admitN(t, p, 40)
	clk.add(70 * ms)
	// 50 admitted in 100 ms: 500 a second, 25 within half the limit.
	assert.Equal(t, 25, p.Servable())
	admitN(t, p, 200)
	clk.add(200 * ms)
	assert.Equal(t, 50, p.Servable(), "1,000 a second")

	clk.add(100 * ms)
	assert.Equal(t, 2, p.Servable(), "none admitted: one per shard at least")

	require.NoError(t, p.SetMaxAge(300*time.Millisecond))
	admitN(t, p, 100)
	clk.add(100 * ms)
	assert.Equal(t, 150, p.Servable(), "the limit now configured, 300 ms")

	clk.add(2 * time.Second.Nanoseconds())
	admitN(t, p, 1000)
	assert.Equal(t, math.MaxInt, p.Servable(), "after a silent second the old rate says nothing")
	clk.add(100 * ms)
	assert.Equal(t, 2, p.Servable(), "the window restarted at that call: none admitted since")
}

// Servable counts clients within the configured limit, not within the
// standing line's lower one: parking is for clients beyond MaxAge.
func TestServableCountsTheConfiguredLimitNotTheStandingOne(t *testing.T) {
	clk := newClock(10 * ms)
	p := newPipeline(t, Config{}, Host{Clock: clk.now})
	standUp(p, clk)
	p.Servable()
	for range 100 {
		aged(p, 0)
	}
	require.True(t, p.Stats().Standing)
	require.Equal(t, 5*time.Millisecond, p.Stats().MaxAge)
	clk.add(100 * ms)
	assert.Equal(t, 50, p.Servable(), "half of DefaultMaxAge (100 ms), not of the 5 ms of the standing line, at 1,000 a second")
}

// resent decides a request that arrived age ago, resent at once after a
// refusal.
func resent(p *Pipeline, age time.Duration) (*req, Decision) {
	r := newReq("/")
	r.Stamp = time.Now().UnixNano() - int64(age)
	r.Prior = PriorRefusal
	return r, p.Decide(&r.Ticket)
}

// spin plays a standing line: each 1 ms of d, one request admitted and
// refusedPerAdmission refused, aged 6 ms, resent at once or not.
func spin(p *Pipeline, clk *fakeClock, d time.Duration, refusedPerAdmission int, resent bool) (admitted, refused int) {
	for range int(d / time.Millisecond) {
		clk.add(ms)
		if _, dec := aged(p, time.Millisecond); dec == Admitted {
			admitted++
		}
		for range refusedPerAdmission {
			r := newReq("/")
			r.Stamp = time.Now().UnixNano() - int64(6*time.Millisecond)
			if resent {
				r.Prior = PriorRefusal
			}
			if p.Decide(&r.Ticket) == Rejected {
				refused++
			}
		}
	}
	return admitted, refused
}

// The standing line's lower limit is dropped for the rest of the standing
// period once, over FutileWindows whole windows in a row, it refuses more
// than FutileRatio requests per admission, most of them resent at once:
// clients whose line refusing does not shorten. An open-loop overload
// keeps it, however many it refuses, and so does one window over the
// ratio.
func TestLowerLimitFutileForClientsThatResend(t *testing.T) {
	type phase struct {
		d      time.Duration
		ratio  int
		resent bool
	}
	for _, tc := range []struct {
		name   string
		phases []phase
		futile bool
	}{
		{"open loop at 10x", []phase{{120 * time.Millisecond, 9, false}}, false},
		{"resent, at the ratio", []phase{{120 * time.Millisecond, FutileRatio, true}}, false},
		{"one window over, then an open loop", []phase{{51 * time.Millisecond, 40, true}, {70 * time.Millisecond, 9, false}}, false},
		{"open loop far over the ratio, new requests", []phase{{120 * time.Millisecond, 30, false}}, false},
		{"closed loop resending", []phase{{120 * time.Millisecond, 20, true}}, true},
		{"admitting next to nothing, whoever sends", []phase{{120 * time.Millisecond, 100, false}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock(10 * ms)
			p := newPipeline(t, Config{}, Host{Clock: clk.now})
			// A window begins, then the line stands 10 ms later: that
			// window also refuses the line built before, however it
			// arrived, and judges nothing.
			p.Servable()
			aged(p, 150*time.Millisecond)
			clk.add(10 * ms)
			aged(p, 150*time.Millisecond)
			require.Equal(t, 5*time.Millisecond, p.Stats().MaxAge, "standing")
			episode := p.det.Episode()
			spin(p, clk, 39*time.Millisecond, 30, true)
			require.Equal(t, 5*time.Millisecond, p.Stats().MaxAge, "the window the state began in is not judged")

			var admitted, refused int
			for _, ph := range tc.phases {
				a, r := spin(p, clk, ph.d, ph.ratio, ph.resent)
				admitted, refused = admitted+a, refused+r
			}
			require.NotZero(t, admitted)
			st := p.Stats()
			require.True(t, st.Standing)
			if !tc.futile {
				assert.Equal(t, 5*time.Millisecond, st.MaxAge, "refused %d for %d admitted", refused, admitted)
				return
			}
			assert.Equal(t, DefaultMaxAge, st.MaxAge, "futile: the configured limit again")
			_, d := aged(p, 50*time.Millisecond)
			assert.Equal(t, Admitted, d, "a request of 50 ms starts")

			// It holds for this standing period only.
			clk.add(int64(p.det.Interval()) + ms)
			require.False(t, p.Stats().Standing, "silence ends the line")
			standUp(p, clk)
			require.Greater(t, p.det.Episode(), episode)
			assert.Equal(t, 5*time.Millisecond, p.Stats().MaxAge, "a new standing period lowers the limit again")
		})
	}
}

// futileLine makes p's line stand, then has clients resend at once until
// the lower limit is found futile.
func futileLine(t *testing.T, p *Pipeline, clk *fakeClock) {
	t.Helper()
	standUp(p, clk)
	spin(p, clk, 120*time.Millisecond, 20, true)
	require.True(t, p.Stats().Standing)
	require.Equal(t, time.Duration(p.maxAge.Load()), p.Stats().MaxAge, "futile")
}

// Hold: a request resent at once and refused because it waited the
// configured limit, while the line stands and its lower limit is futile
// (clients resending at once), with more clients than the server serves in
// time, holds its client for Retry-After; nothing else does.
func TestHold(t *testing.T) {
	clk := newClock(10 * ms)
	gate := newSwitch("g", true, &events{})
	p := newPipeline(t, Config{Gates: []Policy{gate}}, Host{Clock: clk.now})
	p.Servable()
	admitN(t, p, 100) // 1,000 a second: two starts take 2 ms, under the 5 ms target
	clk.add(100 * ms)
	late, d := aged(p, 150*time.Millisecond)
	require.Equal(t, Rejected, d)
	assert.Zero(t, p.Hold(&late.Ticket, 1000), "no line standing yet: an overload's onset")

	standUp(p, clk)
	young, d := aged(p, 6*time.Millisecond)
	require.Equal(t, Rejected, d, "refused by the lower limit")
	assert.Zero(t, p.Hold(&young.Ticket, 1000), "the lower limit's fresh refusals are never held")
	late, d = aged(p, 150*time.Millisecond)
	require.Equal(t, Rejected, d)
	assert.Zero(t, p.Hold(&late.Ticket, 1000), "the lower limit works: an open-loop overload, whose stale requests are not held")

	spin(p, clk, 120*time.Millisecond, 20, true)
	require.Equal(t, DefaultMaxAge, p.Stats().MaxAge, "futile")
	fresh, d := aged(p, 150*time.Millisecond)
	require.Equal(t, Rejected, d)
	assert.Zero(t, p.Hold(&fresh.Ticket, 1000), "not resent at once: a pool's new request")
	late, d = resent(p, 150*time.Millisecond)
	require.Equal(t, Rejected, d)
	servable := p.Servable()
	require.Equal(t, 50, servable, "1,000 admitted a second over the last window: 50 in half the limit")
	assert.Equal(t, DefaultRetryAfter, p.Hold(&late.Ticket, servable+1), "late, beyond what the server serves in time")
	assert.Zero(t, p.Hold(&late.Ticket, servable), "late, within what it serves: no hold")

	gate.open.Store(false)
	shut, d := aged(p, 0)
	require.Equal(t, Rejected, d)
	assert.Zero(t, p.Hold(&shut.Ticket, 1000), "a gate's refusal is not held")

	// The configured Retry-After is the hold.
	q := newPipeline(t, Config{Rejection: Rejection{RetryAfter: 3 * time.Second}}, Host{Clock: clk.now})
	futileLine(t, q, clk)
	late, d = resent(q, time.Second)
	require.Equal(t, Rejected, d)
	assert.Equal(t, 3*time.Second, q.Hold(&late.Ticket, 1000))

	// Answers without Retry-After hold nobody.
	n := newPipeline(t, Config{Rejection: Rejection{RetryAfter: -1}}, Host{Clock: clk.now})
	futileLine(t, n, clk)
	late, d = resent(n, time.Second)
	require.Equal(t, Rejected, d)
	assert.Zero(t, n.Hold(&late.Ticket, 1000))
}

// The window is measured from any worker: concurrent refusals under the
// lower limit, and Servable, close windows without a data race (the race
// detector checks it) and lose no count.
func TestWindowConcurrent(t *testing.T) {
	p := newPipeline(t, Config{}, Host{Shards: 4})
	for range 2 {
		r := newReq("/")
		r.Stamp = time.Now().UnixNano() - int64(150*time.Millisecond)
		p.Decide(&r.Ticket)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for range 2000 {
				r := newReq("/")
				r.Shard = g
				r.Stamp = time.Now().UnixNano() - int64(6*time.Millisecond)
				if p.Decide(&r.Ticket) == Admitted {
					p.Done(&r.Ticket, Outcome{})
				}
				_ = p.Servable()
			}
		})
	}
	wg.Wait()
	var lowered int64
	for i := range p.shards {
		lowered += p.shards[i].lowered.Load()
	}
	st := p.Stats()
	assert.Equal(t, st.Rejected-2, lowered, "every refusal after the first two was the lower limit's, and counted once")
}

// While the line stands, its age limit is at least the time the server
// takes to start two requests per shard at the rate it admits them: a
// slow handler's line keeps a request young enough to start whenever one
// ends. Bounded by half of MaxAge; the target when the rate is unknown or
// fast.
func TestStandingLimitCoversTwoStarts(t *testing.T) {
	for _, c := range []struct {
		name     string
		shards   int
		admitted int // in 100 ms while the line stands
		limit    time.Duration
	}{
		{"fast handler: the target", 1, 100, 5 * time.Millisecond},     // 1,000/s: 2 ms
		{"5 ms handler, one worker", 1, 20, 10 * time.Millisecond},     // 200/s: 10 ms
		{"5 ms handler, two workers", 2, 40, 10 * time.Millisecond},    // 400/s, 2 per shard: 10 ms
		{"50 ms handler: half of MaxAge", 1, 2, 50 * time.Millisecond}, // 20/s: 100 ms, capped
		{"nothing measured: the target", 1, 0, 5 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := newClock(10 * ms)
			p := newPipeline(t, Config{}, Host{Clock: clk.now, Shards: c.shards})
			standUp(p, clk)
			for range 2 {
				admitN(t, p, c.admitted/2)
				clk.add(50 * ms)
				// At the limit: the line goes on standing, and the
				// window of admissions closes.
				_, d := aged(p, 150*time.Millisecond)
				require.Equal(t, Rejected, d)
			}
			st := p.Stats()
			require.True(t, st.Standing)
			assert.Equal(t, c.limit, st.MaxAge)
			_, d := aged(p, c.limit-time.Millisecond)
			assert.Equal(t, Admitted, d, "within the limit")
			_, d = aged(p, c.limit+time.Millisecond)
			assert.Equal(t, Rejected, d, "past it")
		})
	}
}

// refuseAtMaxAge has n requests refused for having waited past MaxAge and
// its grace for a closed loop, each after between milliseconds of
// admitting one young request a millisecond: a line that reaches the limit
// now and then, and does not stand. The client of each had sent it at once
// after its previous answer, except every every-th (every = 0: never at
// once), and sends again on its connection, and is served.
func refuseAtMaxAge(t *testing.T, p *Pipeline, clk *fakeClock, n, every, between int) {
	t.Helper()
	for i := range n {
		for range between {
			clk.add(ms)
			_, d := aged(p, 0)
			require.Equal(t, Admitted, d)
		}
		r := newReq("/")
		r.Stamp = time.Now().UnixNano() - int64(150*time.Millisecond)
		r.Prior, r.Since = PriorAnswer, 0
		if every == 0 || i%every == 0 {
			r.Since = 5 * ResendWindow
		}
		require.Equal(t, Rejected, p.Decide(&r.Ticket))
		r.Stamp = time.Now().UnixNano()
		r.Prior = PriorRefusal
		require.Equal(t, Admitted, p.Decide(&r.Ticket))
		p.Done(&r.Ticket, Outcome{Status: 200})
	}
}

// A closed loop a little longer than the limit shows before its line
// stands: the few clients refused at MaxAge each time round send again at
// once, and there are far fewer of them than admissions. The lower limit is then futile from the standing
// period's first request, without the thousand refusals the windows would
// have made first. New requests refused at MaxAge (an open-loop overload's
// onset), a pool that resends one time in four, refusals as many as the
// admissions (an overload, whoever sends), too few refusals to tell, or a
// record a second old keep it.
func TestRefusalsAtMaxAgeOfResendsKeepTheLimit(t *testing.T) {
	for _, tc := range []struct {
		name              string
		n, every, between int
		silence           time.Duration
		lowered           bool
	}{
		{"resent at once", 12, 12, 4, 0, false},
		{"new requests", 12, 0, 4, 0, true},
		{"one in four resent", 16, 4, 4, 0, true},
		{"resent, as many as admitted", 40, 40, 0, 0, true},
		{"too few to tell", ResendsSeen - 1, 100, 4, 0, true},
		{"resent at once, a second ago", 12, 12, 4, 1100 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock(10 * ms)
			p := newPipeline(t, Config{}, Host{Clock: clk.now})
			p.Servable()
			refuseAtMaxAge(t, p, clk, tc.n, tc.every, tc.between)
			clk.add(int64(tc.silence))
			require.False(t, p.Stats().Standing, "premise: a line broken by young requests does not stand")
			standUp(p, clk)
			require.True(t, p.Stats().Standing)
			_, d := aged(p, 50*time.Millisecond)
			if tc.lowered {
				assert.Less(t, p.Stats().MaxAge, DefaultMaxAge/2+time.Millisecond, "the lower limit (two starts at the rate admitted, at this rate)")
				assert.Equal(t, Rejected, d, "a request of 50 ms is refused by the lower limit")
				return
			}
			assert.Equal(t, DefaultMaxAge, p.Stats().MaxAge, "the lower limit is futile from the start")
			assert.Equal(t, Admitted, d, "a request of 50 ms starts")
		})
	}
}

// A client refused at MaxAge is held, whether it resent its request at once
// or not, and before the line stands, when the latest requests to reach MaxAge
// were those of a closed loop a little longer than the limit, whose line
// reaches it only now and then: each client refused is one that sends
// again at once.
func TestHoldBeforeTheLineStands(t *testing.T) {
	clk := newClock(10 * ms)
	p := newPipeline(t, Config{}, Host{Clock: clk.now})
	p.Servable()
	admitN(t, p, 100)
	clk.add(100 * ms)
	late, d := resent(p, 150*time.Millisecond)
	require.Equal(t, Rejected, d)
	assert.Zero(t, p.Hold(&late.Ticket, 1000), "one refusal tells nothing")

	refuseAtMaxAge(t, p, clk, 12, 12, 4)
	require.False(t, p.Stats().Standing)
	late, d = resent(p, 150*time.Millisecond)
	require.Equal(t, Rejected, d)
	assert.Equal(t, DefaultRetryAfter, p.Hold(&late.Ticket, 1000), "the refusals at MaxAge are a closed loop's")
	fresh, d := aged(p, 150*time.Millisecond)
	require.Equal(t, Rejected, d)
	assert.Equal(t, DefaultRetryAfter, p.Hold(&fresh.Ticket, 1000), "not resent itself, but one of the loop's clients")
	assert.Zero(t, p.Hold(&late.Ticket, 2), "within what the server serves")

	// Refusals at MaxAge as many as the admissions: an overload, whoever
	// sends.
	q := newPipeline(t, Config{}, Host{Clock: clk.now})
	q.Servable()
	refuseAtMaxAge(t, q, clk, 60, 60, 0)
	require.False(t, q.Stats().Standing)
	late, d = resent(q, 150*time.Millisecond)
	require.Equal(t, Rejected, d)
	assert.Zero(t, q.Hold(&late.Ticket, 1000), "as many refused at MaxAge as admitted")

	// An open-loop overload whose line stands: the lower limit refuses
	// five new requests per admission, and the few that reach MaxAge
	// (after a stall) are on connections that a pool reuses at once.
	o := newPipeline(t, Config{}, Host{Clock: clk.now})
	o.Servable()
	standUp(o, clk)
	for range 12 {
		spin(o, clk, 10*time.Millisecond, 5, false)
		r := newReq("/")
		r.Stamp = time.Now().UnixNano() - int64(150*time.Millisecond)
		r.Prior = PriorAnswer
		require.Equal(t, Rejected, o.Decide(&r.Ticket))
		r.Stamp, r.Prior = time.Now().UnixNano(), PriorRefusal
		o.Decide(&r.Ticket)
	}
	require.True(t, o.Stats().Standing)
	require.Equal(t, 5*time.Millisecond, o.Stats().MaxAge, "the lower limit works")
	late, d = resent(o, 150*time.Millisecond)
	require.Equal(t, Rejected, d)
	assert.Zero(t, o.Hold(&late.Ticket, 1000), "the lower limit refuses more than the server admits")
}

// atOnce decides a request that arrived age ago on a kept-alive
// connection, sent at once after its connection's previous answer
// (Ticket.AtOnce), or not, and ends it if admitted.
func atOnce(p *Pipeline, age time.Duration, once bool) Decision {
	r := newReq("/")
	r.Stamp = time.Now().UnixNano() - int64(age)
	r.Prior = PriorAnswer
	if !once {
		r.Since = 5 * ResendWindow
	}
	d := p.Decide(&r.Ticket)
	if d == Admitted {
		p.Done(&r.Ticket, Outcome{Status: 200})
	}
	return d
}

// A closed loop a little longer than the limit is served whole: a request
// past MaxAge starts, within the grace (half of MaxAge by default), when
// its client sent it at once after its previous answer and the line looks
// like a closed loop's. A request not sent at once, one past the grace,
// a record of requests past MaxAge mostly not sent at once (an open-loop
// pool), refusals for age outnumbering half the admissions (an overload),
// or a grace turned off keep the limit.
func TestClosedLoopPastTheLimitStartsLate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
		setup func(t *testing.T, p *Pipeline, clk *fakeClock)
		age   time.Duration
		once  bool
		late  bool
		// after a refusal, 5 ms later (a client with a backoff of its
		// own) or at once (once), rather than after a served answer
		refused bool
	}{
		{name: "sent at once, within the grace", age: 120 * time.Millisecond, once: true, late: true},
		{name: "not sent at once", age: 120 * time.Millisecond},
		{name: "past the grace", age: 151 * time.Millisecond, once: true},
		{name: "grace off", grace: -1, age: 101 * time.Millisecond, once: true},
		{name: "a grace of 10 ms, within", grace: 10 * time.Millisecond, age: 105 * time.Millisecond, once: true, late: true},
		{name: "a grace of 10 ms, past", grace: 10 * time.Millisecond, age: 111 * time.Millisecond, once: true},
		{name: "a loop the record knows", age: 120 * time.Millisecond, once: true, late: true,
			setup: func(t *testing.T, p *Pipeline, clk *fakeClock) {
				for range resendsKept {
					require.Equal(t, Admitted, atOnce(p, 110*time.Millisecond, true))
				}
			}},
		{name: "a pool the record knows", age: 120 * time.Millisecond, once: true,
			setup: func(t *testing.T, p *Pipeline, clk *fakeClock) {
				for i := range resendsKept {
					atOnce(p, 110*time.Millisecond, i%4 == 0)
				}
			}},
		{name: "after a refusal, the record a loop", age: 120 * time.Millisecond, refused: true, late: true,
			setup: func(t *testing.T, p *Pipeline, clk *fakeClock) {
				for range resendsKept {
					require.Equal(t, Admitted, atOnce(p, 110*time.Millisecond, true))
				}
			}},
		{name: "after a refusal, the record too short", age: 120 * time.Millisecond, refused: true},
		{name: "resent at once, the record too short", age: 120 * time.Millisecond, once: true, refused: true, late: true},
		{name: "not sent at once, the record a loop", age: 120 * time.Millisecond, late: true,
			setup: func(t *testing.T, p *Pipeline, clk *fakeClock) {
				for range resendsKept {
					require.Equal(t, Admitted, atOnce(p, 110*time.Millisecond, true))
				}
			}},
		{name: "new connections' first requests tell nothing", age: 120 * time.Millisecond, once: true, late: true,
			setup: func(t *testing.T, p *Pipeline, clk *fakeClock) {
				for range resendsKept {
					aged(p, 110*time.Millisecond)
				}
			}},
		{name: "the record a second old", age: 120 * time.Millisecond, once: true, late: true,
			setup: func(t *testing.T, p *Pipeline, clk *fakeClock) {
				for range resendsKept {
					atOnce(p, 110*time.Millisecond, false)
				}
				clk.add(1100 * ms)
				admitN(t, p, 100)
				p.Servable()
				clk.add(60 * ms)
				admitN(t, p, 100)
			}},
		{name: "an overload: as many refused for age as admitted", age: 120 * time.Millisecond, once: true,
			setup: func(t *testing.T, p *Pipeline, clk *fakeClock) {
				for range 100 {
					require.Equal(t, Rejected, atOnce(p, 200*time.Millisecond, false))
				}
				clk.add(60 * ms)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, clk := measured(t, Config{LoopGrace: tc.grace})
			if tc.setup != nil {
				tc.setup(t, p, clk)
			}
			before := p.Stats()
			var d Decision
			if tc.refused {
				r := newReq("/")
				r.Stamp = time.Now().UnixNano() - int64(tc.age)
				r.Prior, r.Since = PriorRefusal, 5*ResendWindow
				if tc.once {
					r.Since = 0
				}
				if d = p.Decide(&r.Ticket); d == Admitted {
					p.Done(&r.Ticket, Outcome{Status: 200})
				}
			} else {
				d = atOnce(p, tc.age, tc.once)
			}
			after := p.Stats()
			if !tc.late {
				assert.Equal(t, Rejected, d)
				assert.Equal(t, before.Late, after.Late)
				return
			}
			assert.Equal(t, Admitted, d)
			assert.Equal(t, before.Late+1, after.Late, "counted as a late start")
			assert.Equal(t, before.Rejected, after.Rejected)
		})
	}
}

// A closed loop's line stands once it has kept reaching the limit for a
// tenth of an interval, before the record of the requests past MaxAge
// holds enough to tell (ResendsSeen): while every one of them was sent at
// once and the server refuses few, the lower limit waits, and the loop's
// requests keep starting. One of them not sent at once lets it apply.
func TestClosedLoopsLineStandsAtTheLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mixed   bool
		lowered bool
	}{
		{"every one sent at once", false, false},
		{"one not sent at once", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, clk := measured(t, Config{})
			// A request past MaxAge every 2 ms for 12 ms: five of them.
			for i := range 6 {
				once := !(tc.mixed && i == 0)
				d := atOnce(p, 110*time.Millisecond, once)
				require.Equal(t, once, d == Admitted, "request %d", i)
				clk.add(2 * ms)
			}
			require.True(t, p.Stats().Standing, "premise: the line stands")
			d := atOnce(p, 50*time.Millisecond, true)
			if tc.lowered {
				assert.Less(t, p.Stats().MaxAge, DefaultMaxAge, "the lower limit applies")
				assert.Equal(t, Rejected, d)
				return
			}
			assert.Equal(t, DefaultMaxAge, p.Stats().MaxAge, "the lower limit waits")
			assert.Equal(t, Admitted, d)
		})
	}
}

// An open-loop overload whose pool carries its requests at once looks like
// a closed loop at its onset: its first requests past MaxAge start late,
// and the lower limit waits. Once its refusals past the grace outnumber
// half its admissions, the lower limit applies, for the rest of the
// standing period as long as that holds.
func TestOverloadMistakenForALoopGetsItsLowerLimit(t *testing.T) {
	p, clk := measured(t, Config{})
	for range 12 {
		require.Equal(t, Admitted, atOnce(p, 110*time.Millisecond, true), "started late: it looks like a loop")
		clk.add(ms)
	}
	require.True(t, p.Stats().Standing, "premise: the line stands")
	require.Equal(t, DefaultMaxAge, p.Stats().MaxAge, "premise: the lower limit waits")

	// The line grows past the grace: refused, far more than admitted.
	for range 100 {
		require.Equal(t, Rejected, atOnce(p, 200*time.Millisecond, true))
	}
	clk.add(60 * ms)
	require.Equal(t, Rejected, atOnce(p, 200*time.Millisecond, true))
	require.True(t, p.Stats().Standing)
	assert.Less(t, p.Stats().MaxAge, DefaultMaxAge, "the lower limit applies")
	assert.Equal(t, Rejected, atOnce(p, 50*time.Millisecond, true), "a request of 50 ms is refused")
}

// measured returns a pipeline on a fake clock whose window has measured 100
// admissions over 60 ms, none refused: a server busy and within its
// capacity.
func measured(t *testing.T, cfg Config) (*Pipeline, *fakeClock) {
	t.Helper()
	clk := newClock(10 * ms)
	p := newPipeline(t, cfg, Host{Clock: clk.now})
	p.Servable()
	admitN(t, p, 100)
	clk.add(60 * ms)
	return p, clk
}
