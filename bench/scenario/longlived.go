package scenario

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
	"github.com/sluice-go/sluice/bench/report"
	"github.com/sluice-go/sluice/reject"
)

// Defaults of LongLived's zero fields (DefaultLongLivedN gives the counts).
const (
	DefaultLongLivedWindow       = 5 * time.Second
	DefaultLongLivedRate         = 500.0
	DefaultLongLivedTrivialConns = 32
)

// DefaultLongLivedN returns the longlived scenario's counts of each kind
// of connection when LongLived names none: 100 and 1,000.
func DefaultLongLivedN() []int { return []int{100, 1000} }

// Bounds of the longlived scenario's client side.
const (
	// LongLivedOpenTimeout bounds a WebSocket's dial and upgrade, and
	// an event stream's wait for its first event.
	LongLivedOpenTimeout = 5 * time.Second
	// LongLivedEchoTimeout bounds the echo round at the end of the
	// window: a message sent on every WebSocket, its echo read back.
	LongLivedEchoTimeout = 5 * time.Second
	// LongLivedLate is the delivery delay past which an event counts as
	// late.
	LongLivedLate = 100 * time.Millisecond
	// DefaultLongLivedDials is how many WebSockets or event streams are
	// being opened at once when LongLived says nothing.
	DefaultLongLivedDials = 64
	// LongLivedSpareFiles is the open descriptors each process needs
	// beyond its 2N long-lived sockets and the trivial load's
	// connections (listeners, the runtime's, the child's pipes).
	LongLivedSpareFiles = 256
)

// Bounds of the longlived scenario's settings.
const (
	maxLongLivedN      = 50000
	maxLongLivedWindow = 10 * time.Minute
)

// LongLived measures connections that stay open and mostly idle beside a
// normal load. For each N, on a fresh target serving the weather service
// beside WebSocketPath (a WebSocket echo served inside its
// handler), EventsPath (server-sent events, one a second, each
// stamped with its send time) and TrivialPath, it:
//
//  1. reads the target's RSS and threads;
//  2. opens N WebSockets (each dial and upgrade within
//     LongLivedOpenTimeout) and leaves them idle, then N event streams
//     (each counted when its first event arrives within
//     LongLivedOpenTimeout), Dials at a time;
//  3. offers TrivialRate requests a second to TrivialPath on
//     TrivialConns connections of their own for Window, while it reads
//     every event and records its delivery delay (receipt less the
//     stamp: the target runs on this machine);
//  4. sends a message on every WebSocket and counts the echoes back
//     within LongLivedEchoTimeout;
//  5. reads the target's RSS and threads again, then closes every
//     connection and stops the target.
//
// A sluice handler that waits between events holds a thread while it
// waits; a WebSocket served inside its handler holds none.
type LongLived struct {
	// N are the counts of each kind of connection, each a point;
	// default DefaultLongLivedN.
	N []int
	// Window is how long the trivial load runs with every connection
	// open; default DefaultLongLivedWindow.
	Window time.Duration
	// TrivialRate and TrivialConns are the trivial endpoint's load;
	// default DefaultLongLivedRate requests a second on
	// DefaultLongLivedTrivialConns connections.
	TrivialRate  float64
	TrivialConns int
	// Dials is how many connections are being opened at once; default
	// DefaultLongLivedDials.
	Dials int

	flags *longLivedFlags // set by Flags
}

// longLivedFlags are -longlived-n, -longlived-window and -longlived-rate,
// which replace LongLived's N, Window and TrivialRate once checked.
type longLivedFlags struct {
	n      string
	window time.Duration
	rate   float64
}

// Name is "longlived".
func (*LongLived) Name() string { return "longlived" }

// Describe says what the scenario does, for the command's help.
func (*LongLived) Describe() string {
	return "N idle WebSockets and N event streams held open beside a trivial load: -longlived-n, -longlived-window, -longlived-rate"
}

// Flags registers -longlived-n, -longlived-window and -longlived-rate.
func (ll *LongLived) Flags(fs *flag.FlagSet) {
	ll.flags = &longLivedFlags{}
	fs.StringVar(&ll.flags.n, "longlived-n", formatInts(DefaultLongLivedN()),
		"the longlived scenario's counts of WebSockets, and of event streams, held open, comma-separated")
	fs.DurationVar(&ll.flags.window, "longlived-window", DefaultLongLivedWindow,
		"how long the longlived scenario offers its trivial load with every connection open")
	fs.Float64Var(&ll.flags.rate, "longlived-rate", DefaultLongLivedRate,
		"the longlived scenario's trivial load, requests per second")
}

