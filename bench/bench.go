// Package bench is an open-loop HTTP load generator for loopback targets.
//
// Run sends requests at scheduled times (constant rate or Poisson arrivals)
// whatever the target does: a slow answer never delays the next send, so an
// overloaded server sees the offered load and not less. Each request is
// timed from its scheduled send time, not from when it actually left (no
// coordinated omission), and has a client deadline measured from that same
// scheduled time: a request not fully answered by then counts as failed.
//
// The generator checks itself: when it starts a request more than
// Config.LagLimit after its schedule, or has to drop one because too many
// are in flight, the Result is marked Behind, and such a run does not count
// (the target was not offered the asked load).
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sluice-go/sluice/reject"
)

// Defaults of Config's zero fields.
const (
	DefaultDeadline = time.Second
	DefaultLagLimit = 10 * time.Millisecond
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
	// Method is the request method; empty means GET.
	Method string
	// Rate is the offered load in requests per second; it must be > 0.
	Rate float64
	// Duration is how long to send; it must be > 0. Run returns after the
	// last request sent is answered or past its deadline.
	Duration time.Duration
	// Arrival is the law of the gaps between sends.
	Arrival Arrival
	// Seed seeds the Poisson gaps.
	Seed uint64
	// Deadline is the client deadline per request, measured from its
	// scheduled send time; zero means DefaultDeadline.
	Deadline time.Duration
	// Conns is the connection pool size of the client Run builds
	// (MaxConnsPerHost and idle connections kept). Zero derives it from
	// Little's law, ceil(Rate*Deadline), the most requests that can be in
	// flight within the deadline, capped at MaxConns: requests then wait
	// in the server, not in the client. Ignored when Client is set.
	Conns int
	// MaxInFlight bounds the requests in flight; a request scheduled while
	// the bound is reached is not sent, counts as Failed and Dropped, and
	// marks the run Behind. Zero means max(2*ceil(Rate*Deadline), Conns)
	// + 64, capped at the package's MaxInFlight.
	MaxInFlight int
	// LagLimit is how late after its schedule a request may start before
	// the run is Behind; zero means DefaultLagLimit (10 ms, an order of
	// magnitude above the timer and scheduler jitter of an idle loopback
	// machine, and a tenth of a short queue timeout).
	LagLimit time.Duration
	// Classify, when set, is called with each request's index and returns
	// the class the request is counted under and header fields to add
	// (tenant, priority). The header is not modified and may be shared.
	// Nil counts everything under the class "".
	Classify func(i int) (class string, header http.Header)
	// Client sends the requests; nil builds one with a pool of Conns
	// connections, closed at the end of the run.
	Client *http.Client
	// Bucket, when set, makes Run also report Result.Series: the outcomes
	// of the requests scheduled in each Bucket of the run (100 ms for a
	// step response), counted by scheduled time, so a bucket's goodput is
	// what the target did with the load offered then.
	Bucket time.Duration
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
}

// Result is the outcome of a run. Its counts are the sums over ByClass.
type Result struct {
	Offered, Sent, OK, Rejected, Failed, Dropped int64
	// Duration is the sending window: Config.Duration, or less if the
	// context ended first.
	Duration time.Duration
	ByClass  map[string]*ClassResult
	// Behind reports that the generator could not keep the schedule: at
	// least one request started more than LagLimit late (Late counts
	// them) or was dropped. Such a run does not count.
	Behind bool
	Late   int64
	// MaxLag is the largest delay between a request's schedule and its
	// start.
	MaxLag time.Duration
	// Series holds one Bucket per Config.Bucket of the sending window
	// (nil without Config.Bucket).
	Series []Bucket
}

// Bucket counts the requests scheduled in one interval of a run, by outcome.
type Bucket struct {
	// Start is the interval's start, from the start of the run.
	Start                                  time.Duration
	Offered, OK, Rejected, Failed, Dropped int64
}

// Goodput is the rate of OK answers (2xx within the deadline) per second of
// the sending window.
func (r *Result) Goodput() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.OK) / r.Duration.Seconds()
}

// checkLoopback refuses URLs whose host is not loopback, without resolving
// names other than "localhost".
func checkLoopback(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("bench: bad URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("bench: URL %q: scheme must be http or https", raw)
	}
	h := u.Hostname()
	if h == "localhost" {
		return u, nil
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return u, nil
	}
	return nil, fmt.Errorf("bench: URL %q: host %q is not a loopback address; bench only loads local targets", raw, h)
}

type runner struct {
	cfg      Config
	client   *http.Client
	deadline time.Duration
	histMax  int64

	mu  sync.Mutex
	res Result
}

