package tenantsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/sluice-go/sluice/admit"
)

// Duration is a time.Duration that JSON writes as Go writes durations
// ("30s", "2.5ms") and reads from such a string or from a number of
// seconds.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("tenantsim: duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var sec float64
	if err := json.Unmarshal(b, &sec); err != nil {
		return fmt.Errorf("tenantsim: duration %s: want a string such as \"1.5s\" or a number of seconds", b)
	}
	if math.IsNaN(sec) || math.Abs(sec) > float64(math.MaxInt64)/1e9 {
		return fmt.Errorf("tenantsim: duration %s: out of range", b)
	}
	*d = Duration(sec * 1e9)
	return nil
}

// String returns the duration as time.Duration writes it.
func (d Duration) String() string { return time.Duration(d).String() }

// Window is a span of a scenario's time, [From, To); a zero To means the
// end of the run.
type Window struct {
	From Duration `json:"from"`
	To   Duration `json:"to,omitempty"`
}

// TenantSpec describes one tenant (or Count alike) of a scenario.
type TenantSpec struct {
	// Name names the tenant; with Count above 1, the tenants are Name-1
	// to Name-Count (with leading zeros to equal widths), and tables and
	// plots group them under Name.
	Name string `json:"name"`
	// Count is the number of such tenants; zero means 1.
	Count int `json:"count,omitempty"`
	// Rate is the work the tenant offers, as a multiple of the fleet's
	// capacity C: it sends Rate·C/Cost requests a second (Poisson
	// arrivals), so that Rate is the fraction of the fleet's workers it
	// would keep busy. For tenants of the base cost, Rate is simply the
	// request rate in multiples of C.
	Rate float64 `json:"rate"`
	// Cost is the CPU time of one of its requests, as a multiple of the
	// scenario's Cost; zero means 1.
	Cost float64 `json:"cost,omitempty"`
	// Weight is its weight in the controller's water-filling
	// (tenant.ControllerConfig.Weights); zero means 1.
	Weight float64 `json:"weight,omitempty"`
	// Start and End bound when it sends; a zero End means the end of the
	// run.
	Start Duration `json:"start,omitempty"`
	End   Duration `json:"end,omitempty"`
}

// ControllerSpec overrides the controller's options in a scenario (the
// fields of tenant.ControllerConfig of the same names); zero fields keep
// their defaults. The weights come from the tenants' specs.
type ControllerSpec struct {
	Overloaded  float64 `json:"overloaded,omitempty"`
	Hold        float64 `json:"hold,omitempty"`
	Decay       float64 `json:"decay,omitempty"`
	Alpha       float64 `json:"alpha,omitempty"`
	Beta        float64 `json:"beta,omitempty"`
	Utilisation float64 `json:"utilisation,omitempty"`
}

// Scenario is one simulation: the fleet, the tenants, the faults, and the
// targets its run is checked against. The zero values of its fields take
// the defaults below (see Normalize).
type Scenario struct {
	// Name names the scenario (-scenario NAME).
	Name string `json:"name"`
	// Description says what it shows, in a line.
	Description string `json:"description,omitempty"`
	// Servers is the number of servers behind the balancer (3); Workers
	// the number of workers each (4): its concurrency limit.
	Servers int `json:"servers,omitempty"`
	Workers int `json:"workers,omitempty"`
	// Cost is the base CPU cost of a request (1 ms). The fleet's capacity
	// is C = Servers·Workers/Cost requests a second at that cost.
	Cost Duration `json:"cost,omitempty"`
	// Duration is the run's virtual length (30 s).
	Duration Duration `json:"duration,omitempty"`
	// Period is the control period (1 s): each server's agent ticks once
	// a period, server i at i·Stagger past the period's start.
	Period  Duration `json:"period,omitempty"`
	Stagger Duration `json:"stagger,omitempty"`
	// StoreDelay is how long each call to the store takes (2 ms); the
	// call acts on the store at its end. It is at most Period/8, so that
	// an agent's period (up to six calls) ends within the period.
	StoreDelay Duration `json:"store_delay,omitempty"`
	// MaxAge is the servers' queue timeout (100 ms).
	MaxAge Duration `json:"max_age,omitempty"`
	// Deadline is the clients' deadline (1 s): a request succeeds when it
	// completes within it from its arrival.
	Deadline Duration `json:"deadline,omitempty"`
	// Balancer spreads requests over the servers: "random" (the default)
	// or "round-robin".
	Balancer string `json:"balancer,omitempty"`
	// Seed seeds the arrivals and the balancer: a run is a function of
	// the scenario and its seed.
	Seed uint64 `json:"seed,omitempty"`
	// Tenants are the tenants that send.
	Tenants []TenantSpec `json:"tenants"`
	// EnforceOff, when set, switches enforcement off (Tracker.SetEnforce)
	// on every server during the window: the controller still computes
	// drops, and no server applies them.
	EnforceOff *Window `json:"enforce_off,omitempty"`
	// Outage, when set, makes every call to the store fail during the
	// window.
	Outage *Window `json:"outage,omitempty"`
	// Controller overrides the controller's options.
	Controller ControllerSpec `json:"controller,omitzero"`
	// Targets are the checks of the run (see Target).
	Targets []Target `json:"targets,omitempty"`
}