// Check reads the flags, fills in the defaults of the zero fields and
// checks each, and checks that this process may open 2N sockets and
// LongLivedSpareFiles more for the largest N (its target, a child, has
// the same limit). The scenario serves endpoints of its own over plain
// HTTP, so the suite's TLS, NewConns and Clients do not apply.
func (ll *LongLived) Check(s *bench.SuiteConfig) error {
	if s.TLS || s.NewConns || s.Clients != 0 {
		return errors.New("bench: -tls, -newconns and -clients (SuiteConfig.TLS, NewConns, Clients) do not apply to the longlived scenario, which serves endpoints of its own over plain HTTP")
	}
	if f := ll.flags; f != nil {
		ns, err := parseCounts(f.n)
		if err != nil {
			return fmt.Errorf("-longlived-n: %w", err)
		}
		if f.window <= 0 || f.window > maxLongLivedWindow {
			return fmt.Errorf("-longlived-window must be in (0, %v], got %v", maxLongLivedWindow, f.window)
		}
		if !(f.rate > 0) || math.IsInf(f.rate, 0) {
			return fmt.Errorf("-longlived-rate must be positive and finite, got %v", f.rate)
		}
		ll.N, ll.Window, ll.TrivialRate = ns, f.window, f.rate
	}
	if len(ll.N) == 0 {
		ll.N = DefaultLongLivedN()
	}
	if ll.Window == 0 {
		ll.Window = DefaultLongLivedWindow
	}
	if ll.TrivialRate == 0 {
		ll.TrivialRate = DefaultLongLivedRate
	}
	if ll.TrivialConns == 0 {
		ll.TrivialConns = DefaultLongLivedTrivialConns
	}
	if ll.Dials == 0 {
		ll.Dials = DefaultLongLivedDials
	}
	for _, n := range ll.N {
		if n < 1 || n > maxLongLivedN {
			return fmt.Errorf("bench: the longlived scenario's N must be in [1, %d] (-longlived-n), got %d", maxLongLivedN, n)
		}
	}
	if ll.Window < 0 || ll.Window > maxLongLivedWindow {
		return fmt.Errorf("bench: the longlived scenario's Window must be in (0, %v] (-longlived-window), got %v", maxLongLivedWindow, ll.Window)
	}
	if ll.TrivialConns < 0 {
		return fmt.Errorf("bench: the longlived scenario's TrivialConns must be positive, got %d", ll.TrivialConns)
	}
	if ll.Dials < 0 {
		return fmt.Errorf("bench: the longlived scenario's Dials must be positive, got %d", ll.Dials)
	}
	if err := positiveFinite("longlived", setting{"TrivialRate", ll.TrivialRate}); err != nil {
		return err
	}
	return ll.checkFiles()
}

// checkFiles returns an error naming the fix when the largest N needs
// more open descriptors than this process may have.
func (ll *LongLived) checkFiles() error {
	limit, err := bench.FileLimit()
	if err != nil {
		return fmt.Errorf("bench: the longlived scenario cannot check its open files: %w", err)
	}
	n := slices.Max(ll.N)
	need := uint64(2*n + ll.TrivialConns + LongLivedSpareFiles)
	if need > limit {
		return fmt.Errorf("bench: the longlived scenario's N=%d needs about %d open files in the load generator and as many in its target (2N sockets, %d more), over the limit of %d: raise it (ulimit -n %d, and ulimit -Hn if that is lower) or lower -longlived-n",
			n, need, ll.TrivialConns+LongLivedSpareFiles, limit, need)
	}
	return nil
}

