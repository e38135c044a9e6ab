package tenantsim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/tenant"
)

// bucketWidth is the resolution of the simulation's measurements; the
// results are given per second, the convergence is found to it.
const bucketWidth = 100 * time.Millisecond

// sim is one run of a scenario.
type sim struct {
	sc       Scenario
	loop     loop
	end      int64 // the run's end: arrivals stop, ticks stop
	period   int64
	deadline int64
	nb       int     // buckets in the run
	capacity float64 // C: requests a second at the base cost

	servers []*server
	tenants []*tenantRun
	agents  []*agentRun
	store   *simStore
	sample  event // samples the drops in force at each bucket's end

	rng     *rand.Rand // the balancer's
	rr      int
	free    []*request
	closing bool

	control     []ControlPeriod
	lastVersion uint64
}

// server is one server of the fleet: the real admission pipeline with the
// real tenant policy.
type server struct {
	id      string
	pipe    *admit.Pipeline
	tracker *tenant.Tracker
	drops   map[string]float64 // the drop table it applied last
}

// tenantRun is one tenant's arrival process and measurements.
type tenantRun struct {
	s        *sim
	name     string
	group    string
	spec     TenantSpec
	cost     int64   // ns of CPU per request
	mean     float64 // mean gap between arrivals, ns
	from, to int64
	rng      *rand.Rand
	arrive   event
	b        []bucket
	spill    bucket // what happens after the run (the drain): not reported
}

// bucket holds one tenant's counts over one bucketWidth of the run. The
// requests' fates are counted in the bucket of their arrival; completions
// and blame in the bucket of their end.
type bucket struct {
	offered, admitted, succeeded, dropped, rejected int64
	completed                                       int64
	blame                                           int64 // ns
	firstDrop                                       int64 // when its first drop was, ns; 0: none
	// dropMean, dropMin and dropMax are the tenant's drop fraction in
	// force at the bucket's end, across the servers (zero on a server
	// that does not enforce).
	dropMean, dropMin, dropMax float64
}

// request is one request, reused once it has ended.
type request struct {
	t       admit.Ticket
	done    event
	s       *sim
	srv     *server
	ten     *tenantRun
	arrived int64
}

// Run runs sc, normalised, on virtual time and checks its targets. It is
// deterministic: the same scenario and seed give the same Result (but for
// Elapsed).
func Run(sc Scenario) (*Result, error) {
	sc, err := sc.normalize()
	if err != nil {
		return nil, fmt.Errorf("tenantsim: scenario %q: %w", sc.Name, err)
	}
	start := time.Now()
	s, err := newSim(sc)
	if err != nil {
		return nil, err
	}
	s.loop.run(s.end)
	// Drain: arrivals and ticks have stopped; what waits or runs ends.
	s.loop.run(math.MaxInt64)
	s.close()
	res := s.result()
	res.Elapsed = Duration(time.Since(start))
	res.Targets = evaluate(res)
	return res, nil
}

