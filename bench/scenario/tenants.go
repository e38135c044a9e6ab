package scenario

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
	"github.com/sluice-go/sluice/bench/report"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/tenant"
)

// TenantsShape is the name of the tenants scenario's handler shape (in
// bench.Sample.Shape): a shape of its own, so that the suite measures the
// capacity of its servers together for it.
const TenantsShape = "tenants"

// The parts of the tenants scenario, as in TenantsDetail.Part: the same load
// with enforcement on, and with it off (the trackers count and report,
// the controller computes, nothing is dropped), for comparison.
const (
	TenantsOn  = "on"
	TenantsOff = "off"
)

// tenantsParts are the parts, in the order the scenario runs them on each
// target.
var tenantsParts = []string{TenantsOn, TenantsOff}

// TenantHeader names a request's tenant in the tenants scenario: the
// tracker's default key.
const TenantHeader = "X-Tenant"

// TenantHeavy is the heavy tenant's name; the light ones are "light-0",
// "light-1" and so on (TenantLight).
const TenantHeavy = "heavy"

// TenantLight returns the name of light tenant i.
func TenantLight(i int) string { return fmt.Sprintf("light-%d", i) }

// Defaults of Tenants' zero fields.
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

// Targets for the flood, which TenantsFigures is checked against.
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
	// TenantsStoreMin is the least goodput of the servers together, in
	// multiples of C, from a control period after the store was killed
	// (Tenants.KillStore) to the end.
	TenantsStoreMin = 0.8
)

// Tenants runs the tenant flood for real: Servers servers of the target
// (a sluice one), each in a child process of its own serving the weather
// handler with CPU of busy work per request, protected as Protection says,
// each with a tenant.Tracker among its admission policies and a
// tenant.Agent, whose embedded tenant.Controller leads by lease, over a
// tenant.RedisStore (TenantChild) on a redis-server started from PATH for the run (none:
// the scenario fails, naming the package to install). The servers share
// the target CPUs of the suite, or split them when there are at least as
// many CPUs as servers; a server has a worker per CPU it runs on.
//
// C is the capacity of the servers, measured once per repeat before
// the parts as the cluster scenario measures its own (without tenants,
// Tenants.Calibrate).
// Each part starts Redis and the servers afresh and offers, open loop for
// Duration, a heavy tenant at Heavy×C and Lights light tenants at Light×C
// each, every request's tenant drawn at random in proportion to the rates
// (each tenant's arrivals are then Poisson too) and named in TenantHeader,
// the requests spread over the servers round robin, and counts each
// tenant's outcomes per Bucket. The on part enforces; the off part runs
// the same with every tracker's enforcement off. With the suite's CPU
// quota (SuiteConfig.Quota, -quota), each server runs in a quota of its
// own: servers of independent capacities on fewer CPUs than servers.
type Tenants struct {
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
	// Utilisation is the controllers' tenant.ControllerOptions.Utilisation,
	// in (0, 1]; zero means the controller's default.
	Utilisation float64
	// Servers is the number of servers; default 1. One server is a fleet
	// of one (its agent leads), and needs no more CPUs than a server and
	// the generator; three on one CPU time-share it, so that each refuses
	// from its queue whatever the tenant.
	Servers int
	// Protection is what protects each server besides its tracker: one of
	// TenantsProtections; default TenantsDefault, the age
	// limit alone.
	Protection string
	// KillStore, when positive, is when redis-server is stopped, from the
	// start of each part's load: the agents lose the store mid-run, and
	// the servers go on with the last table they read and their own
	// protection (TenantsFigures.AfterKill). Zero: never.
	KillStore time.Duration

	flags *tenantsFlags // set by Flags
}

// tenantsFlags are the values of the scenario's flags.
type tenantsFlags struct {
	duration, cpu time.Duration
	utilisation   float64
	servers       int
	protection    string
	killStore     time.Duration
}

// Name is "tenants".
func (*Tenants) Name() string { return "tenants" }