// parseCounts reads a comma-separated list of counts.
func parseCounts(list string) ([]int, error) {
	var ns []int
	for f := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a count", f)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// Points are one per N (Point.Conns), on the suite's shape (the weather
// service beside the scenario's endpoints), each offered TrivialRate; the
// window planned is Window and the echo round.
func (ll *LongLived) Points(s *bench.SuiteConfig) []bench.Point {
	ps := make([]bench.Point, 0, len(ll.N))
	for _, n := range ll.N {
		ps = append(ps, bench.Point{Shape: s.Shape, Spec: s.Shape.Spec, Rate: ll.TrivialRate, Conns: n,
			Window: ll.Window + LongLivedEchoTimeout})
	}
	return ps
}

// LongLivedDetail is what a longlived sample records beyond the common
// figures (Sample.Detail), whose rates and latencies are the trivial
// load's.
type LongLivedDetail struct {
	// N is the count of each kind of connection the run opened; Window
	// and Rate are the trivial load's.
	N      int           `json:"n"`
	Window time.Duration `json:"window"`
	Rate   float64       `json:"rate"`
	// Upgrades are the WebSockets upgraded within LongLivedOpenTimeout,
	// UpgradeFailures the others; UpgradeError is the first failure.
	Upgrades        int    `json:"upgrades"`
	UpgradeFailures int    `json:"upgrade_failures"`
	UpgradeError    string `json:"upgrade_error,omitempty"`
	// Streams are the event streams whose first event arrived within
	// LongLivedOpenTimeout, StreamFailures the others; StreamError is
	// the first failure.
	Streams        int    `json:"streams"`
	StreamFailures int    `json:"stream_failures"`
	StreamError    string `json:"stream_error,omitempty"`
	// Echoes are the WebSockets whose message came back within
	// LongLivedEchoTimeout at the end of the window; EchoError is the
	// first failure.
	Echoes    int    `json:"echoes"`
	EchoError string `json:"echo_error,omitempty"`
	// Refused and Failed count the trivial requests refused unstarted
	// (503 marked not started) and those that failed otherwise (late,
	// errors, other statuses).
	Refused int64 `json:"refused"`
	Failed  int64 `json:"failed"`
	// Events are the events received during the window (from the
	// trivial load's start to the end of the echo round, at least
	// Window); EventP99 and EventMax their delivery delays, in
	// milliseconds; LateEvents those later than LongLivedLate.
	Events     int     `json:"events"`
	EventP99   float64 `json:"event_p99_ms"`
	EventMax   float64 `json:"event_max_ms"`
	LateEvents int     `json:"late_events"`
	// RSSBefore and ThreadsBefore are the target's resident set, in
	// bytes, and threads before the connections were opened; RSSAfter
	// and ThreadsAfter after the echo round, every connection still
	// open.
	RSSBefore     int64 `json:"rss_before"`
	RSSAfter      int64 `json:"rss_after"`
	ThreadsBefore int   `json:"threads_before"`
	ThreadsAfter  int   `json:"threads_after"`
	// RSSPerConn is (RSSAfter - RSSBefore) / 2N, in bytes.
	RSSPerConn float64 `json:"rss_per_conn"`
	// HeapBefore, HeapSockets and HeapAll are the target's live Go
	// memory, heap objects and goroutine stacks (HeapPath), in bytes: before the connections, with the WebSockets
	// open, and with the event streams open too. HeapPerSocket and
	// HeapPerStream are what each WebSocket and each event stream added,
	// in bytes; all zero in reports from before they were measured.
	HeapBefore    int64   `json:"heap_before,omitempty"`
	HeapSockets   int64   `json:"heap_sockets,omitempty"`
	HeapAll       int64   `json:"heap_all,omitempty"`
	HeapPerSocket float64 `json:"heap_per_socket,omitempty"`
	HeapPerStream float64 `json:"heap_per_stream,omitempty"`
}

// Run runs one N on a fresh target: it opens the connections, offers the
// trivial load with them open, echoes on every WebSocket, reads the
// target's RSS and threads, then closes every connection and stops the
// target.
func (ll *LongLived) Run(ctx context.Context, t *bench.Trial) (*bench.Sample, error) {
	cs := t.Child()
	cs.Hook = ll.Name() // no settings
	proc, err := t.Start(ctx, cs)
	if err != nil {
		return nil, err
	}
	c := newLongLivedClients(proc.URL, ll.Dials)
	s, d, err := ll.measure(ctx, t, proc, c)
	err = errors.Join(err, c.close(), proc.Stop())
	if s == nil {
		return nil, err
	}
	d.Events, d.EventP99, d.EventMax, d.LateEvents = c.eventDelays()
	s.Server = proc.Stats
	s.Placement = proc.Placement
	return s, errors.Join(err, s.SetDetail(d))
}

// measure does the run's steps up to the second reading of the target's
// status, leaving the connections open. It returns nil for the sample
// when the trivial load measured nothing.
func (ll *LongLived) measure(ctx context.Context, t *bench.Trial, proc *bench.Process, c *longLivedClients) (*bench.Sample, *LongLivedDetail, error) {
	n := t.Point.Conns
	d := &LongLivedDetail{N: n, Window: ll.Window, Rate: ll.TrivialRate}
	var err error
	if d.RSSBefore, d.ThreadsBefore, err = proc.Status(); err != nil {
		return nil, d, err
	}
	if d.HeapBefore, err = readHeap(ctx, proc.URL); err != nil {
		return nil, d, err
	}
	var firstErr error
	d.Upgrades, firstErr = c.dialAll(ctx, n)
	d.UpgradeFailures = n - d.Upgrades
	if firstErr != nil {
		d.UpgradeError = firstErr.Error()
	}
	if d.HeapSockets, err = readHeap(ctx, proc.URL); err != nil {
		return nil, d, err
	}
	d.Streams, firstErr = c.openAll(ctx, n)
	d.StreamFailures = n - d.Streams
	if firstErr != nil {
		d.StreamError = firstErr.Error()
	}
	if d.HeapAll, err = readHeap(ctx, proc.URL); err != nil {
		return nil, d, err
	}
	if d.Upgrades > 0 {
		d.HeapPerSocket = float64(d.HeapSockets-d.HeapBefore) / float64(d.Upgrades)
	}
	if d.Streams > 0 {
		d.HeapPerStream = float64(d.HeapAll-d.HeapSockets) / float64(d.Streams)
	}
	rc, err := t.Generator(proc)
	if err != nil {
		return nil, d, err
	}
	rc.URL, rc.Rate, rc.Conns, rc.Duration = proc.URL+TrivialPath, ll.TrivialRate, ll.TrivialConns, ll.Window
	s := t.Sample()
	m := bench.MeterCPU(proc)
	c.from = time.Now()
	res, err := load.Run(ctx, rc)
	if wait := time.Until(c.from.Add(ll.Window)); wait > 0 && err == nil {
		// The load's last request went out before the window's end:
		// the events count over the whole window.
		err = sleep(ctx, wait)
	}
	d.Echoes, firstErr = c.echoAll()
	if firstErr != nil {
		d.EchoError = firstErr.Error()
	}
	c.to = time.Now()
	m.Stop(s)
	rss, threads, serr := proc.Status()
	err = errors.Join(err, serr)
	if serr == nil {
		d.RSSAfter, d.ThreadsAfter = rss, threads
		d.RSSPerConn = float64(rss-d.RSSBefore) / float64(2*n)
	}
	if res == nil {
		return nil, d, err
	}
	bench.Fill(s, res)
	d.Refused, d.Failed = res.Rejected, res.Failed
	return s, d, err
}

// readHeap returns the live Go memory of the target at url, heap objects
// and goroutine stacks, in bytes (HeapPath).
func readHeap(ctx context.Context, url string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, LongLivedOpenTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+HeapPath, nil)
	if err != nil {
		return 0, err
	}
	req.Close = true // no connection left to the target, to count in its heap
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("bench: read the target's heap: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64))
	if err != nil {
		return 0, fmt.Errorf("bench: read the target's heap: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("bench: read the target's heap: %s", resp.Status)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bench: read the target's heap: %w", err)
	}
	return v, nil
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("bench: the longlived scenario's window: %w", ctx.Err())
	}
}

// longLivedClients are one run's WebSockets and event streams.
type longLivedClients struct {
	base      string // the target's http:// URL
	dials     int    // connections being opened at once
	transport *http.Transport
	client    *http.Client
	ws        []*websocket.Conn
	streams   []*eventStream
	// from and to bound the window, from the trivial load's start to
	// the end of the echo round: the events received between them
	// count.
	from, to time.Time
	closed   bool
}

// newLongLivedClients returns the clients of the target at base, none
// open yet, that open dials connections at a time.
func newLongLivedClients(base string, dials int) *longLivedClients {
	tr := &http.Transport{DisableCompression: true, ResponseHeaderTimeout: LongLivedOpenTimeout}
	return &longLivedClients{base: base, dials: dials, transport: tr, client: &http.Client{Transport: tr}}
}

// openBounded calls open(i) for i in [0, n), dials at a time, and returns
// what the calls opened (in order, the failed ones left out) and the first
// error.
func openBounded[T any](n, dials int, open func(i int) (*T, error)) ([]*T, error) {
	got := make([]*T, n)
	errs := make([]error, n)
	slots := make(chan struct{}, dials)
	var wg sync.WaitGroup
	for i := range n {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			got[i], errs[i] = open(i)
		})
	}
	wg.Wait()
	return slices.DeleteFunc(got, func(x *T) bool { return x == nil }), firstError(errs)
}

