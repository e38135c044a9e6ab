package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/tenant"
)

// ScenarioTenants is the tenant flood run for real: sluice servers (one by
// default), each in a child process with a tenant tracker and an agent
// over a redis-server the bench starts, offered a heavy tenant and ten
// light ones (see TenantsConfig).
const ScenarioTenants = "tenants"

// TenantsShape is the name of the tenants scenario's handler shape (in
// Sample.Shape): a shape of its own, so that the suite measures the
// capacity of its servers together for it.
const TenantsShape = "tenants"

// The parts of the tenants scenario, as in TenantsInfo.Part: the same load
// with enforcement on, and with it off (the trackers count and report,
// the controller computes, nothing is dropped), for comparison.
const (
	TenantsOn  = "on"
	TenantsOff = "off"
)

// TenantsParts are the parts of the tenants scenario, in the order it runs
// them for each target.
var TenantsParts = []string{TenantsOn, TenantsOff}

// TenantHeader names a request's tenant in the tenants scenario: the
// tracker's default key.
const TenantHeader = "X-Tenant"

// TenantHeavy is the heavy tenant's name; the light ones are "light-0",
// "light-1" and so on (TenantLight).
const TenantHeavy = "heavy"

// TenantLight returns the name of light tenant i.
func TenantLight(i int) string { return fmt.Sprintf("light-%d", i) }

// What protects the tenants scenario's servers (TenantsConfig.Protection),
// beside the tenant tracker.
const (
	// TenantsDefault is the server's default configuration: the age limit
	// alone, no gate.
	TenantsDefault = "default"
	// TenantsBusy is the busy gate at its default fraction with the timed
	// queue.
	TenantsBusy = "busy"
	// TenantsConcurrency is a concurrency gate of one request per worker
	// with the timed queue.
	TenantsConcurrency = "concurrency"
)

// TenantsProtections are the protections of TenantsConfig.Protection.
var TenantsProtections = []string{TenantsDefault, TenantsBusy, TenantsConcurrency}

// Defaults of TenantsConfig's zero fields.
const (
	DefaultTenantsCPU      = 5 * time.Millisecond
	DefaultTenantsHeavy    = 5.0
	DefaultTenantsLight    = 0.05
	DefaultTenantsLights   = 10
	DefaultTenantsDuration = 20 * time.Second
	DefaultTenantsPeriod   = time.Second
	DefaultTenantsBucket   = 100 * time.Millisecond
	DefaultTenantsServers  = 1
)

// Targets for the flood, which TenantsInfo is checked against.
const (
	// TenantsConvergeMax is the most control periods the loop may take
	// to converge.
	TenantsConvergeMax = 2.0
	// TenantsLightMin is the least success of each light tenant once
	// converged.
	TenantsLightMin = 0.99
	// TenantsHeavyMin is the least goodput of the heavy tenant, in
	// multiples of what the light tenants leave of C.
	TenantsHeavyMin = 0.9
	// TenantsJainMin is the least Jain's index on the normalised shares.
	TenantsJainMin = 0.95
	// TenantsBlameMin is the least share of the blame of the demand on
	// the heavy tenant.
	TenantsBlameMin = 0.9
)