// Target kinds. Times are in control periods; a target measures over its
// window [From, To) of the scenario's time, except that a steady-state
// target (success, fair, jain, share) starts at the convergence that a
// converge target with the same From found, when there is one.
//
// Tenants are "within share" or "over share" by the weighted max-min fair
// shares of the capacity among the tenants active in the window, at their
// offered rates (tenant.Controller's water-filling, done here on the
// scenario's figures): a tenant within share must never be dropped; a
// tenant over share is the one to drop.
const (
	// KindConverge: the loop converges within Max periods of From: from
	// then on, every period-long window (sliding by 100 ms) up to To has
	// the tenants within share succeed on at least 99% of their requests,
	// together, and each tenant over share receive at least 0.9 of its
	// fair share.
	KindConverge = "converge"
	// KindSuccess: each tenant within share succeeds on at least Min of
	// its requests.
	KindSuccess = "success"
	// KindFair: each tenant over share receives at least Min of its fair
	// share (goodput, in work).
	KindFair = "fair"
	// KindJain: Jain's fairness index of the normalised shares (goodput
	// over fair share, every tenant with a share) is at least Min.
	KindJain = "jain"
	// KindBlame: the tenants over share bear at least Min of the blame
	// (each tenant's blame per admitted request times its requests
	// offered: the blame of its whole demand, as the controller reads it).
	KindBlame = "blame"
	// KindShare: Tenant (or its group) receives between Min and Max of
	// the fleet's goodput, in work.
	KindShare = "share"
	// KindDropsOnlyOver: no tenant within share is ever dropped, and every
	// tenant over share is.
	KindDropsOnlyOver = "drops-only-over"
	// KindNoDrops: no request is dropped for its tenant's share.
	KindNoDrops = "no-drops"
	// KindDropsAppear: drops of the tenants over share begin within Max
	// periods of From.
	KindDropsAppear = "drops-appear"
	// KindHurt: the tenants within share succeed, together, on at most
	// Max of their requests: the harm that enforcement prevents.
	KindHurt = "hurt"
	// KindThroughput: the fleet's goodput, in work, is at least Min of C in
	// every whole second of the window.
	KindThroughput = "throughput"
	// KindResume: within Max periods of From, every server enforces a
	// drop on the tenants over share again.
	KindResume = "resume"
	// KindDecay: within Max periods of From, no server holds a drop any
	// more.
	KindDecay = "decay"
)

// kinds are the target kinds, in the order the documentation gives them.
func kinds() []string {
	return []string{KindConverge, KindSuccess, KindFair, KindJain, KindBlame, KindShare, KindDropsOnlyOver,
		KindNoDrops, KindDropsAppear, KindHurt, KindThroughput, KindResume, KindDecay}
}

// Target is one check of a scenario's run (see the Kind constants).
type Target struct {
	Kind string `json:"kind"`
	// From and To are the window it measures in (To zero: the end).
	From Duration `json:"from,omitempty"`
	To   Duration `json:"to,omitempty"`
	// Min and Max are its bounds: Max is in periods for the kinds that
	// measure a time.
	Min float64 `json:"min,omitempty"`
	Max float64 `json:"max,omitempty"`
	// Tenant is the tenant, or group, a share is about.
	Tenant string `json:"tenant,omitempty"`
}

// Defaults of a Scenario's zero fields.
const (
	DefaultServers    = 3
	DefaultWorkers    = 4
	DefaultCost       = time.Millisecond
	DefaultDuration   = 30 * time.Second
	DefaultPeriod     = time.Second
	DefaultStoreDelay = 2 * time.Millisecond
	DefaultMaxAge     = admit.DefaultMaxAge
	DefaultDeadline   = time.Second
)

// Balancers.
const (
	BalanceRandom     = "random"
	BalanceRoundRobin = "round-robin"
)

// Normalize returns sc with its defaults applied, or an error naming what
// cannot work.
func (sc Scenario) Normalize() (Scenario, error) {
	n, err := sc.normalize()
	if err != nil {
		return n, fmt.Errorf("tenantsim: scenario %q: %w", sc.Name, err)
	}
	return n, nil
}

