// Package load is an open-loop HTTP load generator for loopback targets,
// with a closed-loop capacity measurement beside it.
//
// Run sends requests at scheduled times (constant rate or Poisson arrivals)
// whatever the target does: a slow answer never delays the next send, so an
// overloaded server sees the offered load and not less. Each request is
// timed from its scheduled send time, not from when it actually left (no
// coordinated omission), and has a client deadline measured from that same
// scheduled time: a request not fully answered by then counts as failed.
//
//	res, err := load.Run(ctx, load.Config{
//		URL:      "http://127.0.0.1:8080/forecast?city=Lisbon",
//		Rate:     2000,
//		Duration: 10 * time.Second,
//		Arrival:  load.Poisson,
//	})
//	// then res.Goodput(), res.ByClass[""].Latency, res.Behind
//
// The offered load is either one rate for one duration or, for a step
// response, a profile of Config.Phases run back to back, with the outcomes
// counted per Config.Bucket of scheduled time. Config.NewConn picks
// requests that go out on a fresh connection, dialled for them and closed
// after the answer, while the others share a pool of kept-alive
// connections; with Config.Classify they can be counted as classes of
// their own.
//
// The generator checks itself: when it starts more than Config.LateShare
// of its requests more than Config.LagLimit after their schedule, or has to
// drop one because too many are in flight, the Result is marked Behind, and
// such a run does not count (the target was not offered the asked load).
//
// Requests to an http:// or https:// URL go through the package's own
// HTTP/1.1 client: a prebuilt GET on pooled kept-alive connections, parsing
// only the status line, the framing fields and the not-started marker
// (over https, with crypto/tls, without checking the loopback target's
// certificate and without session resumption). On a machine whose CPUs
// the generator shares with the target, net/http's Transport took CPU the
// target needed (and fell behind its schedule at 5x); a Config.Client uses
// net/http instead. A request that
// passes its deadline closes its connection and the next one dials anew, as
// net/http's Transport does (Config.ClientMode's default); ClientKeep keeps
// the connection for the late answer instead, a client that never leaves.
//
// Calibrate measures a target's capacity the other way, closed loop: a
// fixed number of workers, each sending its next request as soon as the
// previous one is answered, and reports the goodput reached.
//
// The package knows nothing of the benchmark's targets or scenarios:
// package bench runs it against the targets' child processes, and any
// tool that needs a load on a local server can use it alone.
package load

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sluice-go/sluice/bench/internal/loopback"
)

// SendTick is the shortest sleep of Run's dispatcher: requests due within
// a tick of each other go out together, up to a tick late (the lateness is
// part of their measured latency), and the dispatcher wakes at most once
// per tick instead of once per request.
const SendTick = time.Millisecond

// Defaults of Config's zero fields.
const (
	DefaultDeadline = time.Second
	DefaultLagLimit = 10 * time.Millisecond
	// DefaultLateShare is Config.LateShare's default.
	DefaultLateShare = 0.01
	// MaxConns caps the derived connection pool size.
	MaxConns = 2048
	// MaxInFlight caps the derived bound on requests in flight.
	MaxInFlight = 1 << 16
)