// Describe says what the scenario does, for the command's help.
func (*Tenants) Describe() string {
	return "one server by default, -tenants-servers, over Redis; a heavy tenant at 5x C against 10 light ones, enforcement on and off, Redis killed mid-run with -tenants-kill-redis: -targets sluice; needs redis-server"
}

// Flags registers -tenants-duration, -tenants-cpu, -tenants-utilisation,
// -tenants-servers, -tenants-protection and -tenants-kill-redis.
func (c *Tenants) Flags(fs *flag.FlagSet) {
	f := &tenantsFlags{}
	c.flags = f
	fs.DurationVar(&f.duration, "tenants-duration", DefaultTenantsDuration, "sending window of each part (enforcement on, off) of the tenants scenario")
	fs.DurationVar(&f.cpu, "tenants-cpu", DefaultTenantsCPU, "busy work per request of the tenants scenario's servers")
	fs.Float64Var(&f.utilisation, "tenants-utilisation", 0, "share of the measured capacity the tenants scenario's controllers give out, in (0, 1]; 0: the controller's default (0.97)")
	fs.IntVar(&f.servers, "tenants-servers", DefaultTenantsServers, "servers of the tenants scenario, each a child process with a worker per target CPU it runs on")
	fs.DurationVar(&f.killStore, "tenants-kill-redis", 0, "stop the tenants scenario's redis-server this long into each part's load (0: never), to see the servers go on without their store")
	fs.StringVar(&f.protection, "tenants-protection", TenantsDefault, "what protects the tenants scenario's servers besides the tracker: "+strings.Join(TenantsProtections(), ", ")+" (default: the age limit alone; busy: the busy gate and timed queue; concurrency: a gate of a request per worker and the timed queue)")
}

// readFlags checks the flags' values and sets the fields they name.
func (c *Tenants) readFlags() error {
	f := c.flags
	switch {
	case f == nil:
		return nil
	case f.duration <= 0 || f.duration > time.Hour:
		return fmt.Errorf("-tenants-duration must be in (0, 1h], got %v", f.duration)
	case f.cpu <= 0 || f.cpu > time.Second:
		return fmt.Errorf("-tenants-cpu must be in (0, 1s], got %v", f.cpu)
	case f.utilisation < 0 || f.utilisation > 1 || math.IsNaN(f.utilisation):
		return fmt.Errorf("-tenants-utilisation must be in (0, 1], or 0 for the default, got %v", f.utilisation)
	case f.servers < 1 || f.servers > maxTenantsServers:
		return fmt.Errorf("-tenants-servers must be in [1, %d], got %d", maxTenantsServers, f.servers)
	case !slices.Contains(TenantsProtections(), f.protection):
		return fmt.Errorf("-tenants-protection must be one of %s, got %q", strings.Join(TenantsProtections(), ", "), f.protection)
	case f.killStore < 0 || f.killStore >= f.duration:
		return fmt.Errorf("-tenants-kill-redis must be in [0, -tenants-duration %v), got %v", f.duration, f.killStore)
	}
	c.Duration, c.CPU, c.Utilisation, c.Servers, c.Protection = f.duration, f.cpu, f.utilisation, f.servers, f.protection
	c.KillStore = f.killStore
	return nil
}

// Check reads the flags, fills in the defaults of the zero fields and
// checks each, and checks that every target is a sluice one (the tracker
// is an admission policy). The scenario starts its servers and sends its
// tenants' requests its own way, so the suite's TLS, NewConns and Clients
// do not apply.
func (c *Tenants) Check(s *bench.SuiteConfig) error {
	if s.TLS || s.NewConns || s.Clients != 0 {
		return errors.New("bench: -tls, -newconns and -clients (SuiteConfig.TLS, NewConns, Clients) do not apply to the tenants scenario, which starts its servers and sends its tenants' requests its own way")
	}
	if err := c.readFlags(); err != nil {
		return err
	}
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
	case !slices.Contains(TenantsProtections(), c.Protection):
		return fmt.Errorf("bench: tenants protection %q; want one of %s", c.Protection, strings.Join(TenantsProtections(), ", "))
	case c.CPU < 0 || c.Duration < 0 || c.Period < 0 || c.Bucket < 0:
		return errors.New("bench: tenants durations must not be negative")
	case c.Utilisation < 0 || c.Utilisation > 1 || math.IsNaN(c.Utilisation):
		return fmt.Errorf("bench: tenants utilisation %v must be in (0, 1], or 0 for the controller's default", c.Utilisation)
	case c.Bucket > c.Period:
		return fmt.Errorf("bench: tenants bucket %v is longer than the control period %v", c.Bucket, c.Period)
	case c.KillStore < 0 || c.KillStore > 0 && c.KillStore+c.Period >= c.Duration:
		return fmt.Errorf("bench: tenants: the store is killed at %v: leave at least a control period (%v) of the %v window after it", c.KillStore, c.Period, c.Duration)
	}
	for _, t := range s.Targets {
		if !tenantCapable(t) {
			return fmt.Errorf("bench: the tenants scenario runs on sluice targets only (its tracker is an admission policy), not %q: name them with -targets", t)
		}
	}
	return nil
}

