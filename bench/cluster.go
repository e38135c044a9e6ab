package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/client"
)

// The parts of the cluster scenario, as in ClusterInfo.Part: the first
// three are its clients, offered ClusterConfig.Multiple of the cluster's
// capacity; the last kills a backend and brings it back.
const (
	// ClusterNone is a client that does not retry: round robin, one
	// attempt, no breakers.
	ClusterNone = "none"
	// ClusterNaive retries at once, anywhere, without a budget: round
	// robin, ClusterConfig.NaiveAttempts attempts, no breakers (package
	// client with RoundRobin, Budget.Unlimited and RetrySameBackend).
	ClusterNaive = "naive"
	// ClusterSluice is package client with its defaults (retry elsewhere
	// within the budget, power of two choices, breakers), except its
	// breakers' ClusterConfig.Breaker.
	ClusterSluice = "sluice"
	// ClusterKill is ClusterSluice at ClusterConfig.KillMultiple, while
	// one fast backend is killed (SIGKILL) and started again on its
	// address.
	ClusterKill = "kill"
)

// ClusterParts are the parts of the cluster scenario, in the order it
// runs them for each target.
var ClusterParts = []string{ClusterNone, ClusterNaive, ClusterSluice, ClusterKill}

// ClusterShape is the name of the cluster scenario's handler shape (in
// Sample.Shape): a shape of its own, so that the suite measures the
// capacity of the whole cluster for it (calibrateCluster), not that of one
// target.
const ClusterShape = "cluster"

// The classes of the kill part's requests (Sample.Classes), by what the
// killed backend's breaker was when the request was sent.
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

// Defaults of ClusterConfig's zero fields.
const (
	DefaultClusterCPU           = time.Millisecond
	DefaultClusterSlow          = 3.0
	DefaultClusterMultiple      = 1.5
	DefaultClusterKillMultiple  = 0.4
	DefaultClusterDown          = 2 * time.Second
	DefaultClusterNaiveAttempts = 1000
)

// restartTries bounds the attempts to start a killed backend again on its
// address (another socket may hold the port for a moment), restartPause
// the wait between them.
const (
	restartTries = 10
	restartPause = 100 * time.Millisecond
)

// ClusterConfig shapes the cluster scenario: three backends of the target,
// each in a child process of its own, serving the weather handler with CPU
// of busy work per request and no database, the last one Slow times as
// much; sluice targets send the load hint (server.Config.LoadHint). The
// backends share the target CPUs of the suite, or split them when there
// are at least three. Each part starts the cluster afresh:
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
type ClusterConfig struct {
	// CPU is the busy work per request of the fast backends' handler;
	// default 1 ms. Slow multiplies it for the slow backend; default 3.
	CPU  time.Duration
	Slow float64
	// Multiple is the load offered to the three clients, in multiples of
	// C; default 1.5.
	Multiple float64
	// KillMultiple is the kill part's load, in multiples of C; default
	// 0.4, under what the two backends left can serve.
	KillMultiple float64
	// KillAfter is when the kill part kills its backend, from the start
	// of its load; zero means the breakers' window (10 s by default), so
	// that the breaker has a full window of successes behind it.
	KillAfter time.Duration
	// Down is how long the backend stays dead; default 2 s.
	Down time.Duration
	// After is how long the load goes on once the backend is back; zero
	// means two probe intervals (the breakers' OpenFor) and one second.
	After time.Duration
	// NaiveAttempts is the naive client's attempts per request; default
	// 1000: the deadline ends a request's retries first.
	NaiveAttempts int
	// Breaker configures the breakers of sluice's client (the sluice and
	// kill parts); the zero value is package client's defaults.
	Breaker client.BreakerConfig
}