// TenantsConfig shapes the tenants scenario: Servers servers of the target
// (a sluice one), each in a child process of its own serving the weather
// handler with CPU of busy work per request, protected as Protection says,
// each with a tenant.Tracker among its admission policies and a
// tenant.Agent, whose embedded tenant.Controller leads by lease, over a
// tenant.RedisStore on a redis-server started from PATH for the run (none:
// the scenario fails, naming the package to install). The servers share
// the target CPUs of the suite, or split them when there are at least as
// many CPUs as servers; a server has a worker per CPU it runs on.
//
// C is the capacity of the servers, measured once per repeat before
// the parts as the cluster scenario measures its own (without tenants).
// Each part starts Redis and the servers afresh and offers, open loop for
// Duration, a heavy tenant at Heavy×C and Lights light tenants at Light×C
// each, every request's tenant drawn at random in proportion to the rates
// (each tenant's arrivals are then Poisson too) and named in TenantHeader,
// the requests spread over the servers round robin, and counts each
// tenant's outcomes per Bucket. The on part enforces; the off part runs
// the same with every tracker's enforcement off.
type TenantsConfig struct {
	// CPU is the busy work per request; default 5 ms (so that the
	// generator, on one CPU, keeps up with 5.5x of C).
	CPU time.Duration
	// Heavy is the heavy tenant's load, Light each light tenant's, in
	// multiples of C; defaults 5 and 0.05. Lights is the number of light
	// tenants; default 10.
	Heavy, Light float64
	Lights       int
	// Duration is each part's sending window; default 20 s.
	Duration time.Duration
	// Period is the agents' control period; default 1 s.
	Period time.Duration
	// Bucket is the width of the per-tenant series; default 100 ms.
	Bucket time.Duration
	// Utilisation is the controllers' tenant.ControllerConfig.Utilisation,
	// in (0, 1]; zero means the controller's default.
	Utilisation float64
	// Servers is the number of servers; default 1. One server is a fleet
	// of one (its agent leads), and needs no more CPUs than a server and
	// the generator; three on one CPU time-share it, so that each refuses
	// from its queue whatever the tenant.
	Servers int
	// Protection is what protects each server besides its tracker: one of
	// TenantsProtections; default TenantsDefault, the age limit alone.
	Protection string
}

// defaults checks c and fills in its zero fields.
func (c *TenantsConfig) defaults() error {
	c.CPU = cmp.Or(c.CPU, DefaultTenantsCPU)
	c.Heavy = cmp.Or(c.Heavy, DefaultTenantsHeavy)
	c.Light = cmp.Or(c.Light, DefaultTenantsLight)
	c.Lights = cmp.Or(c.Lights, DefaultTenantsLights)
	c.Duration = cmp.Or(c.Duration, DefaultTenantsDuration)
	c.Period = cmp.Or(c.Period, DefaultTenantsPeriod)
	c.Bucket = cmp.Or(c.Bucket, DefaultTenantsBucket)
	c.Servers = cmp.Or(c.Servers, DefaultTenantsServers)
	c.Protection = cmp.Or(c.Protection, TenantsDefault)
	for name, v := range map[string]float64{"heavy load": c.Heavy, "light load": c.Light} {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("bench: tenants %s %v must be positive and finite", name, v)
		}
	}
	switch {
	case c.Lights < 1:
		return fmt.Errorf("bench: tenants: %d light tenants; want at least one", c.Lights)
	case c.Servers < 1 || c.Servers > maxTenantsServers:
		return fmt.Errorf("bench: tenants: %d servers; want 1 to %d", c.Servers, maxTenantsServers)
	case !slices.Contains(TenantsProtections, c.Protection):
		return fmt.Errorf("bench: tenants protection %q; want one of %s", c.Protection, strings.Join(TenantsProtections, ", "))
	case c.CPU < 0 || c.Duration < 0 || c.Period < 0 || c.Bucket < 0:
		return errors.New("bench: tenants durations must not be negative")
	case c.Utilisation < 0 || c.Utilisation > 1 || math.IsNaN(c.Utilisation):
		return fmt.Errorf("bench: tenants utilisation %v must be in (0, 1], or 0 for the controller's default", c.Utilisation)
	case c.Bucket > c.Period:
		return fmt.Errorf("bench: tenants bucket %v is longer than the control period %v", c.Bucket, c.Period)
	}
	return nil
}

// maxTenantsServers bounds TenantsConfig.Servers: each is a child
// process.
const maxTenantsServers = 16

// multiple is the whole load, in multiples of C.
func (c *TenantsConfig) multiple() float64 { return c.Heavy + float64(c.Lights)*c.Light }

// shape is the scenario's handler shape.
func (c *TenantsConfig) shape() Shape {
	return Shape{Name: TenantsShape, Spec: HandlerSpec{CPU: c.CPU}}
}