// dialAll opens n WebSockets to the echo, each within
// LongLivedOpenTimeout, and returns how many opened and the first error.
func (c *longLivedClients) dialAll(ctx context.Context, n int) (int, error) {
	url := "ws" + strings.TrimPrefix(c.base, "http") + WebSocketPath
	dialer := websocket.Dialer{HandshakeTimeout: LongLivedOpenTimeout}
	conns, err := openBounded(n, c.dials, func(i int) (*websocket.Conn, error) {
		dctx, cancel := context.WithTimeout(ctx, LongLivedOpenTimeout)
		defer cancel()
		for try := 1; ; try++ {
			conn, resp, err := dialer.DialContext(dctx, url, nil)
			if err == nil {
				return conn, nil
			}
			if resp == nil {
				return nil, fmt.Errorf("bench: WebSocket %d: %w", i, err)
			}
			// An upgrade refused unstarted is asked again, as an event
			// stream is (see streamTries).
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get(reject.NotStartedHeader) != "1" || try == streamTries {
				return nil, fmt.Errorf("bench: WebSocket %d: %w (status %d)", i, err, resp.StatusCode)
			}
			if err := sleep(dctx, streamRetryPause); err != nil {
				return nil, fmt.Errorf("bench: WebSocket %d: no upgrade within %v", i, LongLivedOpenTimeout)
			}
		}
	})
	c.ws = append(c.ws, conns...)
	return len(c.ws), err
}

