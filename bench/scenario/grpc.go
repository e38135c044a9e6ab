package scenario

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
	"github.com/sluice-go/sluice/bench/report"
	"github.com/sluice-go/sluice/reject"
)

// Defaults of GRPC's zero fields.
const (
	// DefaultGRPCConns is the client connections (grpc.ClientConns, one
	// HTTP/2 connection each) the calls are spread over.
	DefaultGRPCConns = 4
	// DefaultGRPCMaxCalls is the sluice targets' concurrency gate, as
	// examples/grpc sets it (-max-calls).
	DefaultGRPCMaxCalls = 256
	// DefaultGRPCStreamMessages is the messages of one streamed call:
	// enough small messages that the stream's per-message cost, not its
	// set-up, decides its time.
	DefaultGRPCStreamMessages = 2000
	// DefaultGRPCRetryMultiple is the retry points' offered load.
	DefaultGRPCRetryMultiple = 2.0
)

// DefaultGRPCMultiples returns the unary points' offered loads when GRPC
// names none: 1x, 2x, 5x and 10x of each target's capacity.
func DefaultGRPCMultiples() []float64 { return []float64{1, 2, 5, 10} }

// GRPCRetryAttempts is the retry policy's maxAttempts (the first attempt
// and two retries).
const GRPCRetryAttempts = 3

// grpcStreamDeadline bounds one streamed call: it carries many messages,
// so the suite's deadline for one answer does not apply.
const grpcStreamDeadline = 10 * time.Second

// The grpc scenario's parts (Point.Part, GRPCDetail.Part).
const (
	// GRPCUnary offers unary calls open loop at a multiple of C.
	GRPCUnary = "unary"
	// GRPCStreaming streams: one server-streamed call of StreamMessages
	// after another on one connection, for the suite's Duration.
	GRPCStreaming = "stream"
	// GRPCRetry is GRPCUnary at RetryMultiple with grpc-go's retry
	// policy on (retryGRPCServiceConfig).
	GRPCRetry = "retry"
	// GRPCRetryNoPushback is GRPCRetry on a sluice target that refuses
	// without Retry-After, and so without grpc-retry-pushback-ms: the
	// client backs off by its policy alone. Sluice targets only.
	GRPCRetryNoPushback = "retry-nopushback"
)

// retryGRPCServiceConfig is the retry points' service config: a call
// answered UNAVAILABLE is tried again, GRPCRetryAttempts in all, after
// grpc-go's exponential backoff or the server's pushback.
var retryGRPCServiceConfig = `{"methodConfig":[{"name":[{"service":"` + GRPCService + `"}],` +
	`"retryPolicy":{"maxAttempts":` + strconv.Itoa(GRPCRetryAttempts) + `,"initialBackoff":"0.05s","maxBackoff":"0.5s",` +
	`"backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]}}]}`

// GRPC measures a gRPC service under overload: grpc-go's *grpc.Server
// with a hand-described service (GRPCForecast doing the suite's shape of
// work per call, GRPCStream streaming small messages), served by sluice
// (its handler, h2c), by net/http (its handler, h2c) and by grpc-go itself
// (TargetGRPCGo), and called by grpc-go's client over Conns connections.
//
// Each target's capacity C is a closed loop of unary calls (Calibrate).
// The points, each on a fresh target:
//
//   - unary at each of Multiples × C: calls arrive open loop (Poisson, or
//     constant with the suite's Constant), each with the suite's deadline;
//     counted are the calls answered OK (goodput), the others by gRPC
//     code, those carrying sluice's not-started marker (refused), and the
//     OK calls' latencies;
//   - stream: server-streamed messages a second, over calls of
//     StreamMessages one after another;
//   - retry at RetryMultiple × C with grpc-go's retry policy on
//     UNAVAILABLE (GRPCRetryAttempts attempts): the attempts per call
//     (amplification), counted by a client stats handler; on sluice
//     targets also without the retry pushback (GRPCRetryNoPushback).
type GRPC struct {
	// Multiples are the unary points' offered loads, in multiples of C;
	// default DefaultGRPCMultiples.
	Multiples []float64
	// RetryMultiple is the retry points' offered load; default
	// DefaultGRPCRetryMultiple.
	RetryMultiple float64
	// StreamMessages is the messages of a streamed call; default
	// DefaultGRPCStreamMessages.
	StreamMessages int
	// Conns is the client connections; default DefaultGRPCConns.
	Conns int
	// MaxCalls is the sluice targets' concurrency gate; default
	// DefaultGRPCMaxCalls.
	MaxCalls int

	x string // -grpc-x
}