// tenantCapable reports whether target serves with sluice's admission
// pipeline (startSluice), where the tenant tracker goes.
func tenantCapable(target string) bool { return strings.HasPrefix(target, "sluice") }

// TenantChild is what a server of the tenants scenario needs beyond its
// target: its tenant tracker (enforcing unless Off) and its agent, with a
// controller that leads by lease, over the RedisStore of Fleet at Redis,
// and its protection (TenantsConfig.Protection; empty: TenantsDefault).
type TenantChild struct {
	Redis       string        `json:"redis"`
	Fleet       string        `json:"fleet"`
	Off         bool          `json:"off,omitempty"`
	Period      time.Duration `json:"period"`
	Utilisation float64       `json:"utilisation,omitempty"`
	Protection  string        `json:"protection,omitempty"`
}

// tenantAgent is a child's tenant machinery, running.
type tenantAgent struct {
	tracker *tenant.Tracker
	agent   *tenant.Agent
	ctrl    *tenant.Controller
	client  *redis.Client
	period  time.Duration
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu    sync.Mutex
	steps []TenantStep
}

// maxTenantSteps bounds the controller's steps a child keeps (an hour of
// 1 s periods).
const maxTenantSteps = 3600

// attach builds the tracker, puts it after cfg's admission policies
// (before its gates), sets the gates of the protection and starts the
// agent.
func (tc *TenantChild) attach(cfg *sluice.Config) (*tenantAgent, error) {
	tr, err := tenant.New(tenant.Config{Off: tc.Off})
	if err != nil {
		return nil, err
	}
	client := redis.NewClient(&redis.Options{Addr: tc.Redis, ContextTimeoutEnabled: true, MaxRetries: -1})
	fail := func(err error) (*tenantAgent, error) { return nil, errors.Join(err, client.Close()) }
	store, err := tenant.NewRedisStore(client, tenant.RedisConfig{Fleet: tc.Fleet})
	if err != nil {
		return fail(err)
	}
	ctrl, err := tenant.NewController(tenant.ControllerConfig{Utilisation: tc.Utilisation})
	if err != nil {
		return fail(err)
	}
	agent, err := tenant.NewAgent(tenant.AgentConfig{Store: store, Tracker: tr, Controller: ctrl, Period: tc.Period})
	if err != nil {
		return fail(err)
	}
	cfg.Admission.Policies = append(slices.Clip(cfg.Admission.Policies), tr)
	switch tc.Protection {
	case TenantsBusy:
		g, err := gate.NewBusy(gate.BusyConfig{})
		if err != nil {
			return fail(err)
		}
		cfg.Admission.Gates = []admit.Policy{g}
		cfg.Admission.Queue = &admit.QueueConfig{}
	case TenantsConcurrency:
		g, err := gate.NewConcurrency(gate.ConcurrencyConfig{Limit: runtime.GOMAXPROCS(0)})
		if err != nil {
			return fail(err)
		}
		cfg.Admission.Gates = []admit.Policy{g}
		cfg.Admission.Queue = &admit.QueueConfig{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &tenantAgent{tracker: tr, agent: agent, ctrl: ctrl, client: client, period: agent.Period(), cancel: cancel}
	a.wg.Go(func() { _ = agent.Run(ctx) })
	a.wg.Go(func() { a.watch(ctx) })
	return a, nil
}

// watch keeps each decision of the controller while it leads, with the
// time it was seen (within a twentieth of a period of its step).
func (a *tenantAgent) watch(ctx context.Context) {
	t := time.NewTicker(a.period / 20)
	defer t.Stop()
	var last uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d := a.ctrl.Last()
		if d.Version == 0 || d.Version == last {
			continue
		}
		last = d.Version
		a.mu.Lock()
		if len(a.steps) < maxTenantSteps {
			a.steps = append(a.steps, stepOf(time.Now(), d))
		}
		a.mu.Unlock()
	}
}

// stop stops the agent and closes its Redis client; after the server's
// stop, it collects the last counts into the tracker's totals. Nil does
// nothing.
func (a *tenantAgent) stop() error {
	if a == nil {
		return nil
	}
	a.cancel()
	a.wg.Wait()
	a.tracker.Collect(a.period)
	return a.client.Close()
}

// stats returns what a sluice target with tenants reports when it stops:
// its admission counters and its tenants' (TenantServer); without
// tenants (nil), the admission counters alone.
func (a *tenantAgent) stats(adm admit.Stats) any {
	if a == nil {
		return adm
	}
	js, err := json.Marshal(adm)
	if err != nil {
		js = nil
	}
	st, ast := a.tracker.Stats(), a.agent.Stats()
	a.mu.Lock()
	defer a.mu.Unlock()
	return TenantServer{
		Admission: js, Totals: st.Totals,
		Leaderships: ast.Leaderships, PushFailures: ast.PushFailures, ReadFailures: ast.ReadFailures, LeadFailures: ast.LeadFailures,
		Steps: slices.Clone(a.steps),
	}
}

// TenantServer is one server of a tenants run, as it reported itself when
// it stopped.
type TenantServer struct {
	// Admission is the server's admission counters (admit.Stats).
	Admission json.RawMessage `json:"admission,omitempty"`
	// Totals are its tracker's counts per tenant over the run.
	Totals []tenant.Usage `json:"totals"`
	// Leaderships counts the periods its agent took the lease;
	// PushFailures, ReadFailures and LeadFailures its failed round trips
	// to Redis (tenant.AgentStats).
	Leaderships  int64 `json:"leaderships"`
	PushFailures int64 `json:"push_failures"`
	ReadFailures int64 `json:"read_failures"`
	LeadFailures int64 `json:"lead_failures"`
	// Steps are its controller's decisions while it led.
	Steps []TenantStep `json:"steps,omitempty"`
}

// TenantStep is one decision of the fleet's controller (tenant.Decision).
type TenantStep struct {
	// At is when it was seen: the child's wall clock in the server's
	// report; the time from the start of the load in TenantsInfo.Steps.
	At time.Time `json:"at"`
	// Offset is At from the start of the load (TenantsInfo.Steps only).
	Offset  time.Duration `json:"offset,omitempty"`
	Version uint64        `json:"version"`
	// State is "overloaded", "full", "decaying" or "idle"; Rejected the
	// fraction of the requests let in that the servers rejected, Closed
	// the fraction of the time their gates were closed.
	State    string  `json:"state"`
	Rejected float64 `json:"rejected"`
	Closed   float64 `json:"closed"`
	// Tenants holds each tenant's figures.
	Tenants []TenantStepTenant `json:"tenants"`
}

// TenantStepTenant is one tenant's figures in a TenantStep.
type TenantStepTenant struct {
	Tenant string `json:"tenant"`
	// BlameShare is its share of the period's blame; Demand its measured
	// demand in multiples of C; Drop its drop fraction from then on.
	BlameShare float64 `json:"blame_share"`
	Demand     float64 `json:"demand"`
	Drop       float64 `json:"drop"`
	// Requests and Admitted are its requests a second across the fleet,
	// Blame and Busy its seconds of blame and of running a second
	// (tenant.Rates): what the demand was measured from.
	Requests float64 `json:"requests,omitempty"`
	Admitted float64 `json:"admitted,omitempty"`
	Blame    float64 `json:"blame,omitempty"`
	Busy     float64 `json:"busy,omitempty"`
}

// stepOf converts a decision, with its NaNs as zeros (JSON has none).
func stepOf(at time.Time, d tenant.Decision) TenantStep {
	finite := func(x float64) float64 {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return 0
		}
		return x
	}
	s := TenantStep{At: at, Version: d.Version, State: d.State, Rejected: finite(d.Rejected), Closed: finite(d.Closed)}
	for _, t := range d.Tenants {
		s.Tenants = append(s.Tenants, TenantStepTenant{Tenant: t.Tenant, BlameShare: finite(t.BlameShare), Demand: finite(t.Demand), Drop: finite(t.Drop),
			Requests: t.Rates.Requests, Admitted: t.Rates.Admitted, Blame: t.Rates.Blame, Busy: t.Rates.Busy})
	}
	return s
}