// openAll opens n event streams, each counted when its first event
// arrives within LongLivedOpenTimeout, and returns how many did and the
// first error.
func (c *longLivedClients) openAll(ctx context.Context, n int) (int, error) {
	streams, err := openBounded(n, c.dials, func(i int) (*eventStream, error) {
		st, err := c.open(ctx)
		if err != nil {
			return nil, fmt.Errorf("bench: event stream %d: %w", i, err)
		}
		return st, nil
	})
	c.streams = append(c.streams, streams...)
	return len(c.streams), err
}

// firstError returns the first error of errs that is not nil.
func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// eventStream is one open stream of server-sent events.
type eventStream struct {
	cancel context.CancelFunc // ends the stream
	body   io.ReadCloser
	first  chan struct{} // closed at the first event
	done   chan struct{} // closed when read returns
	// events and err are read's, to read once done is closed.
	events []receipt
	err    error
}

// An event stream or a WebSocket upgrade refused unstarted is asked again
// streamRetryPause later, streamTries times at most.
const (
	streamTries      = 3
	streamRetryPause = 50 * time.Millisecond
)

// receipt is an event's arrival and its delivery delay.
type receipt struct {
	at    time.Time
	delay time.Duration
}

// open requests an event stream and waits up to LongLivedOpenTimeout,
// from the request, for its first event. A request refused unstarted
// (503 with the not-started marker: the server was overloaded as it came)
// is sent again after streamRetryPause, as an EventSource reconnects, at
// most streamTries times in all.
func (c *longLivedClients) open(ctx context.Context) (*eventStream, error) {
	sctx, cancel := context.WithCancel(ctx)
	late := time.AfterFunc(LongLivedOpenTimeout, cancel)
	fail := func(err error) (*eventStream, error) {
		late.Stop()
		cancel()
		return nil, err
	}
	var resp *http.Response
	for try := 1; ; try++ {
		req, err := http.NewRequestWithContext(sctx, http.MethodGet, c.base+EventsPath, nil)
		if err != nil {
			return fail(err)
		}
		req.Header.Set("Accept", "text/event-stream")
		resp, err = c.client.Do(req)
		if err != nil {
			if ctx.Err() == nil && sctx.Err() != nil {
				return fail(fmt.Errorf("no answer within %v", LongLivedOpenTimeout))
			}
			return fail(err)
		}
		if resp.StatusCode == http.StatusOK {
			break
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get(reject.NotStartedHeader) != "1" || try == streamTries {
			return fail(fmt.Errorf("status %d", resp.StatusCode))
		}
		if err := sleep(sctx, streamRetryPause); err != nil {
			return fail(fmt.Errorf("no answer within %v", LongLivedOpenTimeout))
		}
	}
	st := &eventStream{cancel: cancel, body: resp.Body, first: make(chan struct{}), done: make(chan struct{})}
	go st.read()
	select {
	case <-st.first:
		if late.Stop() {
			return st, nil
		}
		// The timer fired as the first event came: the stream is
		// being cancelled.
	case <-st.done:
	}
	<-st.done
	if st.err == nil || errors.Is(st.err, context.Canceled) {
		return fail(fmt.Errorf("no event within %v", LongLivedOpenTimeout))
	}
	return fail(fmt.Errorf("no event within %v: %w", LongLivedOpenTimeout, st.err))
}

// read reads the stream's events until it ends, and closes first at the
// first one and done at the end.
func (st *eventStream) read() {
	defer close(st.done)
	defer st.body.Close()
	sc := bufio.NewScanner(st.body)
	for sc.Scan() {
		at := time.Now()
		stamp, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		ns, err := strconv.ParseInt(stamp, 10, 64)
		if err != nil {
			st.err = fmt.Errorf("an event without a time: %q", stamp)
			return
		}
		// time.Unix has no monotonic reading: the delay is the wall
		// clock's, which the target shares.
		st.events = append(st.events, receipt{at: at, delay: at.Sub(time.Unix(0, ns))})
		if len(st.events) == 1 {
			close(st.first)
		}
	}
	st.err = sc.Err()
}

// echoAll sends a message on every WebSocket at once and returns how
// many came back within LongLivedEchoTimeout, and the first failure.
func (c *longLivedClients) echoAll() (int, error) {
	deadline := time.Now().Add(LongLivedEchoTimeout)
	errs := make([]error, len(c.ws))
	var wg sync.WaitGroup
	for i, conn := range c.ws {
		wg.Go(func() { errs[i] = echo(conn, i, deadline) })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		}
	}
	return ok, firstError(errs)
}

