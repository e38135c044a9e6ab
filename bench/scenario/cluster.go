package scenario

import (
	"bytes"
	"context"
	"encoding/json"
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
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
	"github.com/sluice-go/sluice/bench/report"
	"github.com/sluice-go/sluice/client"
)

// The parts of the cluster scenario, as in ClusterDetail.Part and
// bench.Point.Part, in the order it runs them on each target: the first
// three are its clients, offered Cluster.Multiple of the cluster's
// capacity; the last kills a backend and brings it back.
const (
	// ClusterNone is a client that does not retry: round robin, one
	// attempt, no breakers.
	ClusterNone = "none"
	// ClusterNaive retries at once, anywhere, without a budget: round
	// robin, Cluster.NaiveAttempts attempts, no breakers (package client
	// with RoundRobin, Budget.Unlimited and RetrySameBackend).
	ClusterNaive = "naive"
	// ClusterSluice is package client with its defaults (retry elsewhere
	// within the budget, power of two choices, breakers), except its
	// breakers' Cluster.Breaker.
	ClusterSluice = "sluice"
	// ClusterKill is ClusterSluice at Cluster.KillMultiple, while one
	// fast backend is killed (SIGKILL) and started again on its address.
	ClusterKill = "kill"
)

// clusterParts are the parts, in the order the scenario runs them.
var clusterParts = []string{ClusterNone, ClusterNaive, ClusterSluice, ClusterKill}

// ClusterShape is the name of the cluster scenario's handler shape (in
// bench.Sample.Shape): a shape of its own, so that the suite measures the
// capacity of the whole cluster for it (Cluster.Calibrate), not that of
// one target.
const ClusterShape = "cluster"

// The classes of the kill part's requests (bench.Sample.Classes), by what
// the killed backend's breaker was when the request was sent.
const (
	// KillBefore: before the kill.
	KillBefore = "before"
	// KillDead: killed, its breaker not open yet.
	KillDead = "dead"
	// KillOpen: its breaker open or half-open (the backend may be back).
	KillOpen = "open"
	// KillAfter: its breaker closed again.
	KillAfter = "after"
)

// killClasses are the kill part's classes, indexed by its phases.
var killClasses = []string{KillBefore, KillDead, KillOpen, KillAfter}

// The kill part's phases, indexes in killClasses.
const (
	phaseBefore int32 = iota
	phaseDead
	phaseOpen
	phaseAfter
)

// clusterBackends is the number of backends; the last is the slow one.
const clusterBackends = 3

// Defaults of Cluster's zero fields.
const (
	DefaultClusterCPU           = time.Millisecond
	DefaultClusterSlow          = 3.0
	DefaultClusterMultiple      = 1.5
	DefaultClusterKillMultiple  = 0.4
	DefaultClusterDown          = 2 * time.Second
	DefaultClusterNaiveAttempts = 1000
)

// maxClusterMultiple bounds -cluster-x.
const maxClusterMultiple = 1000

// Cluster measures clients in front of a cluster: three backends of the
// target, each in a child process of its own (bench.Backends), serving the
// weather handler with CPU of busy work per request and no database, the
// last one Slow times as much; sluice targets send the load hint
// (server.Config.LoadHint). The backends share the target CPUs of the
// suite, or split them when there are at least three. Each part starts
// the cluster afresh:
//
//   - none, naive, sluice: one client each (ClusterNone, ClusterNaive,
//     ClusterSluice), through which the generator offers Multiple of the
//     cluster's capacity C for the suite's Duration, open loop. C is
//     measured once per repeat, before the parts: the three backends
//     calibrated at the same time, C the best sum of their goodputs.
//   - kill: sluice's client at KillMultiple of C; after KillAfter the
//     first backend is killed with SIGKILL, Down later it is started again
//     on its address, and the load goes on for After. Its breaker's state
//     changes are timed through client.Config.OnStateChange.
type Cluster struct {
	// CPU is the busy work per request of the fast backends' handler;
	// default DefaultClusterCPU. Slow multiplies it for the slow backend;
	// default DefaultClusterSlow.
	CPU  time.Duration
	Slow float64
	// Multiple is the load offered to the three clients, in multiples of
	// C; default DefaultClusterMultiple.
	Multiple float64
	// KillMultiple is the kill part's load, in multiples of C; default
	// DefaultClusterKillMultiple, under what the two backends left can
	// serve.
	KillMultiple float64
	// KillAfter is when the kill part kills its backend, from the start
	// of its load; zero means the breakers' window (10 s by default), so
	// that the breaker has a full window of successes behind it.
	KillAfter time.Duration
	// Down is how long the backend stays dead; default
	// DefaultClusterDown.
	Down time.Duration
	// After is how long the load goes on once the backend is back; zero
	// means two probe intervals (the breakers' OpenFor) and one second.
	After time.Duration
	// NaiveAttempts is the naive client's attempts per request; default
	// DefaultClusterNaiveAttempts: the deadline ends a request's retries
	// first.
	NaiveAttempts int
	// Breaker configures the breakers of sluice's client (the sluice and
	// kill parts); the zero value is package client's defaults.
	Breaker client.BreakerConfig
	// Quotas, when set, runs each backend in a CPU quota of its own (the
	// first backend's first), one per backend, as containers with CPU
	// limits: the backends then serve the same handler, and the smallest
	// quota makes the slow one (Slow does not apply). It gives backends of
	// independent capacities on a machine with fewer CPUs than backends.
	// Needs Linux and root (bench.Quota).
	Quotas []bench.Quota

	multiple *float64 // -cluster-x, set by Flags
	quotas   string   // -cluster-quotas
}