// TenantsInfo is the tenants scenario's part of a Sample. The Sample's
// Classes are the tenants, each with its series.
type TenantsInfo struct {
	// Part is TenantsOn or TenantsOff.
	Part string `json:"part"`
	// Heavy and Light are the loads of the heavy tenant and of each light
	// one, Lights the number of light tenants, as configured (multiples
	// of C); Period the control period, Bucket the width of the series.
	Heavy  float64       `json:"heavy"`
	Light  float64       `json:"light"`
	Lights int           `json:"lights"`
	Period time.Duration `json:"period"`
	Bucket time.Duration `json:"bucket"`
	// Protection is the servers' (TenantsConfig.Protection); empty in
	// runs saved before it was a setting, whose servers had a
	// concurrency gate and the timed queue.
	Protection string `json:"protection,omitempty"`
	// Servers are the servers' own reports, one per server.
	Servers []TenantServer `json:"servers"`
	// Steps are the controller's decisions (whichever server led), by
	// version, timed from the start of the load.
	Steps []TenantStep `json:"steps,omitempty"`
	TenantsFigures
}

// TenantsFigures are a tenants run measured against the flood targets.
// Shares are in multiples of C; a tenant's fair share is its max-min fair
// share of C at the rates offered (the heavy tenant's is what the light
// ones leave).
type TenantsFigures struct {
	// Converged reports that the loop converged: from ConvergedAt to the
	// end of the window, the light tenants together succeed on at least
	// 99% of their requests over every span that starts there and lasts
	// at least a period (found to a Bucket; the simulation's definition).
	// ConvergePeriods is ConvergedAt in control periods.
	Converged       bool          `json:"converged"`
	ConvergedAt     time.Duration `json:"converged_at"`
	ConvergePeriods float64       `json:"converge_periods"`
	// From is where the steady-state figures start: ConvergedAt, or 0
	// when the loop did not converge (the off part).
	From time.Duration `json:"from"`
	// LightSuccess is the light tenants' success together, WorstLight
	// the worst one's (named WorstLightName), from From to the end.
	LightSuccess   float64 `json:"light_success"`
	WorstLight     float64 `json:"worst_light"`
	WorstLightName string  `json:"worst_light_name"`
	// LightSuccessAll is the light tenants' success over the whole
	// window.
	LightSuccessAll float64 `json:"light_success_all"`
	// HeavyGoodput is the heavy tenant's goodput from From, HeavyLeft
	// its fair share (C less the light tenants' offered load), HeavyFair
	// the first over the second.
	HeavyGoodput float64 `json:"heavy_goodput"`
	HeavyLeft    float64 `json:"heavy_left"`
	HeavyFair    float64 `json:"heavy_fair"`
	// Jain is Jain's fairness index over every tenant's goodput from
	// From divided by its fair share.
	Jain float64 `json:"jain"`
	// BlameHeavy is the heavy tenant's share of the blame the servers
	// counted over the run; DemandBlameHeavy its share once each
	// tenant's blame per admitted request is scaled to its requests
	// offered (the blame of its whole demand, which the controller
	// reads, and what the simulation's target measures).
	BlameHeavy       float64 `json:"blame_heavy"`
	DemandBlameHeavy float64 `json:"demand_blame_heavy"`
	// HeavyDropped is the share of the heavy tenant's requests its
	// tracker dropped, LightDropped the light tenants' requests dropped,
	// by the servers' counts.
	HeavyDropped float64 `json:"heavy_dropped"`
	LightDropped int64   `json:"light_dropped"`
	// FirstDrop is the first step that set the heavy tenant a drop, from
	// the start of the load; -1 for none.
	FirstDrop time.Duration `json:"first_drop"`
}