// echo sends a message on the i-th WebSocket and reads its echo back by
// deadline.
func echo(conn *websocket.Conn, i int, deadline time.Time) error {
	msg := []byte("echo " + strconv.Itoa(i))
	fail := func(err error) error { return fmt.Errorf("bench: echo on WebSocket %d: %w", i, err) }
	if err := conn.SetWriteDeadline(deadline); err != nil {
		return fail(err)
	}
	if err := conn.SetReadDeadline(deadline); err != nil {
		return fail(err)
	}
	if err := conn.WriteMessage(websocket.TextMessage, msg); err != nil {
		return fail(err)
	}
	kind, got, err := conn.ReadMessage()
	switch {
	case err != nil:
		return fail(err)
	case kind != websocket.TextMessage || !bytes.Equal(got, msg):
		return fail(fmt.Errorf("got %q (type %d), not %q", got, kind, msg))
	}
	return nil
}

// longLivedCloseWait bounds the close frames sent to the WebSockets at
// the end.
const longLivedCloseWait = time.Second

// close closes every WebSocket (a close frame, then the connection) and
// every event stream, and waits for the streams' readers to return. It
// does nothing the second time.
func (c *longLivedClients) close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	bye := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
	deadline := time.Now().Add(longLivedCloseWait)
	for _, conn := range c.ws {
		_ = conn.WriteControl(websocket.CloseMessage, bye, deadline) // a courtesy: the close follows
		if err := conn.Close(); err != nil {
			errs = append(errs, fmt.Errorf("bench: close a WebSocket: %w", err))
		}
	}
	for _, st := range c.streams {
		st.cancel()
	}
	for _, st := range c.streams {
		<-st.done
	}
	c.transport.CloseIdleConnections()
	return errors.Join(errs...)
}