func newSim(sc Scenario) (*sim, error) {
	s := &sim{
		sc:       sc,
		end:      int64(sc.Duration),
		period:   int64(sc.Period),
		deadline: int64(sc.Deadline),
		nb:       int((int64(sc.Duration) + int64(bucketWidth) - 1) / int64(bucketWidth)),
		capacity: float64(sc.Servers*sc.Workers) / time.Duration(sc.Cost).Seconds(),
		rng:      rand.New(rand.NewPCG(sc.Seed, 0x6c62)),
	}
	s.store = &simStore{
		mem:   tenant.NewMemoryStore(s.clock),
		clock: s.clock,
		delay: int64(sc.StoreDelay),
	}
	if w := sc.Outage; w != nil {
		s.store.outFrom, s.store.outTo = int64(w.From), s.windowEnd(w.To)
	}
	weights := map[string]float64{}
	for _, t := range sc.Tenants {
		if t.Weight != 1 {
			for _, name := range expand(t) {
				weights[name] = t.Weight
			}
		}
	}
	copts := tenant.ControllerConfig{
		Weights:     weights,
		Overloaded:  sc.Controller.Overloaded,
		Hold:        sc.Controller.Hold,
		Decay:       sc.Controller.Decay,
		Alpha:       sc.Controller.Alpha,
		Beta:        sc.Controller.Beta,
		Utilisation: sc.Controller.Utilisation,
	}
	off := sc.EnforceOff != nil && sc.EnforceOff.From == 0
	host := admit.Host{
		Clock:     s.clock,
		AfterFunc: func(d time.Duration, f func()) admit.Timer { return s.loop.afterFunc(d, f) },
	}
	key := admit.KeyFunc(func(a *admit.Attempt) (string, bool) {
		return a.Request.(*request).ten.name, true
	})
	for i := range sc.Servers {
		tr, err := tenant.New(tenant.Config{Key: key, Off: off, HashSeed: (uint64(sc.Seed)<<8 | uint64(i)) + 1})
		if err != nil {
			s.close()
			return nil, err
		}
		srv := &server{id: fmt.Sprintf("server-%d", i+1), tracker: tr}
		workers, err := gate.NewConcurrency(gate.ConcurrencyConfig{Limit: sc.Workers})
		if err != nil {
			s.close()
			return nil, err
		}
		srv.pipe, err = admit.New(admit.Config{
			Policies:  []admit.Policy{tr, recorder{s}},
			Gates:     []admit.Policy{workers},
			Queue:     &admit.QueueConfig{},
			MaxAge:    time.Duration(sc.MaxAge),
			Rejection: admit.Rejection{OnReject: s.rejected},
		}, host)
		if err != nil {
			s.close()
			return nil, err
		}
		s.servers = append(s.servers, srv)
		ctrl, err := tenant.NewController(copts)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("tenantsim: scenario %q: %w", sc.Name, err)
		}
		a := newAgentRun(s, srv)
		a.ctrl = ctrl
		a.agent, err = tenant.NewAgent(tenant.AgentConfig{
			Store:      &storeClient{st: s.store, a: a},
			Tracker:    tr,
			Controller: ctrl,
			ID:         srv.id,
			Period:     time.Duration(sc.Period),
			// The store's delay is virtual (storeClient); the real
			// round trip is a function call, so the real-time
			// timeout never fires.
			Timeout: time.Hour,
			Clock:   s.clock,
		})
		if err != nil {
			s.close()
			return nil, err
		}
		s.agents = append(s.agents, a)
		s.loop.schedule(&a.tick, s.period+int64(i)*int64(sc.Stagger))
		s.loop.schedule(&a.ctl, s.period+s.period/2+int64(i)*int64(sc.Stagger))
	}
	for i, spec := range sc.Tenants {
		cost := time.Duration(spec.Cost * float64(sc.Cost))
		rps := spec.Rate * s.capacity / spec.Cost
		for j, name := range expand(spec) {
			t := &tenantRun{
				s:     s,
				name:  name,
				group: spec.Name,
				spec:  spec,
				cost:  int64(cost),
				from:  int64(spec.Start),
				to:    s.windowEnd(spec.End),
				rng:   rand.New(rand.NewPCG(sc.Seed, uint64(i)<<20|uint64(j))),
				b:     make([]bucket, s.nb),
			}
			t.arrive.fire = t.next
			s.tenants = append(s.tenants, t)
			if rps > 0 {
				t.mean = 1e9 / rps
				s.loop.schedule(&t.arrive, t.from+t.gap())
			}
		}
	}
	if w := sc.EnforceOff; w != nil {
		if w.From > 0 {
			s.loop.schedule(&event{fire: func() { s.enforce(false) }}, int64(w.From))
		}
		if to := s.windowEnd(w.To); to < s.end {
			s.loop.schedule(&event{fire: func() { s.enforce(true) }}, to)
		}
	}
	s.sample.fire = s.sampleDrops
	s.loop.schedule(&s.sample, int64(bucketWidth))
	return s, nil
}

// windowEnd returns a window's end in ns: to, or the run's end for zero.
func (s *sim) windowEnd(to Duration) int64 {
	if to == 0 || int64(to) > s.end {
		return s.end
	}
	return int64(to)
}

// clock is the virtual clock, for the pipelines, the store and the agents.
func (s *sim) clock() int64 { return s.loop.now }

// enforce switches every tracker's enforcement.
func (s *sim) enforce(on bool) {
	for _, srv := range s.servers {
		srv.tracker.SetEnforce(on)
	}
}

// close closes the pipelines (waiting requests, if any, are not counted).
func (s *sim) close() {
	s.closing = true
	for _, srv := range s.servers {
		if srv.pipe != nil {
			srv.pipe.Close()
		}
	}
}

// gap returns the time to the tenant's next arrival.
func (t *tenantRun) gap() int64 { return int64(t.rng.ExpFloat64() * t.mean) }

// next is the tenant's arrival event: one request, then the next arrival.
func (t *tenantRun) next() {
	now := t.s.loop.now
	t.s.offer(t, now)
	if at := now + t.gap(); at < t.to {
		t.s.loop.schedule(&t.arrive, at)
	}
}

// at returns the tenant's bucket of time now.
func (t *tenantRun) at(now int64) *bucket {
	if i := now / int64(bucketWidth); i >= 0 && i < int64(len(t.b)) {
		return &t.b[i]
	}
	return &t.spill
}