// Name is "grpc".
func (*GRPC) Name() string { return "grpc" }

// Describe says what the scenario does, for the command's help.
func (*GRPC) Describe() string {
	return "a grpc-go service on sluice, on net/http over h2c and on grpc-go's own server, target " + TargetGRPCGo +
		": unary calls at 1x-10x, a stream, a retry storm at 2x with and without pushback: -grpc-x, -grpc-max-calls"
}

// Flags registers -grpc-x and -grpc-max-calls.
func (g *GRPC) Flags(fs *flag.FlagSet) {
	fs.StringVar(&g.x, "grpc-x", "", "the grpc scenario's unary loads in multiples of each target's capacity, comma-separated (default 1,2,5,10)")
	fs.IntVar(&g.MaxCalls, "grpc-max-calls", DefaultGRPCMaxCalls, "the grpc scenario's concurrency gate on the sluice targets, calls in flight")
}

// SuppliedTargets is TargetGRPCGo, which the scenario's hook serves.
func (*GRPC) SuppliedTargets() []string { return []string{TargetGRPCGo} }

// RunsOn leaves GRPCRetryNoPushback to the sluice targets, the ones with
// a pushback to take away.
func (*GRPC) RunsOn(p bench.Point, target string) bool {
	return p.Part != GRPCRetryNoPushback || strings.HasPrefix(target, "sluice")
}

// Check reads -grpc-x and fills in the defaults. The scenario calls over
// plain TCP (h2c) from connections of its own, so the suite's TLS,
// NewConns and Clients do not apply.
func (g *GRPC) Check(s *bench.SuiteConfig) error {
	if s.TLS || s.NewConns || s.Clients != 0 {
		return errors.New("bench: -tls, -newconns and -clients (SuiteConfig.TLS, NewConns, Clients) do not apply to the grpc scenario, which calls over h2c from connections of its own")
	}
	if err := readMultiples(&g.Multiples, "-grpc-x", g.x, DefaultGRPCMultiples()); err != nil {
		return err
	}
	if g.RetryMultiple == 0 {
		g.RetryMultiple = DefaultGRPCRetryMultiple
	}
	if g.StreamMessages == 0 {
		g.StreamMessages = DefaultGRPCStreamMessages
	}
	if g.Conns == 0 {
		g.Conns = DefaultGRPCConns
	}
	if g.MaxCalls == 0 {
		g.MaxCalls = DefaultGRPCMaxCalls
	}
	if g.StreamMessages < 1 || g.Conns < 1 || g.MaxCalls < 1 {
		return fmt.Errorf("bench: the grpc scenario's StreamMessages, Conns and MaxCalls must be positive, got %d, %d, %d", g.StreamMessages, g.Conns, g.MaxCalls)
	}
	return positiveFinite("grpc", setting{"RetryMultiple", g.RetryMultiple})
}

// shape is the scenario's shape: the suite's work, under a name of its
// own, so that its capacity (calls a second, Calibrate) is not another
// scenario's.
func (*GRPC) shape(s *bench.SuiteConfig) bench.Shape {
	return bench.Shape{Name: "grpc-" + s.Shape.Name, Spec: s.Shape.Spec}
}

// Points are the unary points, the stream, and the retry points.
func (g *GRPC) Points(s *bench.SuiteConfig) []bench.Point {
	sh := g.shape(s)
	var ps []bench.Point
	for _, m := range g.Multiples {
		ps = append(ps, bench.Point{Shape: sh, Spec: sh.Spec, Multiple: m, Part: GRPCUnary})
	}
	ps = append(ps, bench.Point{Shape: sh, Spec: sh.Spec, Part: GRPCStreaming})
	for _, part := range []string{GRPCRetry, GRPCRetryNoPushback} {
		ps = append(ps, bench.Point{Shape: sh, Spec: sh.Spec, Multiple: g.RetryMultiple, Part: part})
	}
	return ps
}