// maxTenantsServers bounds Tenants.Servers: each is a child
// process.
const maxTenantsServers = 16

// multiple is the whole load, in multiples of C.
func (c *Tenants) multiple() float64 { return c.Heavy + float64(c.Lights)*c.Light }

// shape is the scenario's handler shape.
func (c *Tenants) shape() bench.Shape {
	return bench.Shape{Name: TenantsShape, Spec: bench.HandlerSpec{CPU: c.CPU}}
}

// Points are the two parts, on TenantsShape, each the whole load (heavy
// and light tenants) for Duration.
func (c *Tenants) Points(*bench.SuiteConfig) []bench.Point {
	sh := c.shape()
	var ps []bench.Point
	for _, part := range tenantsParts {
		ps = append(ps, bench.Point{Shape: sh, Spec: sh.Spec, Multiple: c.multiple(), Part: part, Window: c.Duration})
	}
	return ps
}

// tenantCapable reports whether target serves with sluice's admission
// pipeline, where the tenant tracker goes.
func tenantCapable(target string) bool { return strings.HasPrefix(target, "sluice") }

// TenantsDetail is what a tenants sample records beyond the common figures
// (Sample.Detail). The sample's Classes are the tenants, each with its
// series.
type TenantsDetail struct {
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
	// Protection is the servers' (Tenants.Protection); empty in
	// runs saved before it was a setting, whose servers had a
	// concurrency gate and the timed queue.
	Protection string `json:"protection,omitempty"`
	// Servers are the servers' own reports, one per server.
	Servers []TenantServer `json:"servers"`
	// Steps are the controller's decisions (whichever server led), by
	// version, timed from the start of the load.
	Steps []TenantStep `json:"steps,omitempty"`
	// StoreKilledAt is when redis-server was stopped, from the start of
	// the load (Tenants.KillStore); zero: it ran throughout.
	StoreKilledAt time.Duration `json:"store_killed_at,omitempty"`
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
	// AfterKill is the goodput of every tenant together, in multiples of
	// C, from a control period after the store was killed to the end;
	// Killed reports that it was (TenantsDetail.StoreKilledAt).
	AfterKill float64 `json:"after_kill,omitempty"`
	Killed    bool    `json:"killed,omitempty"`
}

// Met reports which of the flood targets the figures meet, by name:
// "converge", "light", "heavy", "jain", "blame", and "store" when the
// store was killed.
func (f TenantsFigures) Met() map[string]bool {
	m := map[string]bool{
		"converge": f.Converged && f.ConvergePeriods <= TenantsConvergeMax,
		"light":    f.Converged && f.WorstLight >= TenantsLightMin,
		"heavy":    f.HeavyFair >= TenantsHeavyMin,
		"jain":     f.Jain >= TenantsJainMin,
		"blame":    f.DemandBlameHeavy >= TenantsBlameMin,
	}
	if f.Killed {
		m["store"] = f.AfterKill >= TenantsStoreMin
	}
	return m
}