// defaults checks c and fills in its zero fields.
func (c *ClusterConfig) defaults() error {
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
	for name, v := range map[string]float64{"slow factor": c.Slow, "multiple": c.Multiple, "kill multiple": c.KillMultiple} {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("bench: cluster %s %v must be positive and finite", name, v)
		}
	}
	switch {
	case c.CPU < 0 || c.KillAfter < 0 || c.Down < 0 || c.After < 0:
		return errors.New("bench: cluster durations must not be negative")
	case c.NaiveAttempts < 1:
		return fmt.Errorf("bench: cluster naive attempts %d must be positive", c.NaiveAttempts)
	}
	b := c.Breaker
	if c.KillAfter == 0 {
		c.KillAfter = orDefault(b.Window, client.DefaultBreakerWindow)
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
func (c *ClusterConfig) probeInterval() time.Duration {
	return orDefault(c.Breaker.OpenFor, client.DefaultBreakerOpenFor)
}

// shape is the scenario's handler shape: the fast backends'.
func (c *ClusterConfig) shape() Shape {
	return Shape{Name: ClusterShape, Spec: HandlerSpec{CPU: c.CPU}}
}

// spec returns backend i's handler.
func (c *ClusterConfig) spec(i int) HandlerSpec {
	if i == clusterBackends-1 {
		return HandlerSpec{CPU: time.Duration(float64(c.CPU) * c.Slow)}
	}
	return HandlerSpec{CPU: c.CPU}
}

// ClusterInfo is the cluster scenario's part of a Sample. The Sample's
// rates and latencies are the generator's: each request as the client
// returned it, after its retries; its Capacity is the cluster's.
type ClusterInfo struct {
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
	Kill *ClusterKillInfo `json:"kill,omitempty"`
}

// ClusterBackend is one backend of a cluster run, as the client counted
// it.
type ClusterBackend struct {
	Handler HandlerSpec `json:"handler"`
	Slow    bool        `json:"slow,omitempty"`
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
}

// ClusterKillInfo is what the kill part measured. Times are from the start of
// the load.
type ClusterKillInfo struct {
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

// cluster is the backends of one run, each in a child process.
type cluster struct {
	procs []*Process // nil once stopped or killed
	specs []HandlerSpec
	cpus  [][]int
	spec  ChildSpec         // the template of the backends' children
	stats []json.RawMessage // each backend's counters, once stopped
}

// backendCPUs returns the CPUs of backend i of n: disjoint sets when cpus
// has n or more, else all of cpus (none: the parent's CPUs).
func backendCPUs(cpus []int, n, i int) []int {
	if len(cpus) < n {
		return cpus
	}
	return cpus[i*len(cpus)/n : (i+1)*len(cpus)/n]
}

// startCluster starts the target's backends.
func (cfg *SuiteConfig) startCluster(ctx context.Context, target string) (*cluster, error) {
	specs := make([]HandlerSpec, clusterBackends)
	for i := range specs {
		specs[i] = cfg.Cluster.spec(i)
	}
	return cfg.startBackends(ctx, ChildSpec{Target: target, Nice: TargetNice, LoadHint: true}, specs)
}

// startBackends starts one backend per handler of specs, each the child
// process that spec describes serving that handler, on its share of the
// target CPUs (backendCPUs); the cluster and tenants scenarios share it.
func (cfg *SuiteConfig) startBackends(ctx context.Context, spec ChildSpec, specs []HandlerSpec) (*cluster, error) {
	cl := &cluster{spec: spec}
	for i, h := range specs {
		cs := cl.spec
		cs.Handler = h
		cpus := backendCPUs(cfg.TargetCPUs, len(specs), i)
		p, err := startChild(ctx, cfg.Launch, cs, cpus)
		if err != nil {
			return nil, errors.Join(err, cl.stop())
		}
		cl.procs = append(cl.procs, p)
		cl.specs = append(cl.specs, cs.Handler)
		cl.cpus = append(cl.cpus, cpus)
		cl.stats = append(cl.stats, nil)
	}
	return cl, nil
}

// urls returns the backends' base URLs.
func (cl *cluster) urls() []string {
	var out []string
	for _, p := range cl.procs {
		out = append(out, p.URL)
	}
	return out
}

// cpu returns the CPU time the backends have used so far.
func (cl *cluster) cpu() time.Duration {
	var t time.Duration
	for _, p := range cl.procs {
		t += p.cpu()
	}
	return t
}

// stop stops every backend still running, and keeps their counters.
func (cl *cluster) stop() error {
	var err error
	for i, p := range cl.procs {
		if p != nil {
			err = errors.Join(err, p.Stop())
			cl.stats[i], cl.procs[i] = p.Stats, nil
		}
	}
	return err
}

// kill kills backend i with SIGKILL and waits for it to be gone.
func (cl *cluster) kill(i int) error {
	p := cl.procs[i]
	cl.procs[i] = nil
	if err := p.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("bench: kill backend %d: %w", i, err)
	}
	<-p.done
	return nil
}

// restart starts backend i again on the address of url, trying again for
// a while if the port is held.
func (cl *cluster) restart(ctx context.Context, launch Launcher, i int, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("bench: restart backend %d: %w", i, err)
	}
	cs := cl.spec
	cs.Handler, cs.Addr = cl.specs[i], u.Host
	var errs error
	for range restartTries {
		p, err := startChild(ctx, launch, cs, cl.cpus[i])
		if err == nil {
			cl.procs[i] = p
			return nil
		}
		errs = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(restartPause):
		}
	}
	return fmt.Errorf("bench: restart backend %d on %s: %w", i, u.Host, errs)
}