// child is the child process serving the scenario's service on target,
// refusing without pushback when noPushback is set.
func (g *GRPC) child(s *bench.SuiteConfig, target string, spec bench.HandlerSpec, noPushback bool) (bench.ChildSpec, error) {
	cs := bench.ChildSpec{Target: target, Handler: spec, Nice: bench.TargetNice, Quota: s.Quota}
	err := cs.SetHook(g.Name(), grpcChildConfig{MaxCalls: g.MaxCalls, NoPushback: noPushback})
	return cs, err
}

// Calibrate measures target's capacity for unary calls: closed loops of
// each of the suite's CalibrateConns concurrent calls in turn, over Conns
// connections, after the suite's warm-up; C is the best rate of calls
// answered OK within the deadline.
func (g *GRPC) Calibrate(ctx context.Context, s *bench.SuiteConfig, target string, sh bench.Shape) (capacity, cpu float64, err error) {
	cs, err := g.child(s, target, sh.Spec, false)
	if err != nil {
		return 0, 0, err
	}
	b, err := s.StartChildren(ctx, []bench.ChildSpec{cs})
	if err != nil {
		return 0, 0, err
	}
	cl, err := dialGRPC(b.URLs()[0], g.Conns, false)
	if err == nil {
		for _, n := range s.CalibrateConns {
			m := b.MeterCPU()
			rate, cerr := grpcClosedLoop(ctx, cl, n, s.Calibrate.Warmup, s.Calibrate.Duration, s.Deadline)
			tcpu, _, _ := m.Read()
			if cerr != nil {
				err = cerr
				break
			}
			if rate > capacity {
				capacity, cpu = rate, tcpu
			}
		}
		err = errors.Join(err, cl.close())
	}
	err = errors.Join(err, b.Stop())
	if err != nil {
		return 0, 0, fmt.Errorf("bench: calibrate %s for gRPC: %w", target, err)
	}
	if capacity <= 0 {
		return 0, 0, fmt.Errorf("bench: calibrate %s for gRPC: no call succeeded", target)
	}
	return capacity, cpu, nil
}