// Config describes one run.
type Config struct {
	// URL is the target; its host must be a loopback address or
	// "localhost".
	URL string
	// URLs, when set instead of URL, are several targets (each as URL
	// must be): the requests go to them in turn, round robin, each
	// target with a pool of Conns connections. Client is used for all of
	// them when set.
	URLs []string
	// Method is the request method; empty means GET.
	Method string
	// Rate is the offered load in requests per second; it must be > 0
	// unless Phases is set, and zero if it is.
	Rate float64
	// Duration is how long to send; it must be > 0 unless Phases is set,
	// and zero if it is. Run returns after the last request sent is
	// answered or past its deadline.
	Duration time.Duration
	// Phases, when not empty, replaces Rate and Duration with a load
	// profile: each phase's Rate for its Duration, back to back from the
	// start of the run (low, high, low for a step response). Every phase
	// must have a positive finite Rate and a positive Duration. See
	// Arrival for what happens at the boundaries.
	Phases []Phase
	// Arrival is the law of the gaps between sends.
	Arrival Arrival
	// Seed seeds the Poisson gaps.
	Seed uint64
	// Deadline is the client deadline per request, measured from its
	// scheduled send time; zero means DefaultDeadline.
	Deadline time.Duration
	// Conns is the connection pool size of the client Run builds
	// (MaxConnsPerHost and idle connections kept). Zero derives it from
	// Little's law, ceil(Peak*Deadline), the most requests that can be in
	// flight within the deadline, capped at MaxConns: requests then wait
	// in the server, not in the client. Peak is Rate, or the highest rate
	// of Phases. Ignored when Client is set.
	Conns int
	// MaxInFlight bounds the requests in flight; a request scheduled while
	// the bound is reached is not sent, counts as Failed and Dropped, and
	// marks the run Behind. Zero means max(2*ceil(Peak*Deadline), Conns)
	// + 64, capped at the package's MaxInFlight.
	MaxInFlight int
	// LagLimit is how late after its schedule a request may start before
	// the run is Behind; zero means DefaultLagLimit (10 ms, an order of
	// magnitude above the timer and scheduler jitter of an idle loopback
	// machine, and a tenth of a short queue timeout).
	LagLimit time.Duration
	// LateShare is the share of the requests sent that may start more
	// than LagLimit late before the run is Behind; zero means
	// DefaultLateShare (1%: a scheduler hiccup of the generator's process
	// delays a few sends, which the latencies count since they run from
	// the schedule, without changing the load offered). Negative means
	// none may.
	LateShare float64
	// Classify, when set, is called with each request's index and returns
	// the class the request is counted under and header fields to add
	// (tenant, priority). The header is not modified and may be shared.
	// Nil counts everything under the class "".
	Classify func(i int) (class string, header http.Header)
	// NewConn, when set, is called with each request's index; a request
	// for which it returns true is sent on a fresh TCP connection,
	// dialled for it alone and closed after its answer (a second client
	// Run builds, with keep-alives disabled), instead of on the pool of
	// kept-alive connections. Run cannot build that client from a caller's
	// one, so setting both NewConn and Client is an error.
	NewConn func(i int) bool
	// Client sends the requests; nil builds one with a pool of Conns
	// connections, closed at the end of the run. It cannot be combined
	// with NewConn.
	Client *http.Client
	// Clients, when positive, makes the load that of Clients clients,
	// each with one kept-alive connection of its own, as browsers and
	// services with a connection each: request i is client i mod Clients's,
	// goes out on that client's connection after its previous request has
	// been answered (waiting for it until its own deadline at most), and
	// its outcome counts for its client in Result.Clients, which tells
	// whether the server serves its clients alike (Result.Fairness). It
	// replaces Conns, needs the built-in client (one URL, no Client) and
	// cannot be combined with NewConn.
	Clients int
	// ClientMode is what a pooled connection whose request passes its
	// deadline becomes: closed, the next request dialling a new one
	// (ClientReconnect, the zero value, as net/http's Transport does), or
	// kept until the late answer has been read, then reused (ClientKeep:
	// a polite client that never abandons work the server has started).
	// ClientKeep needs the built-in client (a plain http URL, no Client).
	ClientMode ClientMode
	// Bucket, when set, makes Run also report Result.Series: the outcomes
	// of the requests scheduled in each Bucket of the run (100 ms for a
	// step response), counted by scheduled time, so a bucket's goodput is
	// what the target did with the load offered then; and the OK answers
	// that ended in each bucket, whatever their schedule, which is the
	// target's output then. The buckets cover the whole run, every phase
	// included. Each class's buckets are in its ClassResult.Series.
	Bucket time.Duration
}