// calibrateCluster measures the cluster's capacity on fresh backends: a
// closed loop on each backend at the same time, at each of CalibrateConns
// per backend in turn, C being the best sum of their goodputs; and the CPU
// time the backends used per second meanwhile.
func (cfg *SuiteConfig) calibrateCluster(ctx context.Context, target string) (capacity, cpu float64, err error) {
	cl, err := cfg.startCluster(ctx, target)
	if err != nil {
		return 0, 0, err
	}
	return cfg.calibrateBackends(ctx, target, cl)
}

// calibrateBackends is calibrateCluster on the backends of cl, which it
// stops; the cluster and tenants scenarios share it.
func (cfg *SuiteConfig) calibrateBackends(ctx context.Context, target string, cl *cluster) (capacity, cpu float64, err error) {
	cc := cfg.Calibrate
	for _, n := range cfg.CalibrateConns {
		cc.Conns = n
		cals := make([]Calibration, len(cl.procs))
		errs := make([]error, len(cl.procs))
		tcpu0, t0 := cl.cpu(), time.Now()
		var wg sync.WaitGroup
		for i, p := range cl.procs {
			c := cc
			c.URL = p.URL + WeatherPath
			wg.Go(func() { cals[i], errs[i] = Calibrate(ctx, c) })
		}
		wg.Wait()
		tcpu, elapsed := cl.cpu()-tcpu0, time.Since(t0)
		if err = errors.Join(errs...); err != nil {
			break
		}
		var sum float64
		for _, c := range cals {
			sum += c.Goodput
		}
		if sum > capacity {
			capacity, cpu = sum, tcpu.Seconds()/elapsed.Seconds()
		}
	}
	err = errors.Join(err, cl.stop())
	if err != nil {
		return 0, 0, fmt.Errorf("bench: calibrate the %s cluster: %w", target, err)
	}
	if capacity <= 0 {
		return 0, 0, fmt.Errorf("bench: calibrate the %s cluster: no request succeeded", target)
	}
	return capacity, cpu, nil
}

// clusterWindow is the sending window of a part.
func (cfg *SuiteConfig) clusterWindow(part string) time.Duration {
	if part == ClusterKill {
		c := cfg.Cluster
		return c.KillAfter + c.Down + c.After
	}
	return cfg.Duration
}