// grpcClosedLoop runs n callers, each making unary calls one after the
// other with deadline, for warmup and then d, and returns the calls that
// ended OK within d, a second.
func grpcClosedLoop(ctx context.Context, cl *grpcClients, n int, warmup, d, deadline time.Duration) (float64, error) {
	from := time.Now().Add(warmup)
	to := from.Add(d)
	var ok atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(to) {
				if cl.forecast(ctx, i, deadline).code == codes.OK {
					if end := time.Now(); end.After(from) && !end.After(to) {
						ok.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("bench: closed loop of gRPC calls: %w", err)
	}
	return float64(ok.Load()) / d.Seconds(), nil
}

// GRPCDetail is what a grpc sample records beyond the common figures
// (Sample.Detail). The sample's Rates count calls: Goodput the OK ones,
// Rejected those refused unstarted (sluice's marker), Failed the others;
// its Latency is the OK calls'.
type GRPCDetail struct {
	// Part is GRPCUnary, GRPCStreaming, GRPCRetry or GRPCRetryNoPushback.
	Part string `json:"part"`
	// Conns is the client connections the calls were spread over (one
	// for GRPCStreaming); StreamMessages the messages of a streamed call.
	Conns          int `json:"conns"`
	StreamMessages int `json:"stream_messages,omitempty"`
	// Calls are the calls made, OK those answered OK within the
	// deadline; LateOK those answered OK but seen by the caller past it
	// (a busy generator), which count as failed.
	Calls  int64 `json:"calls"`
	OK     int64 `json:"ok"`
	LateOK int64 `json:"late_ok,omitempty"`
	// Codes counts the calls not answered OK by their gRPC code's name
	// ("Unavailable", "DeadlineExceeded", ...).
	Codes map[string]int64 `json:"codes,omitempty"`
	// NotStarted counts the calls whose answer carried sluice's
	// not-started marker (reject.NotStartedHeader as metadata): refused
	// before the handler ran.
	NotStarted int64 `json:"not_started"`
	// Unknown is the error of the first call that ended UNKNOWN, whose
	// cause a refusal's code would not say.
	Unknown string `json:"unknown,omitempty"`
	// Attempts are the attempts the client made (a client stats
	// handler's Begin events), retries and transparent retries
	// included; Amplification is Attempts over Calls.
	Attempts      int64   `json:"attempts"`
	Amplification float64 `json:"amplification"`
	// Messages are the streamed messages received (GRPCStreaming), and
	// MessageRate them a second.
	Messages    int64   `json:"messages,omitempty"`
	MessageRate float64 `json:"message_rate,omitempty"`
}

// share returns the calls answered with code, over all calls.
func (d *GRPCDetail) share(code codes.Code) float64 {
	if d.Calls == 0 {
		return 0
	}
	return float64(d.Codes[code.String()]) / float64(d.Calls)
}

// other returns the share of calls neither OK within the deadline nor
// answered with one of the refusal codes: other codes, and LateOK.
func (d *GRPCDetail) other() float64 {
	if d.Calls == 0 {
		return 0
	}
	n := d.Calls - d.OK // LateOK among them: in Codes, no
	for _, c := range grpcRefusalCodes {
		n -= d.Codes[c.String()]
	}
	return float64(n) / float64(d.Calls)
}

// grpcRefusalCodes are the codes a refusal maps to (reject.Answer's
// GRPCCode), which the report counts apart.
var grpcRefusalCodes = []codes.Code{codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded}

// Run measures one point on a fresh target.
func (g *GRPC) Run(ctx context.Context, t *bench.Trial) (*bench.Sample, error) {
	part := t.Point.Part
	cs, err := g.child(t.Suite, t.Target, t.Point.Spec, part == GRPCRetryNoPushback)
	if err != nil {
		return nil, err
	}
	cs.Quota = t.Child().Quota
	proc, err := t.Start(ctx, cs)
	if err != nil {
		return nil, err
	}
	retry := part == GRPCRetry || part == GRPCRetryNoPushback
	cl, err := dialGRPC(proc.URL, g.Conns, retry)
	if err != nil {
		return nil, errors.Join(err, proc.Stop())
	}
	s := t.Sample()
	d := &GRPCDetail{Part: part, Conns: g.Conns}
	if part == GRPCStreaming {
		d.Conns, d.StreamMessages = 1, g.StreamMessages
	}
	m := bench.MeterCPU(proc)
	var res *grpcResult
	if part == GRPCStreaming {
		res, err = cl.stream(ctx, g.StreamMessages, t.Suite.Duration)
	} else {
		res, err = cl.open(ctx, grpcOffer{
			rate: t.Point.Multiple * t.Capacity, d: t.Suite.Duration, deadline: t.Suite.Deadline,
			poisson: !t.Suite.Constant, seed: t.Suite.Seed + uint64(t.Index),
		})
	}
	m.Stop(s)
	err = errors.Join(err, cl.close(), proc.Stop())
	if res == nil {
		return nil, err
	}
	res.fill(s, d, cl.attempts.Load())
	s.Server = proc.Stats
	s.Placement = proc.Placement
	s.Throttled = proc.Throttled
	return s, errors.Join(err, s.SetDetail(d))
}

// grpcClients are grpc-go client connections to one target, the calls
// spread over them in turn, and the attempts they made.
type grpcClients struct {
	conns    []*grpc.ClientConn
	attempts attemptCounter
}

// dialGRPC connects n clients to the target at base (an http:// URL),
// h2c, with the retry policy when retry is set.
func dialGRPC(base string, n int, retry bool) (*grpcClients, error) {
	addr := strings.TrimPrefix(base, "http://")
	cl := &grpcClients{}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(&cl.attempts),
	}
	if retry {
		opts = append(opts, grpc.WithDefaultServiceConfig(retryGRPCServiceConfig))
	}
	for range n {
		cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("bench: gRPC client of %s: %w", addr, err), cl.close())
		}
		cc.Connect()
		cl.conns = append(cl.conns, cc)
	}
	return cl, nil
}

// close closes every connection.
func (cl *grpcClients) close() error {
	var errs []error
	for _, cc := range cl.conns {
		if err := cc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("bench: close a gRPC client: %w", err))
		}
	}
	cl.conns = nil
	return errors.Join(errs...)
}