// normalize is Normalize, its errors not yet prefixed (Load and Run add
// their own).
func (sc Scenario) normalize() (Scenario, error) {
	def := func(d *Duration, v time.Duration) {
		if *d == 0 {
			*d = Duration(v)
		}
	}
	if sc.Servers == 0 {
		sc.Servers = DefaultServers
	}
	if sc.Workers == 0 {
		sc.Workers = DefaultWorkers
	}
	def(&sc.Cost, DefaultCost)
	def(&sc.Duration, DefaultDuration)
	def(&sc.Period, DefaultPeriod)
	def(&sc.Stagger, time.Duration(sc.Period)/20)
	def(&sc.StoreDelay, DefaultStoreDelay)
	def(&sc.MaxAge, DefaultMaxAge)
	def(&sc.Deadline, DefaultDeadline)
	if sc.Balancer == "" {
		sc.Balancer = BalanceRandom
	}
	sc.Tenants = slices.Clone(sc.Tenants)
	for i := range sc.Tenants {
		t := &sc.Tenants[i]
		if t.Count == 0 {
			t.Count = 1
		}
		if t.Cost == 0 {
			t.Cost = 1
		}
		if t.Weight == 0 {
			t.Weight = 1
		}
	}
	sc.Targets = slices.Clone(sc.Targets)
	return sc, sc.check()
}

// check reports what cannot work in a normalised scenario.
func (sc *Scenario) check() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if sc.Name == "" {
		bad("name is empty")
	}
	if sc.Servers < 1 || sc.Servers > 64 {
		bad("servers %d: want 1 to 64", sc.Servers)
	}
	if sc.Workers < 1 || sc.Workers > 1024 {
		bad("workers %d: want 1 to 1024", sc.Workers)
	}
	if sc.Cost < Duration(time.Microsecond) || sc.Cost > Duration(time.Second) {
		bad("cost %v: want 1µs to 1s", sc.Cost)
	}
	if sc.Period < Duration(10*time.Millisecond) || sc.Period > Duration(time.Minute) {
		bad("period %v: want 10ms to 1m", sc.Period)
	}
	if sc.Duration < sc.Period || sc.Duration > Duration(time.Hour) {
		bad("duration %v: want one period (%v) to 1h", sc.Duration, sc.Period)
	}
	if sc.Stagger < 0 || sc.Stagger*Duration(max(sc.Servers-1, 0)) >= sc.Period {
		bad("stagger %v: want the servers' ticks (i·stagger) within one period", sc.Stagger)
	}
	if sc.StoreDelay < 0 || sc.StoreDelay > sc.Period/8 {
		bad("store_delay %v: want 0 to period/8 (%v)", sc.StoreDelay, sc.Period/8)
	}
	if sc.MaxAge <= 0 || sc.MaxAge > Duration(time.Minute) {
		bad("max_age %v: want (0, 1m]", sc.MaxAge)
	}
	if sc.Deadline <= 0 {
		bad("deadline %v: want a positive duration", sc.Deadline)
	}
	if sc.Balancer != BalanceRandom && sc.Balancer != BalanceRoundRobin {
		bad("balancer %q: want %q or %q", sc.Balancer, BalanceRandom, BalanceRoundRobin)
	}
	if len(sc.Tenants) == 0 {
		bad("no tenants")
	}
	names := map[string]bool{}
	var rate float64
	for i, t := range sc.Tenants {
		what := fmt.Sprintf("tenants[%d] (%q)", i, t.Name)
		switch {
		case t.Name == "":
			bad("tenants[%d]: name is empty", i)
		case names[t.Name]:
			bad("%s: the name is used twice", what)
		}
		names[t.Name] = true
		if t.Count < 1 || t.Count > 1000 {
			bad("%s: count %d: want 1 to 1000", what, t.Count)
		}
		if !(t.Rate >= 0) || t.Rate > 100 {
			bad("%s: rate %v: want 0 to 100 (multiples of C)", what, t.Rate)
		}
		if !(t.Cost > 0) || t.Cost > 1000 || time.Duration(t.Cost*float64(sc.Cost)) < time.Microsecond {
			bad("%s: cost %v: want a positive multiple of the base cost, of at least 1µs and at most 1000", what, t.Cost)
		}
		if !(t.Weight > 0) || t.Weight > 1e6 {
			bad("%s: weight %v: want (0, 1e6]", what, t.Weight)
		}
		if t.Start < 0 || (t.End != 0 && t.End <= t.Start) || t.Start >= sc.Duration {
			bad("%s: start %v and end %v: want 0 <= start < end, and start within the run", what, t.Start, t.End)
		}
		rate += t.Rate * float64(t.Count) / t.Cost
	}
	if rate > 1000 {
		bad("the tenants send %.0f·C requests a second in all: want at most 1000·C", rate)
	}
	for _, w := range []struct {
		name string
		w    *Window
	}{{"enforce_off", sc.EnforceOff}, {"outage", sc.Outage}} {
		if w.w != nil && (w.w.From < 0 || (w.w.To != 0 && w.w.To <= w.w.From)) {
			bad("%s [%v, %v): want 0 <= from < to (to zero: the end)", w.name, w.w.From, w.w.To)
		}
	}
	for i, tg := range sc.Targets {
		what := fmt.Sprintf("targets[%d] (%s)", i, tg.Kind)
		if !slices.Contains(kinds(), tg.Kind) {
			bad("targets[%d]: kind %q: want one of %v", i, tg.Kind, kinds())
		}
		if tg.From < 0 || (tg.To != 0 && tg.To <= tg.From) || tg.From >= sc.Duration {
			bad("%s: window [%v, %v): want 0 <= from < to, within the run", what, tg.From, tg.To)
		}
		if math.IsNaN(tg.Min) || math.IsNaN(tg.Max) || tg.Min < 0 || tg.Max < 0 {
			bad("%s: min and max must not be negative", what)
		}
		if tg.Kind == KindShare {
			if !names[tg.Tenant] && !slices.Contains(sc.tenantNames(), tg.Tenant) {
				bad("%s: tenant %q is not one of the scenario's", what, tg.Tenant)
			}
			if tg.Max < tg.Min || tg.Max > 1 {
				bad("%s: want 0 <= min <= max <= 1", what)
			}
		}
	}
	return errors.Join(errs...)
}