// eventDelays returns the events received between from and to and their
// delivery delays' p99 and maximum, in milliseconds, and the count later
// than LongLivedLate. Call it once the streams are closed.
func (c *longLivedClients) eventDelays() (events int, p99, maxMS float64, late int) {
	var delays []time.Duration
	for _, st := range c.streams {
		for _, r := range st.events {
			if r.at.Before(c.from) || r.at.After(c.to) {
				continue
			}
			delays = append(delays, r.delay)
			if r.delay > LongLivedLate {
				late++
			}
		}
	}
	if len(delays) == 0 {
		return 0, 0, 0, 0
	}
	slices.Sort(delays)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	rank := int(math.Ceil(0.99*float64(len(delays)))) - 1 // nearest rank
	return len(delays), ms(delays[rank]), ms(delays[len(delays)-1]), late
}

// LongLivedRow is the longlived scenario's summary of one target at one
// N: medians over its runs.
type LongLivedRow struct {
	Target string `json:"target"`
	N      int    `json:"n"`
	Runs   int    `json:"runs"`
	// Behind counts the runs whose trivial load fell behind its
	// schedule.
	Behind int `json:"behind"`
	// Upgrades, Streams and Echoes are the WebSockets upgraded, the
	// event streams opened and the echoes back, of N each.
	Upgrades float64 `json:"upgrades"`
	Streams  float64 `json:"streams"`
	Echoes   float64 `json:"echoes"`
	// Goodput is the trivial load's, per second; P99 its latency in
	// milliseconds; Refused its requests refused unstarted, a count.
	Goodput float64 `json:"goodput"`
	P99     float64 `json:"p99_ms"`
	Refused float64 `json:"refused"`
	// EventP99 and EventMax are the events' delivery delays, in
	// milliseconds; LateEvents the count later than LongLivedLate.
	EventP99   float64 `json:"event_p99_ms"`
	EventMax   float64 `json:"event_max_ms"`
	LateEvents float64 `json:"late_events"`
	// RSSPerConn is the target's resident set grown per connection, in
	// bytes; ThreadsBefore and ThreadsAfter its threads before the
	// connections and with all of them open.
	RSSPerConn    float64 `json:"rss_per_conn"`
	ThreadsBefore float64 `json:"threads_before"`
	ThreadsAfter  float64 `json:"threads_after"`
	// HeapPerSocket and HeapPerStream are the live Go memory (heap
	// objects and goroutine stacks) each WebSocket and each event stream
	// added, in bytes; 0 when unmeasured.
	HeapPerSocket float64 `json:"heap_per_socket,omitempty"`
	HeapPerStream float64 `json:"heap_per_stream,omitempty"`
}

// longLivedRun is a longlived sample with its detail.
type longLivedRun = detailed[LongLivedDetail]

// longLivedKey is a row's target and N.
type longLivedKey struct {
	target string
	n      int
}

// Summarize returns one row per target and N of rep's longlived samples,
// by N, then in the order the targets first appear; nil when there are
// none.
func (*LongLived) Summarize(rep *bench.Report) ([]LongLivedRow, error) {
	runs, err := detailedRuns[LongLivedDetail](rep, "longlived")
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	rows := grouped(runs, func(r longLivedRun) longLivedKey { return longLivedKey{r.Target, r.detail.N} }, longLivedRow)
	slices.SortStableFunc(rows, func(a, b LongLivedRow) int { return a.N - b.N })
	return rows, nil
}

// longLivedRow computes the row of one target and N from its runs.
func longLivedRow(k longLivedKey, runs []longLivedRun) LongLivedRow {
	r := LongLivedRow{Target: k.target, N: k.n, Runs: len(runs)}
	med := func(of func(longLivedRun) float64) float64 {
		xs := make([]float64, len(runs))
		for i, run := range runs {
			xs[i] = of(run)
		}
		return report.Median(xs)
	}
	for _, run := range runs {
		if run.Behind {
			r.Behind++
		}
	}
	r.Upgrades = med(func(x longLivedRun) float64 { return float64(x.detail.Upgrades) })
	r.Streams = med(func(x longLivedRun) float64 { return float64(x.detail.Streams) })
	r.Echoes = med(func(x longLivedRun) float64 { return float64(x.detail.Echoes) })
	r.Goodput = med(func(x longLivedRun) float64 { return x.Rates.Goodput })
	r.P99 = med(func(x longLivedRun) float64 { return x.Latency.P99 })
	r.Refused = med(func(x longLivedRun) float64 { return float64(x.detail.Refused) })
	r.EventP99 = med(func(x longLivedRun) float64 { return x.detail.EventP99 })
	r.EventMax = med(func(x longLivedRun) float64 { return x.detail.EventMax })
	r.LateEvents = med(func(x longLivedRun) float64 { return float64(x.detail.LateEvents) })
	r.RSSPerConn = med(func(x longLivedRun) float64 { return x.detail.RSSPerConn })
	r.ThreadsBefore = med(func(x longLivedRun) float64 { return float64(x.detail.ThreadsBefore) })
	r.ThreadsAfter = med(func(x longLivedRun) float64 { return float64(x.detail.ThreadsAfter) })
	r.HeapPerSocket = med(func(x longLivedRun) float64 { return x.detail.HeapPerSocket })
	r.HeapPerStream = med(func(x longLivedRun) float64 { return x.detail.HeapPerStream })
	return r
}