// grpcOutcome is how one call ended.
type grpcOutcome struct {
	code       codes.Code
	notStarted bool // the answer carried sluice's not-started marker
	// late marks an OK answer that the caller saw after its deadline
	// (the answer came in time, the generator took it up late): it
	// does not count as goodput.
	late    bool
	latency time.Duration
	err     error // a call that ended UNKNOWN: its error
}

// forecast makes one unary call on the i-th connection (mod their count)
// with deadline.
func (cl *grpcClients) forecast(ctx context.Context, i int, deadline time.Duration) grpcOutcome {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	var trailer metadata.MD
	start := time.Now()
	err := cl.conns[i%len(cl.conns)].Invoke(ctx, GRPCForecast, wrapperspb.String("Lisbon"), new(wrapperspb.StringValue), grpc.Trailer(&trailer))
	o := grpcOutcome{code: status.Code(err), latency: time.Since(start)}
	if err != nil {
		o.notStarted = slices.Contains(trailer.Get(reject.NotStartedHeader), "1")
	}
	if o.code == codes.Unknown {
		o.err = err
	}
	o.late = err == nil && o.latency > deadline
	return o
}

// grpcOffer is an open-loop load: rate calls a second for d, each with
// deadline, at Poisson or constant arrivals.
type grpcOffer struct {
	rate     float64
	d        time.Duration
	deadline time.Duration
	poisson  bool
	seed     uint64
}

// grpcResult is what a run's calls came to.
type grpcResult struct {
	mu         sync.Mutex
	calls, ok  int64
	notStarted int64
	unknown    string // the first UNKNOWN call's error (GRPCDetail.Unknown)
	lateOK     int64  // answered OK, seen past the deadline
	codes      map[string]int64
	latency    *hdrhistogram.Histogram // the OK calls', microseconds
	messages   int64
	elapsed    time.Duration // the sending window, or the streaming
	late       int64         // calls started more than the lag limit late
	maxLag     time.Duration
}

func newGRPCResult() *grpcResult {
	return &grpcResult{codes: make(map[string]int64), latency: hdrhistogram.New(1, 60_000_000, 3)}
}

// record counts one call's outcome.
func (r *grpcResult) record(o grpcOutcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if o.late {
		r.lateOK++
		return
	}
	if o.code == codes.OK {
		r.ok++
		_ = r.latency.RecordValue(o.latency.Microseconds()) // clamped by the deadline
		return
	}
	r.codes[o.code.String()]++
	if o.notStarted {
		r.notStarted++
	}
	if o.err != nil && r.unknown == "" {
		r.unknown = fmt.Sprintf("%v (not started: %v)", o.err, o.notStarted)
	}
}

// grpcLateShare is the share of calls started more than
// load.DefaultLagLimit after their schedule past which a run is Behind.
const grpcLateShare = 0.01

// fill puts the result into s and d, attempts being the client's.
func (r *grpcResult) fill(s *bench.Sample, d *GRPCDetail, attempts int64) {
	s.Requests = r.calls
	s.Rates = bench.RatesOf(r.calls, r.ok, r.notStarted, r.calls-r.ok-r.notStarted, r.elapsed)
	s.Latency = bench.PercentilesOf(r.latency)
	s.Late, s.MaxLag = r.late, r.maxLag
	s.Behind = r.calls > 0 && float64(r.late) > grpcLateShare*float64(r.calls)
	d.Calls, d.OK, d.LateOK, d.NotStarted, d.Attempts = r.calls, r.ok, r.lateOK, r.notStarted, attempts
	d.Unknown = r.unknown
	if len(r.codes) > 0 {
		d.Codes = r.codes
	}
	if r.calls > 0 {
		d.Amplification = float64(attempts) / float64(r.calls)
	}
	if r.messages > 0 {
		d.Messages = r.messages
		d.MessageRate = float64(r.messages) / r.elapsed.Seconds()
	}
}