// tenantNames returns the names of the scenario's tenants, Count expanded.
func (sc *Scenario) tenantNames() []string {
	var out []string
	for _, t := range sc.Tenants {
		out = append(out, expand(t)...)
	}
	return out
}

// expand returns the names of the tenants that t describes.
func expand(t TenantSpec) []string {
	if t.Count <= 1 {
		return []string{t.Name}
	}
	width := len(strconv.Itoa(t.Count))
	out := make([]string, t.Count)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%0*d", t.Name, width, i+1)
	}
	return out
}

// Scaled returns sc with every time of its story (tenants' start and end,
// the windows, the targets' windows, the duration) multiplied by
// d/sc.Duration, rounded to 100 ms; the period, the costs and the limits
// in periods stay.
// It gives a short form of a scenario, for tests.
func (sc Scenario) Scaled(d time.Duration) Scenario {
	from := time.Duration(sc.Duration)
	if from == 0 {
		from = DefaultDuration
	}
	if d <= 0 || d == from {
		return sc
	}
	f := float64(d) / float64(from)
	scale := func(v Duration) Duration { // to the resolution of the measurements
		return Duration(math.Round(float64(v)*f/float64(bucketWidth))) * Duration(bucketWidth)
	}
	sc.Duration = Duration(d)
	sc.Tenants = slices.Clone(sc.Tenants)
	for i := range sc.Tenants {
		sc.Tenants[i].Start, sc.Tenants[i].End = scale(sc.Tenants[i].Start), scale(sc.Tenants[i].End)
	}
	for _, w := range []**Window{&sc.EnforceOff, &sc.Outage} {
		if *w != nil {
			*w = &Window{From: scale((*w).From), To: scale((*w).To)}
		}
	}
	sc.Targets = slices.Clone(sc.Targets)
	for i := range sc.Targets {
		sc.Targets[i].From, sc.Targets[i].To = scale(sc.Targets[i].From), scale(sc.Targets[i].To)
	}
	return sc
}

// Load reads scenarios from JSON: one scenario object, or an array of
// them. Each is normalised and checked.
func Load(r io.Reader) ([]Scenario, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	data = bytes.TrimSpace(data)
	var list []Scenario
	dec := func(v any) error {
		d := json.NewDecoder(bytes.NewReader(data))
		d.DisallowUnknownFields()
		return d.Decode(v)
	}
	if len(data) > 0 && data[0] == '[' {
		err = dec(&list)
	} else {
		var one Scenario
		err = dec(&one)
		list = []Scenario{one}
	}
	if err != nil {
		return nil, fmt.Errorf("tenantsim: reading scenarios: %w", err)
	}
	if len(list) == 0 {
		return nil, errors.New("tenantsim: no scenarios in the file")
	}
	for i := range list {
		sc, err := list[i].normalize()
		if err != nil {
			return nil, fmt.Errorf("tenantsim: scenario %d (%q): %w", i, list[i].Name, err)
		}
		list[i] = sc
	}
	return list, nil
}