// Name is "cluster".
func (*Cluster) Name() string { return "cluster" }

// Describe says what the scenario does, for the command's help.
func (*Cluster) Describe() string {
	return "3 backends, one slow, through 3 clients; then one killed and back: -cluster-x, -cluster-quotas"
}

// Flags registers -cluster-x.
func (c *Cluster) Flags(fs *flag.FlagSet) {
	c.multiple = new(float64)
	fs.Float64Var(c.multiple, "cluster-x", DefaultClusterMultiple, "the cluster scenario's load through each client, in multiples of the cluster's capacity")
	fs.StringVar(&c.quotas, "cluster-quotas", "", "the cluster scenario's backends each in a CPU quota of its own, CPUs[/period], one per backend (for example 0.3,0.3,0.1: the small one is the slow one); needs root")
}

// Check reads -cluster-x, fills in the defaults of the zero fields and
// checks each. The scenario starts its backends and sends through its
// clients its own way, so the suite's TLS, NewConns and Clients do not
// apply.
func (c *Cluster) Check(s *bench.SuiteConfig) error {
	if s.TLS || s.NewConns || s.Clients != 0 {
		return errors.New("bench: -tls, -newconns and -clients (SuiteConfig.TLS, NewConns, Clients) do not apply to the cluster scenario, which starts its backends and sends through its clients its own way")
	}
	if c.multiple != nil {
		if m := *c.multiple; !(m > 0) || m > maxClusterMultiple {
			return fmt.Errorf("-cluster-x must be in (0, %d], got %v", maxClusterMultiple, m)
		}
		c.Multiple = *c.multiple
	}
	if c.quotas != "" {
		qs, err := bench.ParseQuotas(c.quotas)
		if err != nil {
			return fmt.Errorf("-cluster-quotas: %w", err)
		}
		c.Quotas = qs
	}
	if len(c.Quotas) > 0 {
		if len(c.Quotas) != clusterBackends {
			return fmt.Errorf("bench: the cluster scenario's Quotas (-cluster-quotas) needs one quota per backend, %d, got %d", clusterBackends, len(c.Quotas))
		}
		for _, q := range c.Quotas {
			if err := q.Check(); err != nil {
				return fmt.Errorf("-cluster-quotas: %w", err)
			}
		}
		if s.Quota != nil {
			return errors.New("bench: the cluster scenario's Quotas (-cluster-quotas) and the suite's Quota (-quota) do not go together")
		}
	}
	if c.CPU == 0 {
		c.CPU = DefaultClusterCPU
	}
	if c.Slow == 0 {
		c.Slow = DefaultClusterSlow
	}
	if c.Multiple == 0 {
		c.Multiple = DefaultClusterMultiple
	}
	if c.KillMultiple == 0 {
		c.KillMultiple = DefaultClusterKillMultiple
	}
	if c.Down == 0 {
		c.Down = DefaultClusterDown
	}
	if c.NaiveAttempts == 0 {
		c.NaiveAttempts = DefaultClusterNaiveAttempts
	}
	if err := positiveFinite("cluster", setting{"Slow", c.Slow}, setting{"Multiple (-cluster-x)", c.Multiple}, setting{"KillMultiple", c.KillMultiple}); err != nil {
		return err
	}
	switch {
	case c.CPU < 0 || c.KillAfter < 0 || c.Down < 0 || c.After < 0:
		return fmt.Errorf("bench: the cluster scenario's CPU, KillAfter, Down and After must not be negative, got %v, %v, %v, %v", c.CPU, c.KillAfter, c.Down, c.After)
	case c.NaiveAttempts < 1:
		return fmt.Errorf("bench: the cluster scenario's NaiveAttempts must be positive, got %d", c.NaiveAttempts)
	}
	if c.KillAfter == 0 {
		c.KillAfter = orDefault(c.Breaker.Window, client.DefaultBreakerWindow)
	}
	if c.After == 0 {
		c.After = 2*c.probeInterval() + time.Second
	}
	return nil
}