// Met reports which of the flood targets the figures meet, by name:
// "converge", "light", "heavy", "jain", "blame".
func (f TenantsFigures) Met() map[string]bool {
	return map[string]bool{
		"converge": f.Converged && f.ConvergePeriods <= TenantsConvergeMax,
		"light":    f.Converged && f.WorstLight >= TenantsLightMin,
		"heavy":    f.HeavyFair >= TenantsHeavyMin,
		"jain":     f.Jain >= TenantsJainMin,
		"blame":    f.DemandBlameHeavy >= TenantsBlameMin,
	}
}

// calibrateTenants measures the capacity of the scenario's servers
// together, without tenants (the tracker costs nanoseconds a request).
func (cfg *SuiteConfig) calibrateTenants(ctx context.Context, target string) (capacity, cpu float64, err error) {
	cl, err := cfg.StartBackends(ctx, ChildSpec{Target: target, Nice: TargetNice}, cfg.tenantSpecs())
	if err != nil {
		return 0, 0, err
	}
	return cfg.CalibrateBackends(ctx, target, cl)
}

// tenantSpecs are the servers' handlers.
func (cfg *SuiteConfig) tenantSpecs() []HandlerSpec {
	specs := make([]HandlerSpec, cfg.Tenants.Servers)
	for i := range specs {
		specs[i] = cfg.Tenants.shape().Spec
	}
	return specs
}