// Builtin returns the built-in scenarios, in the order sluice simulate
// runs them: flood, alice-bob, weighted, arrive-leave, off-then-on,
// no-false-drops, store-outage. Each call returns new values.
func Builtin() []Scenario {
	s := func(v float64) Duration { return Duration(v * float64(time.Second)) }
	flood := []TenantSpec{
		{Name: "heavy", Rate: 5},
		{Name: "light", Count: 10, Rate: 0.05},
	}
	// steady are the targets of a converged loop, from from to to.
	steady := func(from, to Duration) []Target {
		return []Target{
			{Kind: KindConverge, From: from, To: to, Max: 2},
			{Kind: KindSuccess, From: from, To: to, Min: 0.99},
			{Kind: KindFair, From: from, To: to, Min: 0.9},
			{Kind: KindJain, From: from, To: to, Min: 0.95},
		}
	}
	return []Scenario{
		{
			Name:        "flood",
			Description: "one tenant at 5x C, ten at 0.05x C each; enforcement on from the start",
			Tenants:     flood,
			Targets: append(steady(0, 0),
				Target{Kind: KindBlame, Min: 0.9},
				Target{Kind: KindDropsOnlyOver}),
		},
		{
			Name: "alice-bob",
			Description: "Alice sends 10x Bob's requests at 1/20 of his cost: 0.4x C of work against his 0.8x C; " +
				"only Bob is dropped",
			Tenants: []TenantSpec{
				{Name: "alice", Rate: 0.4, Cost: 0.2},
				{Name: "bob", Rate: 0.8, Cost: 4},
			},
			Targets: append(steady(0, 0), Target{Kind: KindDropsOnlyOver}),
		},
		{
			Name:        "weighted",
			Description: "two tenants at 1x C each, gold with weight 3: gold gets about 0.75 of C",
			Tenants: []TenantSpec{
				{Name: "gold", Rate: 1, Weight: 3},
				{Name: "silver", Rate: 1},
			},
			Targets: []Target{
				{Kind: KindConverge, Max: 2},
				{Kind: KindShare, Tenant: "gold", Min: 0.7, Max: 0.8},
				{Kind: KindFair, Min: 0.9},
				{Kind: KindJain, Min: 0.95},
			},
		},
		{
			Name:        "arrive-leave",
			Description: "light tenants at 0.6x C in all; a heavy one at 3x C from 10 s to 20 s",
			Tenants: []TenantSpec{
				{Name: "a", Rate: 0.25},
				{Name: "b", Rate: 0.15},
				{Name: "c", Rate: 0.1},
				{Name: "d", Rate: 0.05, Count: 2},
				{Name: "heavy", Rate: 3, Start: s(10), End: s(20)},
			},
			Targets: append(steady(s(10), s(20)),
				Target{Kind: KindDropsAppear, From: s(10), To: s(20), Max: 2},
				Target{Kind: KindDropsOnlyOver},
				Target{Kind: KindNoDrops, To: s(10)},
				Target{Kind: KindDecay, From: s(20), Max: 10},
				Target{Kind: KindSuccess, From: s(21), Min: 0.99},
			),
		},
		{
			Name:        "off-then-on",
			Description: "the flood with enforcement off for the first 10 s, then on",
			Tenants:     flood,
			EnforceOff:  &Window{To: s(10)},
			Targets: append([]Target{{Kind: KindHurt, To: s(10), Max: 0.5}},
				steady(s(10), 0)...),
		},
		{
			Name:        "no-false-drops",
			Description: "0.9x C in all over tenants of different rates and costs: no drops",
			Tenants: []TenantSpec{
				{Name: "a", Rate: 0.4},
				{Name: "b", Rate: 0.25, Cost: 2},
				{Name: "c", Rate: 0.15, Cost: 0.5},
				{Name: "d", Rate: 0.1},
			},
			Targets: []Target{
				{Kind: KindNoDrops},
				{Kind: KindSuccess, Min: 0.99},
			},
		},
		{
			Name:        "store-outage",
			Description: "the flood with every store call failing from 10 s to 20 s",
			Tenants:     flood,
			Outage:      &Window{From: s(10), To: s(20)},
			Targets: append(append(steady(0, s(10)),
				Target{Kind: KindThroughput, From: s(10), To: s(20), Min: 0.8},
				Target{Kind: KindResume, From: s(20), Max: 2}),
				steady(s(20), 0)...),
		},
	}
}