// ClientMode is how the generator treats a connection whose request
// passed its deadline (see Config.ClientMode).
type ClientMode uint8

const (
	// ClientReconnect closes the connection of a request that passes its
	// deadline, so that the server sees its client leave, and the next
	// request opens a new connection: what net/http's Transport does when
	// a request's context ends, and browsers and most SDKs with a timeout.
	// The generator has always done this; it is the default.
	ClientReconnect ClientMode = iota
	// ClientKeep counts a request that passes its deadline as failed at
	// the deadline, but keeps its connection: the late answer is read to
	// its end in the background (for at most KeepDrain), then the
	// connection goes back to the pool. The server never sees a client
	// leave and never accepts more connections than the pool's.
	ClientKeep
)

// KeepDrain bounds how long ClientKeep waits for a late answer after the
// request's deadline before it closes the connection after all.
const KeepDrain = 30 * time.Second

// ClientModes returns the modes, the default first.
func ClientModes() []ClientMode { return []ClientMode{ClientReconnect, ClientKeep} }

func (m ClientMode) String() string {
	switch m {
	case ClientReconnect:
		return "reconnect"
	case ClientKeep:
		return "keep"
	}
	return fmt.Sprintf("ClientMode(%d)", uint8(m))
}

// ParseClientMode returns the mode named s ("reconnect" or "keep").
func ParseClientMode(s string) (ClientMode, error) {
	for _, m := range ClientModes() {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("load: unknown client mode %q (want reconnect or keep)", s)
}

// Phase is one stretch of a load profile: Rate requests per second for
// Duration.
type Phase struct {
	Rate     float64
	Duration time.Duration
}

// ClassResult counts the requests of one class.
type ClassResult struct {
	Offered  int64 // scheduled within the run
	Sent     int64 // actually started
	OK       int64 // 2xx fully read within the deadline
	Rejected int64 // 503 with the Sluice-Not-Started header
	Failed   int64 // anything else: other status, error, deadline, dropped
	Dropped  int64 // of Failed: not sent because MaxInFlight was reached
	// Latency holds the latencies of OK answers in microseconds, from
	// the scheduled send time to the end of the body.
	Latency *hdrhistogram.Histogram
	// Series is the class's part of Result.Series (nil without
	// Config.Bucket).
	Series []Bucket
}

// Result is the outcome of a run. Its counts are the sums over ByClass.
type Result struct {
	Offered, Sent, OK, Rejected, Failed, Dropped int64
	// Duration is the sending window: Config.Duration or the sum of the
	// durations of Config.Phases, or less if the context ended first.
	Duration time.Duration
	ByClass  map[string]*ClassResult
	// Behind reports that the generator could not keep the schedule: more
	// than LateShare of the requests sent started more than LagLimit late
	// (Late counts them), or one was dropped. Such a run does not count.
	Behind bool
	Late   int64
	// MaxLag is the largest delay between a request's schedule and its
	// start.
	MaxLag time.Duration
	// Clients holds, with Config.Clients, each client's OK answers.
	Clients []int64
	// Dials counts the TCP connections the generator opened during the
	// run: the pool's first ones, those that replace a connection closed
	// after a timeout, an error or the server's close, and the fresh ones
	// of Config.NewConn. Zero with a caller's Client (not counted).
	Dials int64
	// Series holds one Bucket per Config.Bucket of the sending window
	// (nil without Config.Bucket).
	Series []Bucket
}

// Bucket counts the requests scheduled in one interval of a run, by outcome,
// and the OK answers that ended in it.
type Bucket struct {
	// Start is the interval's start, from the start of the run.
	Start                                  time.Duration
	Offered, OK, Rejected, Failed, Dropped int64
	// Completed counts the OK answers that ended within the interval,
	// whatever their schedule (answers ending after the sending window
	// are in no bucket): the target's goodput by the clock of its
	// answers, where OK counts it by the clock of the load.
	Completed int64
}

// Goodput is the rate of OK answers (2xx within the deadline) per second of
// the sending window.
func (r *Result) Goodput() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.OK) / r.Duration.Seconds()
}