// Calibrate measures the capacity of the scenario's servers together
// (bench.SuiteConfig.CalibrateBackends), without tenants (the tracker
// costs nanoseconds a request).
func (c *Tenants) Calibrate(ctx context.Context, s *bench.SuiteConfig, target string, _ bench.Shape) (capacity, cpu float64, err error) {
	b, err := s.StartBackends(ctx, bench.ChildSpec{Target: target, Nice: bench.TargetNice, Quota: s.Quota}, c.specs())
	if err != nil {
		return 0, 0, err
	}
	return s.CalibrateBackends(ctx, target, b)
}

// specs are the servers' handlers.
func (c *Tenants) specs() []bench.HandlerSpec {
	specs := make([]bench.HandlerSpec, c.Servers)
	for i := range specs {
		specs[i] = c.shape().Spec
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

func newTenantMix(c *Tenants, seed uint64) *tenantMix {
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

// classify is load.Config.Classify: the generator calls it from one goroutine.
func (m *tenantMix) classify(int) (string, http.Header) {
	x := m.rng.Float64() * m.cum[len(m.cum)-1]
	i, _ := slices.BinarySearch(m.cum, x)
	i = min(i, len(m.names)-1)
	return m.names[i], m.headers[i]
}

// Run runs one part on a fresh Redis and fresh servers: the heavy and
// light tenants' requests, drawn at random in proportion to their rates,
// spread over the servers round robin for Duration, open loop.
func (c *Tenants) Run(ctx context.Context, t *bench.Trial) (s *bench.Sample, err error) {
	cfg, p := t.Suite, t.Point
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
	var stopOnce sync.Once
	var stopErr error
	stopStore := func() { stopOnce.Do(func() { stopErr = stopRedis() }) }
	defer func() { stopStore(); err = errors.Join(err, stopErr) }()
	child := &TenantChild{Redis: addr, Fleet: fmt.Sprintf("bench-%d", t.Index), Off: p.Part == TenantsOff, Period: c.Period, Utilisation: c.Utilisation, Protection: c.Protection}
	cs := bench.ChildSpec{Target: t.Target, Nice: bench.TargetNice, Quota: cfg.Quota}
	if err := cs.SetHook(c.Name(), child); err != nil {
		return nil, err
	}
	b, err := cfg.StartBackends(ctx, cs, c.specs())
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, b.Stop()) }()
	var urls []string
	for _, u := range b.URLs() {
		urls = append(urls, u+bench.WeatherPath)
	}
	seed := cfg.Seed + uint64(t.Index)
	rc := load.Config{
		URLs:     urls,
		Rate:     c.multiple() * t.Capacity,
		Duration: c.Duration,
		Deadline: cfg.Deadline,
		Seed:     seed,
		Bucket:   c.Bucket,
		Classify: newTenantMix(c, seed).classify,
	}
	if !cfg.Constant {
		rc.Arrival = load.Poisson
	}
	s = t.Sample()
	m := b.MeterCPU()
	t0 := time.Now()
	if c.KillStore > 0 {
		kill := time.AfterFunc(c.KillStore, stopStore)
		defer kill.Stop()
	}
	res, err := load.Run(ctx, rc)
	m.Stop(s)
	if res == nil {
		return nil, err
	}
	bench.Fill(s, res)
	// The servers' own counts come with their stop.
	err = errors.Join(err, b.Stop())
	d := &TenantsDetail{Part: p.Part, Heavy: c.Heavy, Light: c.Light, Lights: c.Lights, Period: c.Period, Bucket: c.Bucket, Protection: c.Protection, StoreKilledAt: c.KillStore}
	for i, js := range b.Stats() {
		var ts TenantServer
		if jerr := json.Unmarshal(js, &ts); jerr != nil || ts.Totals == nil {
			err = errors.Join(err, fmt.Errorf("bench: tenants: server %d reported no tenants (%s is not a sluice target?)", i, t.Target))
		}
		d.Servers = append(d.Servers, ts)
	}
	d.Steps = mergeSteps(d.Servers, t0)
	for i := range d.Servers {
		d.Servers[i].Steps = nil // in d.Steps
	}
	d.TenantsFigures = measureTenants(s, d, t.Capacity)
	return s, errors.Join(err, s.SetDetail(d))
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
func measureTenants(s *bench.Sample, ti *TenantsDetail, capacity float64) TenantsFigures {
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
	if k := ti.StoreKilledAt; k > 0 {
		i := min(int((k+ti.Period+ti.Bucket-1)/ti.Bucket), n)
		var ok int64
		for _, t := range ts {
			_, o := t.span(i, n)
			ok += o
		}
		if i < n {
			f.Killed = true
			f.AfterKill = float64(ok) / (float64(n-i) * ti.Bucket.Seconds()) / capacity
		}
	}
	measureBlame(&f, ti)
	return f
}

// measureBlame adds the figures that come from the servers: blame, drops,
// the first drop.
func measureBlame(f *TenantsFigures, ti *TenantsDetail) {
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

// TenantsRow sums up the runs of one part of the tenants scenario (the
// flood with enforcement on, or off) for one target: medians over the kept
// runs (those whose generator kept its schedule), or over all of them when
// none was kept. Shares are in multiples of C.
type TenantsRow struct {
	Target string `json:"target"`
	// Part is TenantsOn or TenantsOff.
	Part   string `json:"part"`
	Runs   int    `json:"runs"`
	Behind int    `json:"behind"`
	// Capacity is C of the servers together; Offered the whole load per
	// second.
	Capacity float64 `json:"capacity"`
	Offered  float64 `json:"offered"`
	// Converged counts the runs that converged; ConvergePeriods is the
	// median convergence time over them, in control periods.
	Converged       int     `json:"converged"`
	ConvergePeriods float64 `json:"converge_periods"`
	// The medians of TenantsFigures.
	LightSuccess     float64 `json:"light_success"`
	WorstLight       float64 `json:"worst_light"`
	LightSuccessAll  float64 `json:"light_success_all"`
	HeavyGoodput     float64 `json:"heavy_goodput"`
	HeavyFair        float64 `json:"heavy_fair"`
	Jain             float64 `json:"jain"`
	BlameHeavy       float64 `json:"blame_heavy"`
	DemandBlameHeavy float64 `json:"demand_blame_heavy"`
	HeavyDropped     float64 `json:"heavy_dropped"`
	LightDropped     float64 `json:"light_dropped"`
	// Killed counts the runs whose store was killed, AfterKill is the
	// median of their TenantsFigures.AfterKill.
	Killed    int     `json:"killed,omitempty"`
	AfterKill float64 `json:"after_kill,omitempty"`
	// Met counts, per flood target (TenantsFigures.Met), the
	// runs counted that met it.
	Met map[string]int `json:"met"`
}

// tenantsRun is a tenants sample with its detail.
type tenantsRun = detailed[TenantsDetail]

// Summarize returns one TenantsRow per target and part of rep's tenants
// samples, in the order they first appear; nil when there are none, or an
// error naming a sample whose detail does not decode.
func (c *Tenants) Summarize(rep *bench.Report) ([]TenantsRow, error) {
	runs, err := detailedRuns[TenantsDetail](rep, c.Name())
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	type targetPart struct{ target, part string }
	key := func(r tenantsRun) targetPart { return targetPart{r.Target, r.detail.Part} }
	return grouped(runs, key, func(k targetPart, runs []tenantsRun) TenantsRow {
		return tenantsRow(k.target, k.part, runs)
	}), nil
}

// Rows are Summarize's, nil without tenants samples or when a sample's
// detail does not decode (WriteReport says which).
func (c *Tenants) Rows(rep *bench.Report) any { return rowsOf(c.Summarize(rep)) }

// tenantsRow computes the row of one target and part.
func tenantsRow(target, part string, samples []tenantsRun) TenantsRow {
	r := TenantsRow{Target: target, Part: part, Met: map[string]int{}}
	kept := slices.DeleteFunc(slices.Clone(samples), func(s tenantsRun) bool { return s.Behind })
	r.Runs, r.Behind = len(kept), len(samples)-len(kept)
	if len(kept) == 0 {
		kept = samples
	}
	var capacity, offered, conv, light, worst, all, heavy, fair, jain, blame, dblame, hdrop, ldrop, after []float64
	for _, s := range kept {
		f := s.detail.TenantsFigures
		capacity = append(capacity, s.Capacity)
		offered = append(offered, s.Rates.Offered)
		if f.Converged {
			r.Converged++
			conv = append(conv, f.ConvergePeriods)
		}
		light = append(light, f.LightSuccess)
		worst = append(worst, f.WorstLight)
		all = append(all, f.LightSuccessAll)
		heavy = append(heavy, f.HeavyGoodput)
		fair = append(fair, f.HeavyFair)
		jain = append(jain, f.Jain)
		blame = append(blame, f.BlameHeavy)
		dblame = append(dblame, f.DemandBlameHeavy)
		hdrop = append(hdrop, f.HeavyDropped)
		ldrop = append(ldrop, float64(f.LightDropped))
		if f.Killed {
			r.Killed++
			after = append(after, f.AfterKill)
		}
		for name, ok := range f.Met() {
			if ok {
				r.Met[name]++
			}
		}
	}
	med := report.Median
	r.Capacity, r.Offered, r.ConvergePeriods = med(capacity), med(offered), med(conv)
	r.LightSuccess, r.WorstLight, r.LightSuccessAll = med(light), med(worst), med(all)
	r.HeavyGoodput, r.HeavyFair, r.Jain = med(heavy), med(fair), med(jain)
	r.BlameHeavy, r.DemandBlameHeavy = med(blame), med(dblame)
	r.HeavyDropped, r.LightDropped = med(hdrop), med(ldrop)
	r.AfterKill = med(after)
	return r
}

// tenantsTargets returns the flood targets in the order WriteReport
// checks them, with how it names them.
func tenantsTargets() []struct{ key, text string } {
	return []struct{ key, text string }{
		{"converge", fmt.Sprintf("converges within %g periods", TenantsConvergeMax)},
		{"light", fmt.Sprintf("each light tenant >= %g%% success after", 100*TenantsLightMin)},
		{"heavy", fmt.Sprintf("heavy >= %g of what is left", TenantsHeavyMin)},
		{"jain", fmt.Sprintf("Jain's index >= %g", TenantsJainMin)},
		{"blame", fmt.Sprintf(">= %g%% of the blame (of the demand) on heavy", 100*TenantsBlameMin)},
		{"store", fmt.Sprintf("goodput >= %g of C from a period after redis-server was killed", TenantsStoreMin)},
	}
}

// WriteReport writes the tenants samples of rep to w: a line on the
// setup, a table with one row per target and part, and, for the enforcing
// part, the flood targets with the runs that met them. It writes nothing
// for a report without tenants samples.
func (c *Tenants) WriteReport(w io.Writer, rep *bench.Report) error {
	runs, err := detailedRuns[TenantsDetail](rep, c.Name())
	if err != nil {
		return err
	}
	rows, err := c.Summarize(rep)
	if err != nil || len(rows) == 0 {
		return err
	}
	info, spec := &runs[0].detail, runs[0].Handler
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "\ntenants: %s of the target in child processes, protected by %s, each with a tenant tracker and an agent over one redis-server,\n",
		tenantsServers(info), tenantsProtection(info))
	fmt.Fprintf(&buf, "busy %v a request, control period %v; heavy at %sx of C, %d light tenants at %sx each, open loop, round robin:\n",
		spec.CPU, info.Period, formatMultiple(info.Heavy), info.Lights, formatMultiple(info.Light))
	tw := report.NewTab(&buf)
	report.Line(tw, "target", "enforce", "C/s", "offered/s", "converged", "lights %", "worst light %", "lights % all", "heavy xC", "heavy/left", "Jain", "blame heavy %", "of demand %", "heavy dropped %", "runs")
	for _, r := range rows {
		conv := "-"
		if r.Converged > 0 {
			conv = fmt.Sprintf("%.1f (%d)", r.ConvergePeriods, r.Converged)
		}
		report.Line(tw, r.Target, r.Part, fmt.Sprintf("%.0f", r.Capacity), fmt.Sprintf("%.0f", r.Offered), conv,
			pct2(r.LightSuccess), pct2(r.WorstLight), pct2(r.LightSuccessAll),
			fmt.Sprintf("%.3f", r.HeavyGoodput), fmt.Sprintf("%.3f", r.HeavyFair), fmt.Sprintf("%.3f", r.Jain),
			fmt.Sprintf("%.1f", 100*r.BlameHeavy), fmt.Sprintf("%.1f", 100*r.DemandBlameHeavy), fmt.Sprintf("%.1f", 100*r.HeavyDropped),
			fmt.Sprintf("%d/%d", r.Runs, r.Behind))
	}
	_ = tw.Flush() // into a bytes.Buffer
	for _, r := range rows {
		if r.Part != TenantsOn {
			continue
		}
		fmt.Fprintf(&buf, "%s, enforcing, against the flood targets (kept runs that met each):\n", r.Target)
		n := r.Runs
		if n == 0 {
			n = r.Behind // every run behind: they are the ones counted
		}
		for _, t := range tenantsTargets() {
			if t.key == "store" && r.Killed == 0 {
				continue
			}
			verdict := "FAIL"
			if n > 0 && r.Met[t.key] == n {
				verdict = "PASS"
			}
			fmt.Fprintf(&buf, "  %-4s %s: %d/%d\n", verdict, t.text, r.Met[t.key], n)
			if t.key == "store" {
				fmt.Fprintf(&buf, "       (median goodput %.3f of C)\n", r.AfterKill)
			}
		}
	}
	buf.WriteString("\n" + strings.Join([]string{
		"converged: the first time from which the light tenants together succeed on >= 99% of their requests over every span",
		"that starts there and lasts at least a period, in control periods from the start of the load (runs that converged);",
		"lights %, worst light %, heavy xC, heavy/left (the heavy tenant's goodput over C less the lights' load) and Jain",
		"(over each tenant's goodput / its max-min fair share) are measured from there, or over the whole window when it did",
		"not converge; lights % all: over the whole window; blame heavy %: the heavy tenant's share of the blame the servers",
		"counted, of demand %: once each tenant's blame per request is scaled to its requests offered (the simulation's",
		"measure); success: a 2xx within the deadline; runs: kept/behind.",
	}, "\n") + "\n")
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("bench: write the tenants report: %w", err)
	}
	return nil
}

// pct2 prints a fraction as a percentage with two decimals.
func pct2(f float64) string { return fmt.Sprintf("%.2f", 100*f) }

// tenantsPlotBucket is the width of the plot's buckets: the series' are
// summed to it, so that a light tenant's few requests a bucket do not make
// its line noise.
const tenantsPlotBucket = 500 * time.Millisecond

// Plots draws tenants.png in dir: for the first kept run of each part of
// the first target, the heavy tenant's goodput and the light tenants'
// together against time, in multiples of C, with enforcement on (solid)
// and off (dashed), and their fair shares.
func (c *Tenants) Plots(dir string, rep *bench.Report) ([]string, error) {
	all, err := detailedRuns[TenantsDetail](rep, c.Name())
	if err != nil || len(all) == 0 {
		return nil, err
	}
	return report.ShapePlots(dir, rep, c.Name(), func(string) (*plot.Plot, string, error) {
		return tenantsPlot(all)
	})
}

// tenantsPlot draws the chart of Plots from all of a report's tenants
// runs; nil when there is none.
func tenantsPlot(all []tenantsRun) (*plot.Plot, string, error) {
	const name = "tenants.png"
	if len(all) == 0 {
		return nil, name, nil
	}
	target := all[0].Target
	var runs []tenantsRun
	for _, part := range tenantsParts {
		var pick *tenantsRun
		for i := range all {
			s := &all[i]
			if s.Target != target || s.detail.Part != part {
				continue
			}
			if pick == nil || (pick.Behind && !s.Behind) || (s.Behind == pick.Behind && s.Repeat < pick.Repeat) {
				pick = s
			}
		}
		if pick != nil {
			runs = append(runs, *pick)
		}
	}
	if len(runs) == 0 {
		return nil, name, nil
	}
	info := &runs[0].detail
	p := report.NewPlot(fmt.Sprintf("Tenants: heavy at %sx of C, %d light at %sx each, over %s and Redis\ngoodput per %s ms in multiples of C; first kept run of each part (%s)",
		formatMultiple(info.Heavy), info.Lights, formatMultiple(info.Light), tenantsServers(info), strconv.FormatInt(tenantsPlotBucket.Milliseconds(), 10), runs[0].Target),
		"time since start of the load (s)", "goodput (x C)")
	p.Legend.Left, p.Legend.XOffs = false, -report.LegendInset
	ymax := 1.0
	colors := map[string]color.Color{"heavy": color.RGBA{R: 200, G: 40, B: 40, A: 255}, "lights": color.RGBA{R: 30, G: 90, B: 200, A: 255}}
	for _, s := range runs {
		heavy, lights := tenantsLines(s)
		dashes := []vg.Length(nil)
		if s.detail.Part == TenantsOff {
			dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		for _, ln := range []struct {
			who string
			xys plotter.XYs
		}{{"heavy", heavy}, {"lights", lights}} {
			if len(ln.xys) == 0 {
				continue
			}
			for _, xy := range ln.xys {
				ymax = max(ymax, xy.Y)
			}
			l, err := plotter.NewLine(ln.xys)
			if err != nil {
				return nil, name, fmt.Errorf("bench: tenants plot, %s: %w", ln.who, err)
			}
			l.Color, l.Width, l.Dashes = colors[ln.who], vg.Points(1.5), dashes
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("%s, enforcement %s", ln.who, s.detail.Part), l)
		}
	}
	end := runs[0].detail.Bucket * time.Duration(len(runs[0].Series))
	left := 1 - float64(info.Lights)*info.Light
	l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: left}, {X: end.Seconds(), Y: left}})
	if err != nil {
		return nil, name, fmt.Errorf("bench: tenants plot, share: %w", err)
	}
	l.Color, l.Dashes = color.Gray{Y: 128}, []vg.Length{vg.Points(2), vg.Points(2)}
	p.Add(l)
	p.Legend.Add(fmt.Sprintf("fair shares: heavy %.2f, lights %.2f", left, 1-left), l)
	p.Y.Min, p.Y.Max = 0, ymax*1.05
	return p, name, nil
}