// orDefault returns d, or def when d is not positive.
func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// probeInterval is how long the breakers of sluice's client stay open
// before they let probes through.
func (c *Cluster) probeInterval() time.Duration {
	return orDefault(c.Breaker.OpenFor, client.DefaultBreakerOpenFor)
}

// shape is the scenario's handler shape: the fast backends'.
func (c *Cluster) shape() bench.Shape {
	return bench.Shape{Name: ClusterShape, Spec: bench.HandlerSpec{CPU: c.CPU}}
}

// children returns the backends' child processes for target: the same
// handler, the last one Slow times slower, or, with Quotas, each in its
// quota.
func (c *Cluster) children(s *bench.SuiteConfig, target string) []bench.ChildSpec {
	cs := make([]bench.ChildSpec, clusterBackends)
	for i := range cs {
		cs[i] = bench.ChildSpec{Target: target, Nice: bench.TargetNice, LoadHint: true, Handler: bench.HandlerSpec{CPU: c.CPU}, Quota: s.Quota}
		if len(c.Quotas) > 0 {
			cs[i].Quota = &c.Quotas[i]
		}
	}
	if len(c.Quotas) == 0 {
		cs[clusterBackends-1].Handler.CPU = time.Duration(float64(c.CPU) * c.Slow)
	}
	return cs
}

// slow reports whether backend i is the slow one: the last, or with Quotas
// the one with the smallest quota.
func (c *Cluster) slow(i int) bool {
	if len(c.Quotas) == 0 {
		return i == clusterBackends-1
	}
	least, most := c.Quotas[0].CPUs, c.Quotas[0].CPUs
	for _, q := range c.Quotas {
		least, most = min(least, q.CPUs), max(most, q.CPUs)
	}
	return c.Quotas[i].CPUs == least && least < most
}

// window is the sending window of a part.
func (c *Cluster) window(s *bench.SuiteConfig, part string) time.Duration {
	if part == ClusterKill {
		return c.KillAfter + c.Down + c.After
	}
	return s.Duration
}

// Points are the four parts, on ClusterShape: the clients at Multiple of
// C for the suite's Duration, the kill part at KillMultiple for KillAfter
// + Down + After.
func (c *Cluster) Points(s *bench.SuiteConfig) []bench.Point {
	sh := c.shape()
	var ps []bench.Point
	for _, part := range clusterParts {
		p := bench.Point{Shape: sh, Spec: sh.Spec, Multiple: c.Multiple, Part: part, Window: c.window(s, part)}
		if part == ClusterKill {
			p.Multiple = c.KillMultiple
		}
		ps = append(ps, p)
	}
	return ps
}

// start starts the target's backends.
func (c *Cluster) start(ctx context.Context, s *bench.SuiteConfig, target string) (*bench.Backends, error) {
	return s.StartChildren(ctx, c.children(s, target))
}

// Calibrate measures the cluster's capacity on fresh backends
// (bench.SuiteConfig.CalibrateBackends): C is the best sum of the three
// backends' goodputs, calibrated at the same time.
func (c *Cluster) Calibrate(ctx context.Context, s *bench.SuiteConfig, target string, _ bench.Shape) (capacity, cpu float64, err error) {
	b, err := c.start(ctx, s, target)
	if err != nil {
		return 0, 0, err
	}
	return s.CalibrateBackends(ctx, target, b)
}

// ClusterDetail is what a cluster sample records beyond the common figures
// (Sample.Detail). The sample's rates and latencies are the generator's:
// each request as the client returned it, after its retries; its Capacity
// is the cluster's.
type ClusterDetail struct {
	// Part is ClusterNone, ClusterNaive, ClusterSluice or ClusterKill.
	Part string `json:"part"`
	// Backends are the cluster's backends, the slow one last.
	Backends []ClusterBackend `json:"backends"`
	// Requests, Attempts, Retries, BudgetDenied and NoBackend are the
	// client's counters (client.Stats) at the end of the run.
	Requests     int64 `json:"requests"`
	Attempts     int64 `json:"attempts"`
	Retries      int64 `json:"retries"`
	BudgetDenied int64 `json:"budget_denied"`
	NoBackend    int64 `json:"no_backend"`
	// Amplification is Attempts over Requests: the requests the backends
	// were sent per request offered.
	Amplification float64 `json:"amplification"`
	// Kill is set for the kill part.
	Kill *ClusterKillDetail `json:"kill,omitempty"`
}