// tenantMix draws each request's tenant at random in proportion to the
// tenants' rates; Classify is its pick.
type tenantMix struct {
	names   []string
	headers []http.Header
	cum     []float64 // cumulative rates, the last the total
	rng     *rand.Rand
}

func newTenantMix(c TenantsConfig, seed uint64) *tenantMix {
	m := &tenantMix{rng: rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))}
	add := func(name string, rate float64) {
		m.names = append(m.names, name)
		m.headers = append(m.headers, http.Header{TenantHeader: {name}})
		total := rate
		if n := len(m.cum); n > 0 {
			total += m.cum[n-1]
		}
		m.cum = append(m.cum, total)
	}
	add(TenantHeavy, c.Heavy)
	for i := range c.Lights {
		add(TenantLight(i), c.Light)
	}
	return m
}

// classify is Config.Classify: the generator calls it from one goroutine.
func (m *tenantMix) classify(int) (string, http.Header) {
	x := m.rng.Float64() * m.cum[len(m.cum)-1]
	i, _ := slices.BinarySearch(m.cum, x)
	i = min(i, len(m.names)-1)
	return m.names[i], m.headers[i]
}

// tenants runs one part of the tenants scenario on a fresh Redis and fresh
// servers.
func (cfg *SuiteConfig) tenants(ctx context.Context, target string, p Point, capacity float64, repeat, run int) (s *Sample, err error) {
	tc := cfg.Tenants
	dir, err := os.MkdirTemp("", "sluice-bench-redis-")
	if err != nil {
		return nil, fmt.Errorf("bench: tenants: %w", err)
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	addr, stopRedis, err := redistest.Launch(dir)
	if errors.Is(err, redistest.ErrNotInstalled) {
		return nil, fmt.Errorf("bench: the tenants scenario runs its servers over Redis, and %s is not on PATH: install it (%s)", redistest.Program, redistest.InstallCommand)
	}
	if err != nil {
		return nil, fmt.Errorf("bench: tenants: %w", err)
	}
	defer func() { err = errors.Join(err, stopRedis()) }()
	child := &TenantChild{Redis: addr, Fleet: fmt.Sprintf("bench-%d", run), Off: p.Part == TenantsOff, Period: tc.Period, Utilisation: tc.Utilisation, Protection: tc.Protection}
	cl, err := cfg.StartBackends(ctx, ChildSpec{Target: target, Nice: TargetNice, Tenants: child}, cfg.tenantSpecs())
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, cl.Stop()) }()
	var urls []string
	for _, u := range cl.URLs() {
		urls = append(urls, u+WeatherPath)
	}
	seed := cfg.Seed + uint64(run)
	rc := Config{
		URLs:     urls,
		Rate:     tc.multiple() * capacity,
		Duration: tc.Duration,
		Deadline: cfg.Deadline,
		Seed:     seed,
		Bucket:   tc.Bucket,
		Classify: newTenantMix(tc, seed).classify,
	}
	if !cfg.Constant {
		rc.Arrival = Poisson
	}
	cpu0, tcpu0, t0 := selfCPU(), cl.CPU(), time.Now()
	res, err := Run(ctx, rc)
	gen, tcpu, elapsed := selfCPU()-cpu0, cl.CPU()-tcpu0, time.Since(t0)
	if res == nil {
		return nil, err
	}
	s = &Sample{
		Scenario: ScenarioTenants, Shape: p.Shape.Name, Handler: p.Spec, Target: target,
		Repeat: repeat, Capacity: capacity, Multiple: p.Multiple,
	}
	Fill(s, res)
	if sec := elapsed.Seconds(); sec > 0 {
		s.GeneratorCPU = gen.Seconds() / sec
		s.TargetCPU = tcpu.Seconds() / sec
	}
	// The servers' own counts come with their stop.
	err = errors.Join(err, cl.Stop())
	ti := &TenantsInfo{Part: p.Part, Heavy: tc.Heavy, Light: tc.Light, Lights: tc.Lights, Period: tc.Period, Bucket: tc.Bucket, Protection: tc.Protection}
	for i, js := range cl.Stats() {
		var ts TenantServer
		if jerr := json.Unmarshal(js, &ts); jerr != nil || ts.Totals == nil {
			err = errors.Join(err, fmt.Errorf("bench: tenants: server %d reported no tenants (%s is not a sluice target?)", i, target))
		}
		ti.Servers = append(ti.Servers, ts)
	}
	ti.Steps = mergeSteps(ti.Servers, t0)
	for i := range ti.Servers {
		ti.Servers[i].Steps = nil // in ti.Steps
	}
	ti.TenantsFigures = measureTenants(s, ti, capacity)
	s.Tenants = ti
	return s, err
}