// Rows are Summarize's, nil without longlived samples or when a sample's
// detail does not decode (WriteReport says which).
func (ll *LongLived) Rows(rep *bench.Report) any { return rowsOf(ll.Summarize(rep)) }

// WriteReport writes a table of rep's longlived samples, one row per
// target and N, after a line on the setup (the trivial load's, from the
// first sample). It writes nothing for a report without longlived
// samples.
func (ll *LongLived) WriteReport(w io.Writer, rep *bench.Report) error {
	runs, err := detailedRuns[LongLivedDetail](rep, "longlived")
	if err != nil {
		return err
	}
	rows, err := ll.Summarize(rep)
	if err != nil || len(rows) == 0 {
		return err
	}
	setup := runs[0].detail
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "\nlonglived: N idle WebSockets (%s, an echo inside the handler) and N event streams (%s, an event every %v) held open while %s is offered %.4g/s for %v\n",
		WebSocketPath, EventsPath, EventInterval, TrivialPath, setup.Rate, setup.Window)
	tw := report.NewTab(&buf)
	report.Line(tw, "target", "N", "upgrades", "SSE", "echoes", "goodput/s", "p99 ms", "refused",
		"event p99 ms", "event max ms", "late events", "RSS KiB/conn", "heap KiB/ws", "heap KiB/sse", "threads", "runs")
	count := func(v float64, n int) string { return fmt.Sprintf("%.0f/%d", v, n) }
	kib := func(b float64) string {
		if b == 0 {
			return "-" // a report from before the heap was measured
		}
		return fmt.Sprintf("%.1f", b/1024)
	}
	for _, r := range rows {
		report.Line(tw, r.Target, strconv.Itoa(r.N), count(r.Upgrades, r.N), count(r.Streams, r.N), count(r.Echoes, r.N),
			fmt.Sprintf("%.0f", r.Goodput), report.FormatMS(r.P99), fmt.Sprintf("%.0f", r.Refused),
			report.FormatMS(r.EventP99), report.FormatMS(r.EventMax), fmt.Sprintf("%.0f", r.LateEvents),
			fmt.Sprintf("%.1f", r.RSSPerConn/1024), kib(r.HeapPerSocket), kib(r.HeapPerStream),
			fmt.Sprintf("%.0f -> %.0f", r.ThreadsBefore, r.ThreadsAfter),
			fmt.Sprintf("%d/%d", r.Runs-r.Behind, r.Behind))
	}
	_ = tw.Flush() // into a bytes.Buffer
	buf.WriteString(strings.Join([]string{
		"upgrades, SSE: WebSockets upgraded and event streams whose first event came, within " + LongLivedOpenTimeout.String() + ", of N;",
		"echoes: messages echoed back within " + LongLivedEchoTimeout.String() + " on every WebSocket at the end of the window;",
		"goodput/s, p99 ms, refused: the trivial load's 2xx answers a second, their p99, and its requests refused unstarted (503), a count;",
		"event p99/max ms: the events' delivery delays during the window (receipt less the stamp); late events: those over " + LongLivedLate.String() + ";",
		"RSS KiB/conn: the target's resident set grown, over the 2N connections (freed pages Go has not yet returned count);",
		"heap KiB/ws, heap KiB/sse: the target's live Go memory (heap objects and goroutine stacks, after a collection) grown per WebSocket and per event stream;",
		"threads: the target's before the connections -> with all open;",
		"runs: kept/behind (the trivial load's generator fell behind its schedule); figures are medians over the runs.",
	}, "\n") + "\n")
	_, err = w.Write(buf.Bytes())
	return err
}