// ClusterBackend is one backend of a cluster run, as the client counted
// it.
type ClusterBackend struct {
	Handler bench.HandlerSpec `json:"handler"`
	Slow    bool              `json:"slow,omitempty"`
	// Killed marks the kill part's victim.
	Killed bool `json:"killed,omitempty"`
	// Sent counts the attempts sent to it; Rejected those it refused
	// unstarted; Failed those that failed (errors, server errors, past
	// the deadline); Served the rest, its answers.
	Sent     int64 `json:"sent"`
	Rejected int64 `json:"rejected"`
	Failed   int64 `json:"failed"`
	Served   int64 `json:"served"`
	// Server is the backend's own counters, as it reported them when it
	// stopped (none for the killed one's first life).
	Server json.RawMessage `json:"server,omitempty"`
	// Throttled is what the backend's CPU quota did to it (Cluster.Quotas),
	// nil without one.
	Throttled *bench.Throttled `json:"throttled,omitempty"`
}

// ClusterKillDetail is what the kill part measured. Times are from the start of
// the load.
type ClusterKillDetail struct {
	// KilledAt is when the backend was killed; ReturnedAt when it listened
	// again.
	KilledAt   time.Duration `json:"killed_at"`
	ReturnedAt time.Duration `json:"returned_at"`
	// ProbeInterval is the breakers' OpenFor.
	ProbeInterval time.Duration `json:"probe_interval"`
	// Transitions are the killed backend's breaker's state changes.
	Transitions []ClusterTransition `json:"transitions"`
	// Opened reports that the breaker opened after the kill, OpenAfter
	// how long after it.
	Opened    bool          `json:"opened"`
	OpenAfter time.Duration `json:"open_after"`
	// Closed reports that it closed again after the return, ClosedAfter
	// how long after it.
	Closed      bool          `json:"closed"`
	ClosedAfter time.Duration `json:"closed_after"`
}

// ClusterTransition is a breaker's change of state.
type ClusterTransition struct {
	At   time.Duration `json:"at"`
	From string        `json:"from"`
	To   string        `json:"to"`
}

// client returns the client of a part over the backends at urls, sending
// on base.
func (c *Cluster) client(part string, urls []string, base http.RoundTripper, onChange func(string, client.State, client.State)) (*client.Transport, error) {
	cc := client.Config{Balancer: client.BalancerConfig{Backends: urls}, Base: base}
	switch part {
	case ClusterNone:
		cc.Balancer.RoundRobin = true
		cc.Retry.MaxAttempts = 1
		cc.Breaker.Disabled = true
	case ClusterNaive:
		cc.Balancer.RoundRobin = true
		cc.Retry = client.RetryConfig{
			MaxAttempts:      c.NaiveAttempts,
			RetrySameBackend: true,
			Budget:           client.BudgetConfig{Unlimited: true},
			// Whatever failed is retried at once too.
			RetryStarted:   true,
			BackoffInitial: time.Nanosecond,
			BackoffMax:     time.Nanosecond,
		}
		cc.Breaker.Disabled = true
	default:
		cc.Breaker = c.Breaker
		cc.OnStateChange = onChange
	}
	return client.New(cc)
}

// killer runs the kill part's kill and return, and follows the victim's
// breaker.
type killer struct {
	victim string // the backend's base URL
	start  time.Time
	phase  atomic.Int32 // phaseBefore, phaseDead, phaseOpen or phaseAfter

	mu   sync.Mutex
	info ClusterKillDetail
}