// mergeSteps returns the servers' steps by version, each once, timed from
// start.
func mergeSteps(servers []TenantServer, start time.Time) []TenantStep {
	var out []TenantStep
	for _, sv := range servers {
		for _, st := range sv.Steps {
			st.Offset = st.At.Sub(start)
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b TenantStep) int { return cmp.Compare(a.Version, b.Version) })
	return slices.CompactFunc(out, func(a, b TenantStep) bool { return a.Version == b.Version })
}

// tenantSeries are the per-bucket counts of one tenant.
type tenantSeries struct {
	name        string
	light       bool
	offered, ok []int64 // prefix sums: [i] is the sum of buckets before i
}

// span returns the offered and OK requests of buckets [i, j).
func (t *tenantSeries) span(i, j int) (offered, ok int64) {
	return t.offered[j] - t.offered[i], t.ok[j] - t.ok[i]
}

// measureTenants computes the figures of a tenants run from the sample's
// classes and the servers' reports.
func measureTenants(s *Sample, ti *TenantsInfo, capacity float64) TenantsFigures {
	f := TenantsFigures{FirstDrop: -1}
	var ts []*tenantSeries
	n := 0
	for name, c := range s.Classes {
		t := &tenantSeries{name: name, light: name != TenantHeavy}
		n = len(c.Series)
		t.offered, t.ok = make([]int64, n+1), make([]int64, n+1)
		for i, b := range c.Series {
			t.offered[i+1] = t.offered[i] + b.Offered
			t.ok[i+1] = t.ok[i] + b.OK
		}
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b *tenantSeries) int { return strings.Compare(a.name, b.name) })
	if n == 0 || ti.Bucket <= 0 || capacity <= 0 {
		return f
	}
	lights := func(i, j int) (offered, ok int64) {
		for _, t := range ts {
			if t.light {
				o, k := t.span(i, j)
				offered, ok = offered+o, ok+k
			}
		}
		return offered, ok
	}
	per := max(int(ti.Period/ti.Bucket), 1)
	steady := func(i, j int) bool {
		o, k := lights(i, j)
		return ratio(k, o) >= TenantsLightMin
	}
	from := 0
	for k := 0; k+per <= n && !f.Converged; k++ {
		ok := true
		for j := k + per; j <= n && ok; j++ {
			ok = steady(k, j)
		}
		if ok {
			f.Converged, from = true, k
		}
	}
	if f.Converged {
		f.ConvergedAt = time.Duration(from) * ti.Bucket
		f.ConvergePeriods = float64(f.ConvergedAt) / float64(ti.Period)
		f.From = f.ConvergedAt
	}
	o, k := lights(0, n)
	f.LightSuccessAll = ratio(k, o)
	o, k = lights(from, n)
	f.LightSuccess = ratio(k, o)
	// Fair shares at the rates offered over the steady window.
	sec := float64(n-from) * ti.Bucket.Seconds()
	demand, goodput := make([]float64, len(ts)), make([]float64, len(ts))
	for i, t := range ts {
		o, k := t.span(from, n)
		demand[i] = float64(o) / sec / capacity
		goodput[i] = float64(k) / sec / capacity
		if t.light {
			if succ := ratio(k, o); f.WorstLightName == "" || succ < f.WorstLight {
				f.WorstLight, f.WorstLightName = succ, t.name
			}
		}
	}
	fair := waterFill(demand, 1)
	var sum, sq float64
	shares := 0
	for i, t := range ts {
		if fair[i] <= 0 {
			continue
		}
		x := goodput[i] / fair[i]
		sum, sq, shares = sum+x, sq+x*x, shares+1
		if !t.light {
			f.HeavyGoodput, f.HeavyLeft, f.HeavyFair = goodput[i], fair[i], x
		}
	}
	if sq > 0 {
		f.Jain = sum * sum / (float64(shares) * sq)
	}
	measureBlame(&f, ti)
	return f
}