// tenantsLines returns the heavy tenant's goodput and the light tenants'
// together per tenantsPlotBucket of s, in multiples of C.
func tenantsLines(s tenantsRun) (heavy, lights plotter.XYs) {
	width := s.detail.Bucket
	if width <= 0 || s.Capacity <= 0 {
		return nil, nil
	}
	per := max(int(tenantsPlotBucket/width), 1)
	sum := func(light bool) plotter.XYs {
		var ok []int64
		for name, c := range s.Classes {
			if (name != TenantHeavy) != light {
				continue
			}
			for i, b := range c.Series {
				if i/per >= len(ok) {
					ok = append(ok, 0)
				}
				ok[i/per] += b.OK
			}
		}
		var xys plotter.XYs
		sec := (time.Duration(per) * width).Seconds()
		for i, n := range ok {
			xys = append(xys, plotter.XY{X: (float64(i) + 0.5) * sec, Y: float64(n) / sec / s.Capacity})
		}
		return xys
	}
	return sum(false), sum(true)
}

// tenantsServers says how many servers a tenants run had.
func tenantsServers(info *TenantsDetail) string {
	if len(info.Servers) == 1 {
		return "1 server"
	}
	return fmt.Sprintf("%d servers", len(info.Servers))
}

// tenantsProtection says what protected a tenants run's servers besides
// their trackers.
func tenantsProtection(info *TenantsDetail) string {
	switch info.Protection {
	case TenantsDefault:
		return "the default configuration (the age limit alone)"
	case TenantsBusy:
		return "the busy gate and the timed queue"
	case "", TenantsConcurrency:
		// Runs saved before the setting had this one.
		return "a concurrency gate of a request per worker and the timed queue"
	}
	return info.Protection
}