// onStateChange is the client's OnStateChange.
func (k *killer) onStateChange(backend string, from, to client.State) {
	if backend != k.victim {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.info.Transitions = append(k.info.Transitions, ClusterTransition{At: time.Since(k.start), From: from.String(), To: to.String()})
	if k.phase.Load() == phaseBefore {
		return // not killed yet
	}
	if to == client.Closed {
		k.phase.Store(phaseAfter)
	} else {
		k.phase.Store(phaseOpen)
	}
}

// classify is the generator's Classify: the phase when request i is sent.
func (k *killer) classify(int) (string, http.Header) {
	return killClasses[k.phase.Load()], nil
}

// run kills backend 0 of b c.KillAfter after the start, and starts it
// again c.Down later.
func (k *killer) run(ctx context.Context, c *Cluster, b *bench.Backends) error {
	wait := func(at time.Duration) error {
		t := time.NewTimer(time.Until(k.start.Add(at)))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	if err := wait(c.KillAfter); err != nil {
		return err
	}
	k.mu.Lock()
	k.info.KilledAt = time.Since(k.start)
	k.phase.Store(phaseDead)
	k.mu.Unlock()
	if err := b.Kill(0); err != nil {
		return err
	}
	if err := wait(c.KillAfter + c.Down); err != nil {
		return err
	}
	if err := b.Restart(ctx, 0, k.victim); err != nil {
		return err
	}
	k.mu.Lock()
	k.info.ReturnedAt = time.Since(k.start)
	k.mu.Unlock()
	return nil
}

// result returns what the kill part measured.
func (k *killer) result(probe time.Duration) *ClusterKillDetail {
	k.mu.Lock()
	defer k.mu.Unlock()
	r := k.info
	r.Transitions = slices.Clone(r.Transitions)
	r.ProbeInterval = probe
	for _, t := range r.Transitions {
		if !r.Opened && t.To == client.Open.String() && t.At >= r.KilledAt {
			r.Opened, r.OpenAfter = true, t.At-r.KilledAt
		}
		if r.ReturnedAt > 0 && !r.Closed && t.To == client.Closed.String() && t.At >= r.ReturnedAt {
			r.Closed, r.ClosedAfter = true, t.At-r.ReturnedAt
		}
	}
	return &r
}

// Run runs one part on fresh backends: the generator offers the part's
// multiple of the cluster's C through the part's client for the part's
// window; in the kill part, the first backend is killed and brought back
// meanwhile and each request is classed by its breaker's state.
func (c *Cluster) Run(ctx context.Context, t *bench.Trial) (s *bench.Sample, err error) {
	cfg, p := t.Suite, t.Point
	b, err := c.start(ctx, cfg, t.Target)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, b.Stop()) }()
	urls := b.URLs()
	rate := p.Multiple * t.Capacity
	// Connections per backend: as many as the whole load could have in
	// flight within the deadline (Little's law, as load.Run derives
	// Conns).
	conns := min(max(int(math.Ceil(rate*cfg.Deadline.Seconds())), 1), load.MaxConns)
	base := &http.Transport{
		Proxy:               nil, // loopback: never through a proxy
		MaxConnsPerHost:     conns,
		MaxIdleConnsPerHost: conns,
		MaxIdleConns:        clusterBackends * conns,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	defer base.CloseIdleConnections()
	var k *killer
	onChange := func(string, client.State, client.State) {}
	if p.Part == ClusterKill {
		k = &killer{victim: urls[0]}
		onChange = k.onStateChange
	}
	tr, err := c.client(p.Part, urls, base, onChange)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, tr.Close()) }()
	rc := load.Config{
		URL:      urls[0] + bench.WeatherPath, // the client sends it to the backend it picks
		Rate:     rate,
		Duration: c.window(cfg, p.Part),
		Deadline: cfg.Deadline,
		Seed:     cfg.Seed + uint64(t.Index),
		Client:   &http.Client{Transport: tr},
	}
	if !cfg.Constant {
		rc.Arrival = load.Poisson
	}
	killed := make(chan error, 1)
	kctx, stopKiller := context.WithCancel(ctx)
	defer stopKiller()
	s = t.Sample()
	m := b.MeterCPU()
	t0 := time.Now()
	if k != nil {
		rc.Classify = k.classify
		k.start = t0
		go func() { killed <- k.run(kctx, c, b) }()
	}
	res, err := load.Run(ctx, rc)
	if k != nil {
		if err != nil {
			stopKiller()
		}
		err = errors.Join(err, <-killed)
	}
	m.Stop(s)
	if k != nil {
		s.TargetCPU = 0 // a killed backend's CPU time is lost with it
	}
	st := tr.Stats()
	// Closed before the backends stop, which would wait for them.
	base.CloseIdleConnections()
	if res == nil {
		return nil, err
	}
	bench.Fill(s, res)
	d := ClusterDetail{
		Part: p.Part, Requests: st.Requests, Attempts: st.Attempts, Retries: st.Retries,
		BudgetDenied: st.BudgetDenied, NoBackend: st.NoBackend,
	}
	if st.Requests > 0 {
		d.Amplification = float64(st.Attempts) / float64(st.Requests)
	}
	handlers := b.Handlers()
	for i, bs := range st.Backends {
		d.Backends = append(d.Backends, ClusterBackend{
			Handler: handlers[i], Slow: c.slow(i), Killed: k != nil && i == 0,
			Sent: bs.Sent, Rejected: bs.Rejected, Failed: bs.Failed, Served: bs.Sent - bs.Rejected - bs.Failed,
		})
	}
	if k != nil {
		d.Kill = k.result(c.probeInterval())
	}
	// The backends' own counters come with their stop.
	err = errors.Join(err, b.Stop())
	stats, throttled := b.Stats(), b.Throttled()
	for i := range d.Backends {
		d.Backends[i].Server, d.Backends[i].Throttled = stats[i], throttled[i]
	}
	return s, errors.Join(err, s.SetDetail(d))
}