type runner struct {
	cfg      Config
	snd      sender
	clients  *roundRobin // Config.Clients's, also snd; nil without
	deadline time.Duration
	histMax  int64
	start    time.Time // the run's, for the series of completions

	mu  sync.Mutex
	res Result
}

func (r *runner) class(name string) *ClassResult {
	c := r.res.ByClass[name]
	if c == nil {
		c = &ClassResult{Latency: hdrhistogram.New(1, r.histMax, 3)}
		if n := len(r.res.Series); n > 0 {
			c.Series = make([]Bucket, n)
			for i := range c.Series {
				c.Series[i].Start = r.res.Series[i].Start
			}
		}
		r.res.ByClass[name] = c
	}
	return c
}

type outcome uint8

const (
	outOK outcome = iota
	outRejected
	outFailed
)

func (r *runner) record(c *ClassResult, b int, o outcome, lat time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch o {
	case outOK:
		c.OK++
		us := max(lat.Microseconds(), 1)
		_ = c.Latency.RecordValue(min(us, r.histMax))
	case outRejected:
		c.Rejected++
	default:
		c.Failed++
	}
	if b < 0 {
		return
	}
	done := -1
	if o == outOK {
		if i := int(time.Since(r.start) / r.cfg.Bucket); i < len(r.res.Series) {
			done = i
		}
	}
	for _, series := range [2][]Bucket{r.res.Series, c.Series} {
		if done >= 0 {
			series[done].Completed++
		}
		switch bk := &series[b]; o {
		case outOK:
			bk.OK++
		case outRejected:
			bk.Rejected++
		default:
			bk.Failed++
		}
	}
}

// bucket returns the index of the series bucket of a request scheduled at
// off from the start, or -1 without a series.
func (r *runner) bucket(off time.Duration) int {
	if r.cfg.Bucket <= 0 {
		return -1
	}
	return min(int(off/r.cfg.Bucket), len(r.res.Series)-1)
}

// send performs request i, scheduled at at, on a new connection when
// fresh, or as its client's with Config.Clients.
func (r *runner) send(ctx context.Context, i int, fresh bool, at time.Time, c *ClassResult, b int, hdr http.Header) {
	var o outcome
	k := -1
	if r.clients != nil {
		k = i % len(r.clients.senders)
		o = r.clients.sendTo(ctx, k, at.Add(r.deadline), hdr)
	} else {
		o = r.snd.send(ctx, at.Add(r.deadline), fresh, hdr)
	}
	lat := time.Since(at)
	if lat > r.deadline {
		o = outFailed
	}
	r.record(c, b, o, lat)
	if k >= 0 && o == outOK {
		r.mu.Lock()
		r.res.Clients[k]++
		r.mu.Unlock()
	}
}

// Fairness tells how alike the clients of Config.Clients were served:
// Jain's index over their OK answers ((Σx)² / (n·Σx²): 1 when every client
// got as many, 1/n when one got them all) and the share of clients that
// got none. It returns 1 and 0 without Clients or without any answer.
func (res *Result) Fairness() (jain, starved float64) {
	n := len(res.Clients)
	if n == 0 {
		return 1, 0
	}
	var sum, sq float64
	zero := 0
	for _, x := range res.Clients {
		sum += float64(x)
		sq += float64(x) * float64(x)
		if x == 0 {
			zero++
		}
	}
	if sq == 0 {
		return 1, 0
	}
	return sum * sum / (float64(n) * sq), float64(zero) / float64(n)
}

// plan is a valid Config with its defaults filled in and its load profile
// spelled out.
type plan struct {
	Config
	phases []Phase
	total  time.Duration // the sum of the phases' durations
	peak   float64       // the highest phase rate
}