// clusterClient returns the client of a part over the backends at urls,
// sending on base.
func (cfg *SuiteConfig) clusterClient(part string, urls []string, base http.RoundTripper, onChange func(string, client.State, client.State)) (*client.Transport, error) {
	cc := client.Config{Balancer: client.BalancerConfig{Backends: urls}, Base: base}
	switch part {
	case ClusterNone:
		cc.Balancer.RoundRobin = true
		cc.Retry.MaxAttempts = 1
		cc.Breaker.Disabled = true
	case ClusterNaive:
		cc.Balancer.RoundRobin = true
		cc.Retry = client.RetryConfig{
			MaxAttempts:      cfg.Cluster.NaiveAttempts,
			RetrySameBackend: true,
			Budget:           client.BudgetConfig{Unlimited: true},
			// Whatever failed is retried at once too.
			RetryStarted:   true,
			BackoffInitial: time.Nanosecond,
			BackoffMax:     time.Nanosecond,
		}
		cc.Breaker.Disabled = true
	default:
		cc.Breaker = cfg.Cluster.Breaker
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
	info ClusterKillInfo
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

// run kills backend 0 of cl KillAfter after the start, and starts it again
// Down later.
func (k *killer) run(ctx context.Context, cfg *SuiteConfig, cl *cluster) error {
	c := cfg.Cluster
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
	if err := cl.kill(0); err != nil {
		return err
	}
	if err := wait(c.KillAfter + c.Down); err != nil {
		return err
	}
	if err := cl.restart(ctx, cfg.Launch, 0, k.victim); err != nil {
		return err
	}
	k.mu.Lock()
	k.info.ReturnedAt = time.Since(k.start)
	k.mu.Unlock()
	return nil
}

// result returns what the kill part measured.
func (k *killer) result(probe time.Duration) *ClusterKillInfo {
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

// cluster runs one part of the cluster scenario on fresh backends.
func (cfg *SuiteConfig) cluster(ctx context.Context, target string, p Point, capacity float64, repeat, run int) (s *Sample, err error) {
	cl, err := cfg.startCluster(ctx, target)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, cl.stop()) }()
	urls := cl.urls()
	rate := p.Multiple * capacity
	// Connections per backend: as many as the whole load could have in
	// flight within the deadline (Little's law, as Run derives Conns).
	conns := min(max(int(math.Ceil(rate*cfg.Deadline.Seconds())), 1), MaxConns)
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
	tr, err := cfg.clusterClient(p.Part, urls, base, onChange)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, tr.Close()) }()
	rc := Config{
		URL:      urls[0] + WeatherPath, // the client sends it to the backend it picks
		Rate:     rate,
		Duration: cfg.clusterWindow(p.Part),
		Deadline: cfg.Deadline,
		Seed:     cfg.Seed + uint64(run),
		Client:   &http.Client{Transport: tr},
	}
	if !cfg.Constant {
		rc.Arrival = Poisson
	}
	killed := make(chan error, 1)
	kctx, stopKiller := context.WithCancel(ctx)
	defer stopKiller()
	cpu0, tcpu0, t0 := selfCPU(), cl.cpu(), time.Now()
	if k != nil {
		rc.Classify = k.classify
		k.start = t0
		go func() { killed <- k.run(kctx, cfg, cl) }()
	}
	res, err := Run(ctx, rc)
	if k != nil {
		if err != nil {
			stopKiller()
		}
		err = errors.Join(err, <-killed)
	}
	gen, tcpu, elapsed := selfCPU()-cpu0, cl.cpu()-tcpu0, time.Since(t0)
	st := tr.Stats()
	// Closed before the backends stop, which would wait for them.
	base.CloseIdleConnections()
	if res == nil {
		return nil, err
	}
	s = &Sample{
		Scenario: ScenarioCluster, Shape: p.Shape.Name, Handler: p.Spec, Target: target,
		Repeat: repeat, Capacity: capacity, Multiple: p.Multiple,
	}
	Fill(s, res)
	if sec := elapsed.Seconds(); sec > 0 {
		s.GeneratorCPU = gen.Seconds() / sec
		if k == nil { // a killed backend's CPU time is lost with it
			s.TargetCPU = tcpu.Seconds() / sec
		}
	}
	ci := &ClusterInfo{
		Part: p.Part, Requests: st.Requests, Attempts: st.Attempts, Retries: st.Retries,
		BudgetDenied: st.BudgetDenied, NoBackend: st.NoBackend,
	}
	if st.Requests > 0 {
		ci.Amplification = float64(st.Attempts) / float64(st.Requests)
	}
	for i, b := range st.Backends {
		ci.Backends = append(ci.Backends, ClusterBackend{
			Handler: cl.specs[i], Slow: i == clusterBackends-1, Killed: k != nil && i == 0,
			Sent: b.Sent, Rejected: b.Rejected, Failed: b.Failed, Served: b.Sent - b.Rejected - b.Failed,
		})
	}
	if k != nil {
		ci.Kill = k.result(cfg.Cluster.probeInterval())
	}
	s.Cluster = ci
	// The backends' own counters come with their stop.
	err = errors.Join(err, cl.stop())
	for i := range ci.Backends {
		ci.Backends[i].Server = cl.stats[i]
	}
	return s, err
}