// ClusterRow sums up the runs of one client of the cluster scenario (or
// its kill part) for one target: medians over the kept runs (those whose
// generator kept its schedule), or over all of them when none was kept.
type ClusterRow struct {
	Target string `json:"target"`
	// Part is the client (ClusterNone, ClusterNaive, ClusterSluice) or
	// ClusterKill.
	Part   string `json:"part"`
	Runs   int    `json:"runs"`
	Behind int    `json:"behind"`
	// Capacity is the cluster's C, Multiple the load offered in multiples
	// of it.
	Capacity float64 `json:"capacity"`
	Multiple float64 `json:"multiple"`
	// Offered and Goodput are per second; GoodputFrac is the median of
	// each run's goodput over its C; the fractions are of the offered
	// load; latencies in milliseconds.
	Offered      float64 `json:"offered"`
	Goodput      float64 `json:"goodput"`
	GoodputFrac  float64 `json:"goodput_frac"`
	RejectedFrac float64 `json:"rejected_frac"`
	FailedFrac   float64 `json:"failed_frac"`
	P50          float64 `json:"p50_ms"`
	P99          float64 `json:"p99_ms"`
	// Amplification is the median of the attempts sent per request.
	Amplification float64 `json:"amplification"`
	// Served is, for each backend (the slow one last), the median of its
	// share of the answers the backends gave.
	Served []float64 `json:"served"`
	// Kill is the kill part's figures; nil for the clients.
	Kill *KillRow `json:"kill,omitempty"`
}

// KillRow is the kill part's figures: medians over the runs.
type KillRow struct {
	// ProbeInterval is the breakers' open time.
	ProbeInterval time.Duration `json:"probe_interval"`
	// Opened counts the runs where the killed backend's breaker opened,
	// OpenAfter the median time from the kill to its opening over them.
	Opened    int           `json:"opened"`
	OpenAfter time.Duration `json:"open_after"`
	// Closed counts the runs where it closed again after the backend's
	// return, ClosedAfter the median time from the return over them.
	Closed      int           `json:"closed"`
	ClosedAfter time.Duration `json:"closed_after"`
	// Phases are the requests by the breaker's state when they were sent
	// (KillBefore, KillDead, KillOpen, KillAfter).
	Phases map[string]KillPhase `json:"phases"`
}