func (r *runner) class(name string) *ClassResult {
	c := r.res.ByClass[name]
	if c == nil {
		c = &ClassResult{Latency: hdrhistogram.New(1, r.histMax, 3)}
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

func (r *runner) record(c *ClassResult, b *Bucket, o outcome, lat time.Duration) {
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
	if b != nil {
		switch o {
		case outOK:
			b.OK++
		case outRejected:
			b.Rejected++
		default:
			b.Failed++
		}
	}
}

// bucket returns the series bucket of a request scheduled at off from the
// start, or nil without a series.
func (r *runner) bucket(off time.Duration) *Bucket {
	if r.cfg.Bucket <= 0 {
		return nil
	}
	i := min(int(off/r.cfg.Bucket), len(r.res.Series)-1)
	return &r.res.Series[i]
}

// send performs one request scheduled at at.
func (r *runner) send(ctx context.Context, at time.Time, c *ClassResult, b *Bucket, hdr http.Header) {
	ctx, cancel := context.WithDeadline(ctx, at.Add(r.deadline))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.cfg.Method, r.cfg.URL, nil)
	if err != nil {
		r.record(c, b, outFailed, 0)
		return
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := r.client.Do(req)
	if err != nil {
		r.record(c, b, outFailed, 0)
		return
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	lat := time.Since(at)
	switch {
	case err != nil || lat > r.deadline:
		r.record(c, b, outFailed, 0)
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		r.record(c, b, outOK, lat)
	case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(reject.NotStartedHeader) == "1":
		r.record(c, b, outRejected, 0)
	default:
		r.record(c, b, outFailed, 0)
	}
}

// Run offers cfg.Rate requests per second to cfg.URL for cfg.Duration and
// returns what came back. It returns an error for a bad Config; if ctx ends
// early, it stops sending, waits for the requests in flight (they are
// cancelled with ctx) and returns the partial Result with ctx's error.
// Run leaves no goroutine behind.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if _, err := checkLoopback(cfg.URL); err != nil {
		return nil, err
	}
	if !(cfg.Rate > 0) || math.IsInf(cfg.Rate, 0) {
		return nil, errors.New("bench: Rate must be positive and finite")
	}
	if cfg.Duration <= 0 {
		return nil, errors.New("bench: Duration must be positive")
	}
	if cfg.Arrival > Poisson {
		return nil, fmt.Errorf("bench: unknown Arrival %d", cfg.Arrival)
	}
	if cfg.Deadline <= 0 {
		cfg.Deadline = DefaultDeadline
	}
	if cfg.LagLimit <= 0 {
		cfg.LagLimit = DefaultLagLimit
	}
	if cfg.Method == "" {
		cfg.Method = http.MethodGet
	}
	little := int(min(math.Ceil(cfg.Rate*cfg.Deadline.Seconds()), MaxInFlight))
	if cfg.Conns <= 0 {
		cfg.Conns = min(max(little, 1), MaxConns)
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = min(max(2*little, cfg.Conns)+64, MaxInFlight)
	}

	r := &runner{
		cfg:      cfg,
		client:   cfg.Client,
		deadline: cfg.Deadline,
		histMax:  max(2*cfg.Deadline.Microseconds(), 1),
	}
	r.res.ByClass = make(map[string]*ClassResult)
	if r.client == nil {
		tr := &http.Transport{
			Proxy:               nil, // loopback: never through a proxy
			DialContext:         (&net.Dialer{Timeout: cfg.Deadline}).DialContext,
			MaxIdleConns:        cfg.Conns,
			MaxIdleConnsPerHost: cfg.Conns,
			MaxConnsPerHost:     cfg.Conns,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
		}
		defer tr.CloseIdleConnections()
		r.client = &http.Client{Transport: tr}
	}

	var (
		wg    sync.WaitGroup
		slots = make(chan struct{}, cfg.MaxInFlight)
		lag   = lagTracker{limit: cfg.LagLimit}
		sched = newSchedule(cfg.Arrival, cfg.Rate, cfg.Seed)
		timer = time.NewTimer(time.Hour)
	)
	timer.Stop()
	defer timer.Stop()

	if cfg.Bucket > 0 {
		n := int((cfg.Duration + cfg.Bucket - 1) / cfg.Bucket)
		r.res.Series = make([]Bucket, n)
		for i := range r.res.Series {
			r.res.Series[i].Start = time.Duration(i) * cfg.Bucket
		}
	}
	start := time.Now()
	window := cfg.Duration
	var err error
dispatch:
	for i := 0; ; i++ {
		off := sched.next()
		if off >= cfg.Duration {
			break
		}
		at := start.Add(off)
		// Requests already due go out without sleeping: after a late
		// wake-up the dispatcher sends everything it owes at once.
		if d := time.Until(at); d > 0 {
			timer.Reset(d)
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
		r.mu.Lock()
		c := r.class(name)
		c.Offered++
		b := r.bucket(off)
		if b != nil {
			b.Offered++
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
				r.send(ctx, at, c, b, hdr)
			}()
		default:
			r.mu.Lock()
			c.Failed++
			c.Dropped++
			if b != nil {
				b.Failed++
				b.Dropped++
			}
			r.mu.Unlock()
		}
	}
	wg.Wait()

	res := &r.res
	res.Duration = window
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
	res.Behind = lag.late > 0 || res.Dropped > 0
	return res, err
}