// newPlan checks cfg and fills in its defaults.
func newPlan(cfg Config) (plan, error) {
	targets := cfg.URLs
	switch {
	case len(targets) == 0:
		targets = []string{cfg.URL}
	case cfg.URL != "":
		return plan{}, errors.New("load: set URL or URLs, not both")
	}
	for _, u := range targets {
		if _, err := loopback.Check(u); err != nil {
			return plan{}, fmt.Errorf("load: %w", err)
		}
	}
	p := plan{Config: cfg}
	if len(cfg.Phases) == 0 {
		if !(cfg.Rate > 0) || math.IsInf(cfg.Rate, 0) {
			return plan{}, errors.New("load: Rate must be positive and finite")
		}
		if cfg.Duration <= 0 {
			return plan{}, errors.New("load: Duration must be positive")
		}
		p.phases = []Phase{{Rate: cfg.Rate, Duration: cfg.Duration}}
	} else {
		if cfg.Rate != 0 || cfg.Duration != 0 {
			return plan{}, errors.New("load: Rate and Duration must be zero when Phases is set")
		}
		// A copy, so that the caller may reuse its slice during the run.
		p.phases = slices.Clone(cfg.Phases)
	}
	for i, ph := range p.phases {
		if !(ph.Rate > 0) || math.IsInf(ph.Rate, 0) {
			return plan{}, fmt.Errorf("load: phase %d: Rate %v must be positive and finite", i, ph.Rate)
		}
		if ph.Duration <= 0 {
			return plan{}, fmt.Errorf("load: phase %d: Duration %v must be positive", i, ph.Duration)
		}
		if p.total > math.MaxInt64-ph.Duration {
			return plan{}, fmt.Errorf("load: phase %d: the profile's total duration overflows", i)
		}
		p.total += ph.Duration
		p.peak = max(p.peak, ph.Rate)
	}
	if cfg.Arrival > Poisson {
		return plan{}, fmt.Errorf("load: unknown Arrival %d", cfg.Arrival)
	}
	if cfg.NewConn != nil && cfg.Client != nil {
		return plan{}, errors.New("load: NewConn cannot be used with Client: Run builds the fresh-connection client itself")
	}
	switch {
	case cfg.Clients < 0:
		return plan{}, fmt.Errorf("load: Clients %d must not be negative", cfg.Clients)
	case cfg.Clients > 0 && (cfg.Client != nil || len(cfg.URLs) > 0 || cfg.NewConn != nil):
		return plan{}, errors.New("load: Clients needs the built-in client on one URL (no Client, no URLs) and no NewConn")
	}
	switch cfg.ClientMode {
	case ClientReconnect:
	case ClientKeep:
		for _, raw := range targets {
			if u, _ := url.Parse(raw); cfg.Client != nil || u.Scheme != "http" && u.Scheme != "https" {
				return plan{}, errors.New("load: ClientKeep needs the built-in client: an http or https URL and no Client")
			}
		}
	default:
		return plan{}, fmt.Errorf("load: unknown ClientMode %d", cfg.ClientMode)
	}
	if p.Deadline <= 0 {
		p.Deadline = DefaultDeadline
	}
	if p.LagLimit <= 0 {
		p.LagLimit = DefaultLagLimit
	}
	switch {
	case p.LateShare == 0:
		p.LateShare = DefaultLateShare
	case p.LateShare < 0 || math.IsNaN(p.LateShare):
		p.LateShare = 0
	}
	if p.Method == "" {
		p.Method = http.MethodGet
	}
	little := int(min(math.Ceil(p.peak*p.Deadline.Seconds()), MaxInFlight))
	if p.Conns <= 0 {
		p.Conns = min(max(little, 1), MaxConns)
	}
	if p.MaxInFlight <= 0 {
		p.MaxInFlight = min(max(2*little, p.Conns)+64, MaxInFlight)
	}
	return p, nil
}