// pick is the load balancer.
func (s *sim) pick() *server {
	if s.sc.Balancer == BalanceRoundRobin {
		s.rr = (s.rr + 1) % len(s.servers)
		return s.servers[s.rr]
	}
	return s.servers[s.rng.IntN(len(s.servers))]
}

// offer sends one request of t to a server.
func (s *sim) offer(t *tenantRun, now int64) {
	r := s.get()
	r.ten, r.arrived, r.srv = t, now, s.pick()
	t.at(now).offered++
	switch r.srv.pipe.Decide(&r.t) {
	case admit.Admitted:
		s.started(r)
	case admit.Rejected:
		s.put(r)
	}
}

// get returns a request to fill, from the free list or new.
func (s *sim) get() *request {
	if n := len(s.free); n > 0 {
		r := s.free[n-1]
		s.free = s.free[:n-1]
		return r
	}
	r := &request{s: s}
	r.t.Request = r
	r.t.OnStart = func() { s.started(r) }
	r.t.OnReject = func() { s.put(r) }
	r.done.fire = func() { s.finish(r) }
	return r
}

func (s *sim) put(r *request) {
	r.ten, r.srv = nil, nil
	s.free = append(s.free, r)
}

// started runs an admitted request: it holds one of its server's workers
// (the concurrency gate kept one free for it) for its cost.
func (s *sim) started(r *request) {
	r.ten.at(r.arrived).admitted++
	s.loop.schedule(&r.done, s.loop.now+r.ten.cost)
}

// finish ends a request that ran.
func (s *sim) finish(r *request) {
	r.srv.pipe.Done(&r.t, admit.Outcome{Status: 200})
	if s.loop.now-r.arrived <= s.deadline {
		r.ten.at(r.arrived).succeeded++
	}
	s.put(r)
}

// rejected is the pipelines' Rejection.OnReject: a drop for the tenant's
// share, or a rejection by the gates and the queue.
func (s *sim) rejected(a *admit.Attempt, reason string) {
	if s.closing {
		return
	}
	r := a.Request.(*request)
	b := r.ten.at(r.arrived)
	if reason == tenant.Reason {
		if b.dropped == 0 {
			b.firstDrop = s.loop.now
		}
		b.dropped++
	} else {
		b.rejected++
	}
}

// recorder is a policy after the tenant policy that records each
// request's blame (admit.Outcome.Blame) for the measurements; it admits
// everything.
type recorder struct{ s *sim }

// Admit implements admit.Policy.
func (recorder) Admit(*admit.Attempt) *admit.Refusal { return nil }

// Done implements admit.Policy.
func (rc recorder) Done(a *admit.Attempt, o admit.Outcome) {
	if o.Canceled {
		return
	}
	r := a.Request.(*request)
	b := r.ten.at(rc.s.loop.now)
	b.completed++
	b.blame += int64(o.Blame)
}

// sampleDrops records, at each bucket's end, each tenant's drop fraction
// in force on the servers.
func (s *sim) sampleDrops() {
	now := s.loop.now
	i := int(now/int64(bucketWidth)) - 1
	for _, t := range s.tenants {
		b := &t.b[i]
		b.dropMin = math.Inf(1)
		for _, srv := range s.servers {
			f := 0.0
			if srv.tracker.Enforcing() {
				f = srv.drops[t.name]
			}
			b.dropMean += f / float64(len(s.servers))
			b.dropMin = min(b.dropMin, f)
			b.dropMax = max(b.dropMax, f)
		}
	}
	if i+1 < s.nb {
		s.loop.schedule(&s.sample, now+int64(bucketWidth))
	}
}

// ticked is called on the loop when an agent's tick has ended: the drop
// table its server now enforces, and the controller's decision if it led.
func (s *sim) ticked(a *agentRun) {
	a.srv.drops = a.srv.tracker.Stats().Drops
	if !a.agent.Stats().Leader {
		return
	}
	d := a.ctrl.Last()
	if d.Version <= s.lastVersion {
		return
	}
	s.lastVersion = d.Version
	cp := ControlPeriod{
		At:       Duration(s.loop.now),
		Leader:   a.agent.ID(),
		Version:  d.Version,
		Servers:  d.Servers,
		State:    d.State,
		Rejected: d.Rejected,
		Closed:   d.Closed,
	}
	if !math.IsNaN(d.PredictionError) {
		e := d.PredictionError
		cp.PredictionError = &e
	}
	for _, td := range d.Tenants {
		cp.Tenants = append(cp.Tenants, ControlTenant{
			Tenant:     td.Tenant,
			BlameShare: td.BlameShare,
			Demand:     td.Demand,
			Predicted:  td.Predicted,
			Drop:       td.Drop,
		})
	}
	s.control = append(s.control, cp)
}