// open offers o's load, a goroutine per call, and waits for the last
// answer.
func (cl *grpcClients) open(ctx context.Context, o grpcOffer) (*grpcResult, error) {
	if !(o.rate > 0) {
		return nil, fmt.Errorf("bench: gRPC load of %v calls a second", o.rate)
	}
	res := newGRPCResult()
	rng := rand.New(rand.NewPCG(o.seed, o.seed^0x9e3779b97f4a7c15))
	var wg sync.WaitGroup
	start := time.Now()
	var at float64 // the next call's offset, seconds
	for i := 0; ; i++ {
		if o.poisson {
			at += rng.ExpFloat64() / o.rate
		} else {
			at = float64(i) / o.rate
		}
		off := time.Duration(at * float64(time.Second))
		if off >= o.d || ctx.Err() != nil {
			break
		}
		if wait := time.Until(start.Add(off)); wait > 0 {
			time.Sleep(wait)
		} else if lag := -wait; lag > load.DefaultLagLimit {
			res.late++
			res.maxLag = max(res.maxLag, lag)
		}
		wg.Go(func() { res.record(cl.forecast(ctx, i, o.deadline)) })
	}
	res.elapsed = o.d
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("bench: gRPC load: %w", err)
	}
	return res, nil
}

// grpcStreamDesc is GRPCStream's descriptor as a client opens it.
var grpcStreamDesc = grpc.StreamDesc{StreamName: "Stream", ServerStreams: true}

// stream makes streamed calls of n messages on the first connection, one
// after the other, for d (the last one started before d ends runs to its
// end), and counts the messages; the calls' latencies are their whole
// lengths.
func (cl *grpcClients) stream(ctx context.Context, n int, d time.Duration) (*grpcResult, error) {
	res := newGRPCResult()
	start := time.Now()
	for time.Since(start) < d && ctx.Err() == nil {
		got, o := cl.streamOnce(ctx, n)
		res.messages += got
		res.record(o)
	}
	res.elapsed = time.Since(start)
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("bench: gRPC stream: %w", err)
	}
	return res, nil
}

// streamOnce makes one streamed call of n messages and returns the
// messages received and how the call ended (OK only with all n).
func (cl *grpcClients) streamOnce(ctx context.Context, n int) (int64, grpcOutcome) {
	ctx, cancel := context.WithTimeout(ctx, grpcStreamDeadline)
	defer cancel()
	start := time.Now()
	end := func(got int64, err error) (int64, grpcOutcome) {
		o := grpcOutcome{code: status.Code(err), latency: time.Since(start)}
		if err == nil && got != int64(n) {
			o.code = codes.DataLoss
		}
		return got, o
	}
	st, err := cl.conns[0].NewStream(ctx, &grpcStreamDesc, GRPCStream)
	if err != nil {
		return end(0, err)
	}
	if err := st.SendMsg(wrapperspb.UInt32(uint32(n))); err != nil {
		return end(0, err)
	}
	if err := st.CloseSend(); err != nil {
		return end(0, err)
	}
	var got int64
	msg := new(wrapperspb.UInt64Value)
	for {
		err := st.RecvMsg(msg)
		if errors.Is(err, io.EOF) {
			return end(got, nil)
		}
		if err != nil {
			return end(got, err)
		}
		got++
	}
}

// attemptCounter is a client stats handler that counts the attempts of
// calls: grpc-go begins each attempt, a retry's included, with a Begin.
type attemptCounter struct{ atomic.Int64 }