// Run offers cfg's load (Rate for Duration, or each of Phases in turn) to
// cfg.URL (or cfg.URLs, in turn) and returns what came back. It returns an error for a bad Config;
// if ctx ends early, it stops sending, waits for the requests in flight
// (they are cancelled with ctx) and returns the partial Result with ctx's
// error. Run leaves no goroutine behind.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	p, err := newPlan(cfg)
	if err != nil {
		return nil, err
	}
	cfg = p.Config

	var snd sender
	var cs *roundRobin
	if cfg.Clients > 0 {
		cs, err = newClients(ctx, cfg)
		snd = cs
	} else {
		snd, err = newSenders(ctx, cfg)
	}
	if err != nil {
		return nil, err
	}
	defer snd.close()
	r := &runner{
		cfg:      cfg,
		snd:      snd,
		clients:  cs,
		deadline: cfg.Deadline,
		histMax:  max(2*cfg.Deadline.Microseconds(), 1),
	}
	if cs != nil {
		r.res.Clients = make([]int64, cfg.Clients)
	}
	r.res.ByClass = make(map[string]*ClassResult)

	var (
		wg    sync.WaitGroup
		slots = make(chan struct{}, cfg.MaxInFlight)
		lag   = lagTracker{limit: cfg.LagLimit}
		sched = newSchedule(cfg.Arrival, p.phases, cfg.Seed)
		timer = time.NewTimer(time.Hour)
	)
	timer.Stop()
	defer timer.Stop()

	if cfg.Bucket > 0 {
		n := int((p.total-1)/cfg.Bucket) + 1
		r.res.Series = make([]Bucket, n)
		for i := range r.res.Series {
			r.res.Series[i].Start = time.Duration(i) * cfg.Bucket
		}
	}
	start := time.Now()
	r.start = start
	window := p.total
dispatch:
	for i := 0; ; i++ {
		off, more := sched.next()
		if !more {
			break
		}
		at := start.Add(off)
		// Requests already due go out without sleeping: after a late
		// wake-up the dispatcher sends everything it owes at once. It
		// sleeps at least SendTick at a time, so that at high rates it
		// wakes per tick, not per request; the delay this adds is
		// counted in the requests' latencies.
		if d := time.Until(at); d > 0 {
			timer.Reset(max(d, SendTick))
			select {
			case <-ctx.Done():
				err = ctx.Err()
				window = time.Since(start)
				break dispatch
			case <-timer.C:
			}
		}
		if ctx.Err() != nil {
			err = ctx.Err()
			window = time.Since(start)
			break
		}
		lag.observe(time.Since(at))
		name, hdr := "", http.Header(nil)
		if cfg.Classify != nil {
			name, hdr = cfg.Classify(i)
		}
		fresh := cfg.NewConn != nil && cfg.NewConn(i)
		r.mu.Lock()
		c := r.class(name)
		c.Offered++
		b := r.bucket(off)
		if b >= 0 {
			r.res.Series[b].Offered++
			c.Series[b].Offered++
		}
		r.mu.Unlock()
		select {
		case slots <- struct{}{}:
			r.mu.Lock()
			c.Sent++
			r.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				r.send(ctx, i, fresh, at, c, b, hdr)
			}()
		default:
			r.mu.Lock()
			c.Failed++
			c.Dropped++
			if b >= 0 {
				for _, bk := range [2]*Bucket{&r.res.Series[b], &c.Series[b]} {
					bk.Failed++
					bk.Dropped++
				}
			}
			r.mu.Unlock()
		}
	}
	wg.Wait()

	res := &r.res
	res.Duration = min(window, p.total)
	for _, c := range res.ByClass {
		res.Offered += c.Offered
		res.Sent += c.Sent
		res.OK += c.OK
		res.Rejected += c.Rejected
		res.Failed += c.Failed
		res.Dropped += c.Dropped
	}
	res.MaxLag = lag.max
	res.Late = lag.late
	res.Dials = snd.dials()
	res.Behind = float64(lag.late) > cfg.LateShare*float64(res.Sent) || res.Dropped > 0
	return res, err
}