// measureBlame adds the figures that come from the servers: blame, drops,
// the first drop.
func measureBlame(f *TenantsFigures, ti *TenantsInfo) {
	tot := map[string]tenant.Usage{}
	for _, sv := range ti.Servers {
		for _, u := range sv.Totals {
			t := tot[u.Tenant]
			t.Requests += u.Requests
			t.Admitted += u.Admitted
			t.Dropped += u.Dropped
			t.Blame += u.Blame
			tot[u.Tenant] = t
		}
	}
	var blame, heavy, demand, heavyDemand float64
	for name, u := range tot {
		b := float64(u.Blame)
		blame += b
		var d float64
		if u.Admitted > 0 {
			d = b / float64(u.Admitted) * float64(u.Requests)
		}
		demand += d
		if name == TenantHeavy {
			heavy, heavyDemand = b, d
			if u.Requests > 0 {
				f.HeavyDropped = float64(u.Dropped) / float64(u.Requests)
			}
		} else {
			f.LightDropped += u.Dropped
		}
	}
	if blame > 0 {
		f.BlameHeavy = heavy / blame
	}
	if demand > 0 {
		f.DemandBlameHeavy = heavyDemand / demand
	}
	for _, st := range ti.Steps {
		if i := slices.IndexFunc(st.Tenants, func(t TenantStepTenant) bool { return t.Tenant == TenantHeavy && t.Drop > 0 }); i >= 0 {
			f.FirstDrop = st.Offset
			break
		}
	}
}

// waterFill returns the max-min fair shares of capacity among demands:
// min(demand, L), with the level L at which they add up to capacity (or
// every demand is met).
func waterFill(demand []float64, capacity float64) []float64 {
	idx := make([]int, 0, len(demand))
	for i, d := range demand {
		if d > 0 {
			idx = append(idx, i)
		}
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(demand[a], demand[b]) })
	out := make([]float64, len(demand))
	left := capacity
	for k, i := range idx {
		level := left / float64(len(idx)-k)
		if demand[i] <= level {
			out[i] = demand[i]
			left -= demand[i]
			continue
		}
		for _, j := range idx[k:] {
			out[j] = level
		}
		break
	}
	return out
}

// ratio returns a/b, or 1 when b is zero.
func ratio(a, b int64) float64 {
	if b == 0 {
		return 1
	}
	return float64(a) / float64(b)
}
