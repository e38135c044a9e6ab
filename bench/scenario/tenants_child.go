package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/tenant"
)

// What protects a server of the tenants scenario (TenantChild.Protection),
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

// TenantsProtections returns the protections of TenantChild.Protection.
func TenantsProtections() []string { return []string{TenantsDefault, TenantsBusy, TenantsConcurrency} }

// TenantChild is the tenants hook's settings: what a server of the tenants
// scenario needs beyond its target: its tenant tracker (enforcing unless
// Off) and its agent, with a controller that leads by lease, over the
// RedisStore of Fleet at Redis, and its protection (one of
// TenantsProtections; empty: TenantsDefault). The child reports a
// TenantServer when it stops.
type TenantChild struct {
	Redis       string        `json:"redis"`
	Fleet       string        `json:"fleet"`
	Off         bool          `json:"off,omitempty"`
	Period      time.Duration `json:"period"`
	Utilisation float64       `json:"utilisation,omitempty"`
	Protection  string        `json:"protection,omitempty"`
}

// ChildHook returns the tenants scenario's part in its servers' child
// processes: on a sluice target, the tenant tracker and its agent
// (TenantChild), stopped after the server, and the TenantServer the
// server reports in place of its admission counters.
func (c *Tenants) ChildHook() bench.ChildHook {
	return bench.ChildHook{Name: c.Name(), Open: func(cs bench.ChildSpec, _ http.Handler) (*bench.ChildPart, error) {
		tc, err := bench.DecodeHookConfig[TenantChild](cs)
		if err != nil {
			return nil, err
		}
		var agent *tenantAgent
		return &bench.ChildPart{
			Configure: func(cfg *sluice.Config) (err error) {
				agent, err = tc.attach(cfg)
				return err
			},
			Stats: func(srv *sluice.Server) any { return agent.stats(srv.Stats()) },
			Close: func() error { return agent.stop() },
		}, nil
	}}
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
	// report; the time from the start of the load in the scenario's steps.
	At time.Time `json:"at"`
	// Offset is At from the start of the load (the scenario's steps only).
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