// TagRPC leaves ctx as it is.
func (*attemptCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

// HandleRPC counts a client's Begin.
func (c *attemptCounter) HandleRPC(_ context.Context, s stats.RPCStats) {
	if b, ok := s.(*stats.Begin); ok && b.IsClient() {
		c.Add(1)
	}
}

// TagConn leaves ctx as it is.
func (*attemptCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

// HandleConn ignores connection events.
func (*attemptCounter) HandleConn(context.Context, stats.ConnStats) {}

// GRPCRow is the grpc scenario's summary of one target at one point:
// medians over its kept runs (over all of them when none was kept).
type GRPCRow struct {
	Target   string  `json:"target"`
	Part     string  `json:"part"`
	Multiple float64 `json:"multiple,omitempty"`
	Runs     int     `json:"runs"`
	Behind   int     `json:"behind"`
	// Capacity is C, unary calls a second; Goodput is the OK calls a
	// second over C.
	Capacity float64 `json:"capacity"`
	Goodput  float64 `json:"goodput_c"`
	// Unavailable, Exhausted and Deadline are the shares of calls
	// answered UNAVAILABLE, RESOURCE_EXHAUSTED and DEADLINE_EXCEEDED;
	// Other those that failed otherwise; NotStarted those refused with
	// sluice's marker (of any code).
	Unavailable float64 `json:"unavailable"`
	Exhausted   float64 `json:"resource_exhausted"`
	Deadline    float64 `json:"deadline_exceeded"`
	Other       float64 `json:"other"`
	NotStarted  float64 `json:"not_started"`
	// P50 and P99 are the OK calls' latencies, in milliseconds (a whole
	// streamed call's for GRPCStreaming).
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	// Amplification is attempts per call (GRPCRetry,
	// GRPCRetryNoPushback); MessageRate streamed messages a second
	// (GRPCStreaming).
	Amplification float64 `json:"amplification,omitempty"`
	MessageRate   float64 `json:"message_rate,omitempty"`
}

// grpcRun is a grpc sample with its detail.
type grpcRun = detailed[GRPCDetail]

// grpcKey is a row's target, part and multiple.
type grpcKey struct {
	target, part string
	multiple     float64
}

// Summarize returns one row per target, part and multiple of rep's grpc
// samples: by part (unary, stream, retry, retry-nopushback), multiple,
// then the targets in report order; nil when there are none.
func (*GRPC) Summarize(rep *bench.Report) ([]GRPCRow, error) {
	runs, err := detailedRuns[GRPCDetail](rep, "grpc")
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	rows := grouped(runs, func(r grpcRun) grpcKey {
		return grpcKey{r.Target, r.detail.Part, multipleKey(r.Multiple)}
	}, grpcRow)
	order := []string{GRPCUnary, GRPCStreaming, GRPCRetry, GRPCRetryNoPushback}
	slices.SortStableFunc(rows, func(a, b GRPCRow) int {
		if pa, pb := slices.Index(order, a.Part), slices.Index(order, b.Part); pa != pb {
			return pa - pb
		}
		switch {
		case a.Multiple < b.Multiple:
			return -1
		case a.Multiple > b.Multiple:
			return 1
		}
		return 0
	})
	return rows, nil
}

// multipleKey rounds a multiple so that equal ones up to float noise
// group together.
func multipleKey(m float64) float64 { return math.Round(m*1e6) / 1e6 }

// grpcRow computes the row of one key from its runs.
func grpcRow(k grpcKey, runs []grpcRun) GRPCRow {
	r := GRPCRow{Target: k.target, Part: k.part, Multiple: k.multiple, Runs: len(runs)}
	kept := slices.DeleteFunc(slices.Clone(runs), func(x grpcRun) bool { return x.Behind })
	r.Behind = len(runs) - len(kept)
	if len(kept) == 0 {
		kept = runs
	}
	med := func(of func(grpcRun) float64) float64 {
		xs := make([]float64, len(kept))
		for i, x := range kept {
			xs[i] = of(x)
		}
		return report.Median(xs)
	}
	r.Capacity = med(func(x grpcRun) float64 { return x.Capacity })
	r.Goodput = med(func(x grpcRun) float64 {
		if x.Capacity <= 0 {
			return 0
		}
		return x.Rates.Goodput / x.Capacity
	})
	r.Unavailable = med(func(x grpcRun) float64 { return x.detail.share(codes.Unavailable) })
	r.Exhausted = med(func(x grpcRun) float64 { return x.detail.share(codes.ResourceExhausted) })
	r.Deadline = med(func(x grpcRun) float64 { return x.detail.share(codes.DeadlineExceeded) })
	r.Other = med(func(x grpcRun) float64 { return x.detail.other() })
	r.NotStarted = med(func(x grpcRun) float64 {
		if x.detail.Calls == 0 {
			return 0
		}
		return float64(x.detail.NotStarted) / float64(x.detail.Calls)
	})
	r.P50 = med(func(x grpcRun) float64 { return x.Latency.P50 })
	r.P99 = med(func(x grpcRun) float64 { return x.Latency.P99 })
	r.Amplification = med(func(x grpcRun) float64 { return x.detail.Amplification })
	r.MessageRate = med(func(x grpcRun) float64 { return x.detail.MessageRate })
	return r
}

// Rows are Summarize's, nil without grpc samples or when a sample's
// detail does not decode (WriteReport says which).
func (g *GRPC) Rows(rep *bench.Report) any { return rowsOf(g.Summarize(rep)) }

// WriteReport writes the grpc scenario's tables: the unary points, the
// stream, and the retry points. It writes nothing for a report without
// grpc samples.
func (g *GRPC) WriteReport(w io.Writer, rep *bench.Report) error {
	runs, err := detailedRuns[GRPCDetail](rep, "grpc")
	if err != nil {
		return err
	}
	rows, err := g.Summarize(rep)
	if err != nil || len(rows) == 0 {
		return err
	}
	conns, messages := 0, 0
	for _, r := range runs {
		if r.detail.Part == GRPCStreaming {
			messages = r.detail.StreamMessages
		} else {
			conns = r.detail.Conns
		}
	}
	var buf bytes.Buffer
	pct := func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }
	kept := func(r GRPCRow) string { return fmt.Sprintf("%d/%d", r.Runs-r.Behind, r.Behind) }
	section := func(part, title string, head []string, line func(GRPCRow) []string) {
		if !slices.ContainsFunc(rows, func(r GRPCRow) bool { return r.Part == part }) {
			return
		}
		buf.WriteString("\n" + title + "\n")
		tw := report.NewTab(&buf)
		report.Line(tw, head...)
		for _, r := range rows {
			if r.Part == part {
				report.Line(tw, line(r)...)
			}
		}
		_ = tw.Flush() // into a bytes.Buffer
	}
	codeCols := []string{"unavailable", "exhausted", "deadline", "other", "not started"}
	codeVals := func(r GRPCRow) []string {
		return []string{pct(r.Unavailable), pct(r.Exhausted), pct(r.Deadline), pct(r.Other), pct(r.NotStarted)}
	}
	section(GRPCUnary, fmt.Sprintf("grpc, unary calls open loop over %d connections (%s)", conns, GRPCForecast),
		slices.Concat([]string{"x", "target", "C calls/s", "goodput/C"}, codeCols, []string{"p50 ms", "p99 ms", "runs"}),
		func(r GRPCRow) []string {
			return slices.Concat([]string{fmt.Sprintf("%gx", r.Multiple), r.Target, fmt.Sprintf("%.0f", r.Capacity), fmt.Sprintf("%.2f", r.Goodput)},
				codeVals(r), []string{report.FormatMS(r.P50), report.FormatMS(r.P99), kept(r)})
		})
	section(GRPCStreaming, fmt.Sprintf("grpc, server-streamed calls of %d small messages, one after the other on one connection", messages),
		[]string{"target", "messages/s", "call p50 ms", "call p99 ms", "failed", "runs"},
		func(r GRPCRow) []string {
			return []string{r.Target, fmt.Sprintf("%.0f", r.MessageRate), report.FormatMS(r.P50), report.FormatMS(r.P99),
				pct(r.Unavailable + r.Exhausted + r.Deadline + r.Other), kept(r)}
		})
	retryRow := func(r GRPCRow) []string {
		return slices.Concat([]string{fmt.Sprintf("%gx", r.Multiple), r.Target, fmt.Sprintf("%.2f", r.Amplification), fmt.Sprintf("%.2f", r.Goodput)},
			codeVals(r), []string{report.FormatMS(r.P99), kept(r)})
	}
	retryHead := slices.Concat([]string{"x", "target", "attempts/call", "goodput/C"}, codeCols, []string{"p99 ms", "runs"})
	section(GRPCRetry, fmt.Sprintf("grpc, retry storm: grpc-go's retry policy on UNAVAILABLE, %d attempts at most, the server's pushback honoured", GRPCRetryAttempts),
		retryHead, retryRow)
	section(GRPCRetryNoPushback, "grpc, retry storm without pushback: the sluice targets refusing with no Retry-After (no grpc-retry-pushback-ms)",
		retryHead, retryRow)
	buf.WriteString(strings.Join([]string{
		"goodput/C: calls answered OK a second (each within the deadline) over the target's C, a closed loop of unary calls;",
		"unavailable, exhausted, deadline: the shares of calls answered UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED; other: any other failure, or OK seen past the deadline;",
		"not started: calls refused with sluice's not-started marker (any code); latencies are the OK calls';",
		"attempts/call: the client's attempts (retries included) over its calls; runs: kept/behind (the generator fell behind its schedule).",
	}, "\n") + "\n")
	_, err = w.Write(buf.Bytes())
	return err
}