// KillPhase is the outcome of the requests sent during one phase of the
// kill part: medians over the runs that had some.
type KillPhase struct {
	Requests   float64 `json:"requests"`
	FailedFrac float64 `json:"failed_frac"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
}

// clusterRun is a cluster sample with its detail.
type clusterRun = detailed[ClusterDetail]

// Summarize returns one row per target and part of rep's cluster samples,
// in the order they first appear (the suite runs the parts of a target in
// order); nil when there are none, or an error naming a sample whose
// detail does not decode.
func (c *Cluster) Summarize(rep *bench.Report) ([]ClusterRow, error) {
	runs, err := detailedRuns[ClusterDetail](rep, c.Name())
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	type targetPart struct{ target, part string }
	key := func(r clusterRun) targetPart { return targetPart{r.Target, r.detail.Part} }
	return grouped(runs, key, func(k targetPart, runs []clusterRun) ClusterRow {
		return clusterRow(k.target, k.part, runs)
	}), nil
}

// clusterRow computes the row of one target and part.
func clusterRow(target, part string, runs []clusterRun) ClusterRow {
	r := ClusterRow{Target: target, Part: part}
	kept := slices.DeleteFunc(slices.Clone(runs), func(r clusterRun) bool { return r.Behind })
	r.Runs, r.Behind = len(kept), len(runs)-len(kept)
	if len(kept) == 0 {
		kept = runs
	}
	var capacity, multiple, offered, goodput, frac, rej, fail, p50, p99, amp []float64
	var served [][]float64
	for _, s := range kept {
		rt, d := s.Rates, s.detail
		capacity = append(capacity, s.Capacity)
		multiple = append(multiple, s.Multiple)
		offered = append(offered, rt.Offered)
		goodput = append(goodput, rt.Goodput)
		if s.Capacity > 0 {
			frac = append(frac, rt.Goodput/s.Capacity)
		}
		if rt.Offered > 0 {
			rej = append(rej, rt.Rejected/rt.Offered)
			fail = append(fail, rt.Failed/rt.Offered)
		}
		if rt.Goodput > 0 {
			p50 = append(p50, s.Latency.P50)
			p99 = append(p99, s.Latency.P99)
		}
		amp = append(amp, d.Amplification)
		var total int64
		for _, b := range d.Backends {
			total += b.Served
		}
		for i, b := range d.Backends {
			if i == len(served) {
				served = append(served, nil)
			}
			if total > 0 {
				served[i] = append(served[i], float64(b.Served)/float64(total))
			}
		}
	}
	med := report.Median
	r.Capacity, r.Multiple, r.Offered, r.Goodput = med(capacity), med(multiple), med(offered), med(goodput)
	r.GoodputFrac, r.RejectedFrac, r.FailedFrac = med(frac), med(rej), med(fail)
	r.P50, r.P99, r.Amplification = med(p50), med(p99), med(amp)
	for _, sh := range served {
		r.Served = append(r.Served, med(sh))
	}
	if part == ClusterKill {
		r.Kill = killRow(kept)
	}
	return r
}

// killRow computes the kill part's figures.
func killRow(runs []clusterRun) *KillRow {
	k := &KillRow{Phases: make(map[string]KillPhase)}
	var openAfter, closedAfter []float64
	phases := make(map[string][][]float64) // requests, failed, p50, p99
	for _, s := range runs {
		ki := s.detail.Kill
		if ki == nil {
			continue
		}
		k.ProbeInterval = ki.ProbeInterval
		if ki.Opened {
			k.Opened++
			openAfter = append(openAfter, float64(ki.OpenAfter))
		}
		if ki.Closed {
			k.Closed++
			closedAfter = append(closedAfter, float64(ki.ClosedAfter))
		}
		var sec float64 // the sending window: class rates are per second of it
		if s.Rates.Offered > 0 {
			sec = float64(s.Requests) / s.Rates.Offered
		}
		for name, c := range s.Classes {
			p := phases[name]
			if p == nil {
				p = make([][]float64, 4)
			}
			if n := c.Rates.Offered * sec; n > 0 {
				p[0] = append(p[0], n)
				p[1] = append(p[1], c.Rates.Failed/c.Rates.Offered)
			}
			if c.Rates.Goodput > 0 {
				p[2] = append(p[2], c.Latency.P50)
				p[3] = append(p[3], c.Latency.P99)
			}
			phases[name] = p
		}
	}
	med := report.Median
	k.OpenAfter = time.Duration(med(openAfter))
	k.ClosedAfter = time.Duration(med(closedAfter))
	for name, p := range phases {
		k.Phases[name] = KillPhase{Requests: med(p[0]), FailedFrac: med(p[1]), P50: med(p[2]), P99: med(p[3])}
	}
	return k
}

// Rows are Summarize's, nil without cluster samples or when a sample's
// detail does not decode (WriteReport says which).
func (c *Cluster) Rows(rep *bench.Report) any { return rowsOf(c.Summarize(rep)) }

// WriteReport writes the cluster samples of rep: a line on the setup and
// a table of the clients at the offered multiple, one row per target and
// client; then the kill part's table, one per target. It writes nothing
// for a report without cluster samples.
func (c *Cluster) WriteReport(w io.Writer, rep *bench.Report) error {
	runs, err := detailedRuns[ClusterDetail](rep, c.Name())
	if err != nil {
		return err
	}
	rows, err := c.Summarize(rep)
	if err != nil || len(rows) == 0 {
		return err
	}
	var fast, slow bench.HandlerSpec
	var quotas []string // each backend's CPU quota, when they ran in one
	for _, r := range runs {
		if bs := r.detail.Backends; len(bs) > 0 {
			fast, slow = bs[0].Handler, bs[len(bs)-1].Handler
			for _, b := range bs {
				if b.Throttled != nil {
					quotas = append(quotas, b.Throttled.Quota.String())
				}
			}
			break
		}
	}
	var buf bytes.Buffer
	clients := slices.DeleteFunc(slices.Clone(rows), func(r ClusterRow) bool { return r.Kill != nil })
	kills := slices.DeleteFunc(slices.Clone(rows), func(r ClusterRow) bool { return r.Kill == nil })
	if len(clients) > 0 {
		inQuotas := ""
		if len(quotas) > 0 {
			inQuotas = " in CPU quotas of " + strings.Join(quotas, ", ")
		}
		fmt.Fprintf(&buf, "\ncluster: 3 backends, each a child process of the target%s, busy %v a request, the last %v; C their capacities measured together;\n", inQuotas, fast.CPU, slow.CPU)
		fmt.Fprintf(&buf, "%sx of C offered open loop through each client:\n", formatMultiple(clients[0].Multiple))
		tw := report.NewTab(&buf)
		report.Line(tw, "target", "client", "C/s", "offered/s", "goodput/s", "goodput/C", "sent/offered", "503 %", "failed %", "p50 ms", "p99 ms", "served % (slow last)", "runs")
		for _, r := range clients {
			report.Line(tw, r.Target, r.Part, fmt.Sprintf("%.0f", r.Capacity), fmt.Sprintf("%.0f", r.Offered), fmt.Sprintf("%.0f", r.Goodput),
				fmt.Sprintf("%.3f", r.GoodputFrac), fmt.Sprintf("%.3f", r.Amplification),
				fmt.Sprintf("%.1f", 100*r.RejectedFrac), fmt.Sprintf("%.1f", 100*r.FailedFrac),
				report.FormatMS(r.P50), report.FormatMS(r.P99), formatShares(r.Served), fmt.Sprintf("%d/%d", r.Runs, r.Behind))
		}
		_ = tw.Flush() // into a bytes.Buffer
	}
	for i, r := range kills {
		if i == 0 {
			fmt.Fprintf(&buf, "\none fast backend killed (SIGKILL) and started again on its address, sluice's client at %sx of C, probe interval %v:\n",
				formatMultiple(r.Multiple), r.Kill.ProbeInterval)
		}
		writeKill(&buf, r)
	}
	buf.WriteString("\n" + strings.Join([]string{
		"clients: none (round robin, no retry), naive (round robin, every failure retried at once, anywhere, no budget),",
		"sluice (package client: retry elsewhere within the budget, power of two choices, breakers);",
		"sent/offered: attempts sent to the backends per request; served %: each backend's share of the answers;",
		"503 %: the last answer was a rejection (Sluice-Not-Started); failed %: late, errors, other statuses;",
		"opened: the killed backend's breaker opened, after the kill; closed: it closed again, after the return",
		"(in probe intervals too); by phase: the requests sent before the kill, while the backend was dead with",
		"its breaker closed, while the breaker was open or half-open, after it closed; runs: kept/behind.",
	}, "\n") + "\n")
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("bench: write the cluster report: %w", err)
	}
	return nil
}

// writeKill writes the kill part of one target.
func writeKill(buf *bytes.Buffer, r ClusterRow) {
	k := r.Kill
	runs := r.Runs + r.Behind
	opened, closed := "never opened", "never closed"
	if k.Opened > 0 {
		opened = fmt.Sprintf("opened %s ms after the kill (%d of %d runs)", report.FormatMS(ms(k.OpenAfter)), k.Opened, runs)
	}
	if k.Closed > 0 {
		closed = fmt.Sprintf("closed %s ms after the return, %.2f probe intervals (%d of %d runs)",
			report.FormatMS(ms(k.ClosedAfter)), float64(k.ClosedAfter)/float64(k.ProbeInterval), k.Closed, runs)
	}
	fmt.Fprintf(buf, "%s: the breaker %s, %s; runs %d/%d\n", r.Target, opened, closed, r.Runs, r.Behind)
	tw := report.NewTab(buf)
	report.Line(tw, "phase", "requests", "failed %", "p50 ms", "p99 ms")
	for _, name := range killClasses {
		p, ok := k.Phases[name]
		if !ok {
			report.Line(tw, name, "0", "-", "-", "-")
			continue
		}
		report.Line(tw, name, fmt.Sprintf("%.0f", p.Requests), fmt.Sprintf("%.1f", 100*p.FailedFrac), report.FormatMS(p.P50), report.FormatMS(p.P99))
	}
	_ = tw.Flush()
}

// ms converts d to milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// formatMultiple prints a multiple of C as the tables do: "1.5", "2".
func formatMultiple(m float64) string { return strconv.FormatFloat(m, 'g', -1, 64) }

// formatShares prints shares as percentages, "43/41/16".
func formatShares(shares []float64) string {
	if len(shares) == 0 {
		return "-"
	}
	parts := make([]string, len(shares))
	for i, s := range shares {
		parts[i] = fmt.Sprintf("%.0f", 100*s)
	}
	return strings.Join(parts, "/")
}
