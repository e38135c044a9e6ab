package tenantsim

import (
	"time"
)

// Result is one run of a scenario: what each tenant offered and received,
// second by second, what the controller decided each period, and the
// targets checked.
type Result struct {
	// Scenario is the scenario run, normalised (with its seed).
	Scenario Scenario `json:"scenario"`
	// Capacity is C: the requests a second the fleet serves at the base
	// cost, Servers·Workers/Cost.
	Capacity float64 `json:"capacity_rps"`
	// Tenants are the tenants' figures, in the scenario's order.
	Tenants []TenantResult `json:"tenants"`
	// Control holds the controller's decision of each period (the
	// leader's, whichever server leads).
	Control []ControlPeriod `json:"control"`
	// Agents are the servers' agents' counts at the end.
	Agents []AgentResult `json:"agents"`
	// StoreCalls and StoreFailures count the calls to the store and those
	// that failed (the outage).
	StoreCalls    int64 `json:"store_calls"`
	StoreFailures int64 `json:"store_failures"`
	// Targets are the targets' results, in the scenario's order.
	Targets []TargetResult `json:"targets"`
	// Events is the number of events the loop ran; Elapsed the real time
	// the run took.
	Events  int64    `json:"events"`
	Elapsed Duration `json:"elapsed"`
}

// TenantResult is one tenant's figures.
type TenantResult struct {
	Name string `json:"name"`
	// Group is the TenantSpec's name, shared by the tenants of a Count.
	Group string `json:"group"`
	// Rate, Cost and Weight are the tenant's spec (Rate in multiples of
	// C, Cost in multiples of the base cost); RequestRate is the requests
	// a second it sends while active.
	Rate        float64  `json:"rate"`
	Cost        float64  `json:"cost"`
	Weight      float64  `json:"weight"`
	RequestRate float64  `json:"request_rate"`
	Start       Duration `json:"start"`
	End         Duration `json:"end"`
	// Total is over the whole run.
	Total Totals `json:"total"`
	// Seconds are per second of the run.
	Seconds []Second `json:"seconds"`

	b []bucket
}

// Totals are a tenant's counts over a span of the run.
type Totals struct {
	// Offered counts the requests it sent; each was admitted, dropped
	// for its share (429, tenant-share) or rejected by the gates and the
	// queue (503); Succeeded counts those admitted that completed within
	// the deadline.
	Offered   int64 `json:"offered"`
	Admitted  int64 `json:"admitted"`
	Succeeded int64 `json:"succeeded"`
	Dropped   int64 `json:"dropped"`
	Rejected  int64 `json:"rejected"`
	// Success is Succeeded/Offered (1 when nothing was offered).
	Success float64 `json:"success"`
	// Goodput is the work of the requests that succeeded, in multiples of
	// C, averaged over the span.
	Goodput float64 `json:"goodput"`
	// BlameShare is its share of the blame (admit.Outcome.Blame) of the
	// requests that ended in the span. DemandShare is its share once each
	// tenant's blame is scaled by its requests offered over its requests
	// admitted: the blame its whole demand would have borne, which is
	// what the controller reads.
	BlameShare  float64 `json:"blame_share"`
	DemandShare float64 `json:"demand_share"`
}

// Second is a tenant's figures over one second of the run.
type Second struct {
	Offered   int64 `json:"offered"`
	Succeeded int64 `json:"succeeded"`
	Dropped   int64 `json:"dropped"`
	Rejected  int64 `json:"rejected"`
	// Goodput is the work that succeeded, in multiples of C.
	Goodput float64 `json:"goodput"`
	// Drop is its drop fraction in force, the mean over the servers and
	// over the second's 100 ms samples: the fraction the table a server
	// applied gives it by name, zero where enforcement is off (a tenant
	// not yet followed by name is dropped by Other's fraction, which this
	// does not show).
	Drop float64 `json:"drop"`
	// BlameShare is its share of the blame of the requests that ended in
	// the second.
	BlameShare float64 `json:"blame_share"`
}

// ControlPeriod is the controller's decision of one period
// (tenant.Decision).
type ControlPeriod struct {
	// At is when the leader's tick ended.
	At      Duration `json:"at"`
	Leader  string   `json:"leader"`
	Version uint64   `json:"version"`
	Servers int      `json:"servers"`
	// State is "overloaded", "full", "decaying" or "idle".
	State string `json:"state"`
	// Rejected is the fraction of the requests let in that the gates and
	// queues rejected; Closed the fraction of time the gates were closed.
	Rejected float64 `json:"rejected"`
	Closed   float64 `json:"closed"`
	// PredictionError is the mean relative error of last period's demand
	// predictions (absent when there were none).
	PredictionError *float64        `json:"prediction_error,omitempty"`
	Tenants         []ControlTenant `json:"tenants"`
}

// ControlTenant is one tenant's figures in a ControlPeriod.
type ControlTenant struct {
	Tenant     string  `json:"tenant"`
	BlameShare float64 `json:"blame_share"`
	Demand     float64 `json:"demand"`
	Predicted  float64 `json:"predicted"`
	Drop       float64 `json:"drop"`
}

// AgentResult is one server's agent's counts (tenant.AgentStats).
type AgentResult struct {
	ID           string `json:"id"`
	Ticks        int64  `json:"ticks"`
	Missed       int64  `json:"missed"`
	PushFailures int64  `json:"push_failures"`
	ReadFailures int64  `json:"read_failures"`
	LeadFailures int64  `json:"lead_failures"`
	Leaderships  int64  `json:"leaderships"`
	Leader       bool   `json:"leader"`
}

// TargetResult is one target's check.
type TargetResult struct {
	Target
	// Pass says whether the run met it.
	Pass bool `json:"pass"`
	// Value is the figure compared with Min or Max (periods for the
	// kinds that measure a time; -1 when the event never happened).
	Value float64 `json:"value"`
	// Measured is the start of the span measured: From, or the
	// convergence for a steady-state target.
	Measured Duration `json:"measured_from"`
	// Text says it in words.
	Text string `json:"text"`
}

// Passed reports whether every target passed.
func (r *Result) Passed() bool {
	for _, t := range r.Targets {
		if !t.Pass {
			return false
		}
	}
	return true
}

// result gathers the measurements of a finished run.
func (s *sim) result() *Result {
	res := &Result{
		Scenario:      s.sc,
		Capacity:      s.capacity,
		Control:       s.control,
		StoreCalls:    s.store.calls,
		StoreFailures: s.store.failures,
		Events:        s.loop.ran,
	}
	for _, t := range s.tenants {
		res.Tenants = append(res.Tenants, TenantResult{
			Name:        t.name,
			Group:       t.group,
			Rate:        t.spec.Rate,
			Cost:        t.spec.Cost,
			Weight:      t.spec.Weight,
			RequestRate: t.spec.Rate * s.capacity / t.spec.Cost,
			Start:       Duration(t.from),
			End:         Duration(t.to),
			b:           t.b,
		})
	}
	secs := int((s.end + int64(time.Second) - 1) / int64(time.Second))
	per := int(time.Second / bucketWidth)
	for i := range res.Tenants {
		t := &res.Tenants[i]
		t.Total = res.totals(t, res.span(0, len(t.b)))
		for sec := range secs {
			w := res.span(sec*per, min((sec+1)*per, len(t.b)))
			f := res.figures(t, w)
			var drop float64
			for _, b := range t.b[w.i0:w.i1] {
				drop += b.dropMean
			}
			t.Seconds = append(t.Seconds, Second{
				Offered:   f.offered,
				Succeeded: f.succeeded,
				Dropped:   f.dropped,
				Rejected:  f.rejected,
				Goodput:   f.goodput,
				Drop:      drop / float64(max(w.i1-w.i0, 1)),
			})
		}
	}
	for sec := range secs {
		w := res.span(sec*per, min((sec+1)*per, s.nb))
		var total float64
		for i := range res.Tenants {
			total += float64(res.figures(&res.Tenants[i], w).blame)
		}
		if total > 0 {
			for i := range res.Tenants {
				res.Tenants[i].Seconds[sec].BlameShare = float64(res.figures(&res.Tenants[i], w).blame) / total
			}
		}
	}
	for _, a := range s.agents {
		st := a.agent.Stats()
		res.Agents = append(res.Agents, AgentResult{
			ID:           a.agent.ID(),
			Ticks:        st.Ticks,
			Missed:       a.missed,
			PushFailures: st.PushFailures,
			ReadFailures: st.ReadFailures,
			LeadFailures: st.LeadFailures,
			Leaderships:  st.Leaderships,
			Leader:       st.Leader,
		})
	}
	return res
}

// span is a range of buckets, [i0, i1).
type span struct{ i0, i1 int }

// span returns the buckets [i0, i1), clipped to the run.
func (r *Result) span(i0, i1 int) span {
	n := 0
	if len(r.Tenants) > 0 {
		n = len(r.Tenants[0].b)
	}
	i0, i1 = max(min(i0, n), 0), max(min(i1, n), 0)
	return span{i0, max(i0, i1)}
}

// window returns the buckets of [from, to) (to zero: the end).
func (r *Result) window(from, to Duration) span {
	i1 := len(r.Tenants[0].b)
	if to != 0 {
		i1 = int((int64(to) + int64(bucketWidth) - 1) / int64(bucketWidth))
	}
	return r.span(int(int64(from)/int64(bucketWidth)), i1)
}

// seconds returns the length of w in seconds.
func (w span) seconds() float64 { return float64(w.i1-w.i0) * bucketWidth.Seconds() }

// at returns the time of the start of bucket i.
func at(i int) Duration { return Duration(int64(i) * int64(bucketWidth)) }

// figures are a tenant's counts over a span.
type figures struct {
	offered, admitted, succeeded, dropped, rejected, completed, blame int64
	// goodput and demand are the work that succeeded and the work
	// offered, in multiples of C, over the span's length.
	goodput, demand float64
}

func (r *Result) figures(t *TenantResult, w span) figures {
	var f figures
	for _, b := range t.b[w.i0:w.i1] {
		f.offered += b.offered
		f.admitted += b.admitted
		f.succeeded += b.succeeded
		f.dropped += b.dropped
		f.rejected += b.rejected
		f.completed += b.completed
		f.blame += b.blame
	}
	if sec := w.seconds(); sec > 0 {
		unit := t.Cost / (r.Capacity * sec)
		f.goodput = float64(f.succeeded) * unit
		f.demand = float64(f.offered) * unit
	}
	return f
}

// totals returns t's Totals over w, with its blame shares among all
// tenants.
func (r *Result) totals(t *TenantResult, w span) Totals {
	f := r.figures(t, w)
	tot := Totals{
		Offered:   f.offered,
		Admitted:  f.admitted,
		Succeeded: f.succeeded,
		Dropped:   f.dropped,
		Rejected:  f.rejected,
		Success:   ratio(f.succeeded, f.offered),
		Goodput:   f.goodput,
	}
	var blame float64
	est := r.demandBlame(w)
	var estSum float64
	for i := range r.Tenants {
		blame += float64(r.figures(&r.Tenants[i], w).blame)
		estSum += est[r.Tenants[i].Name]
	}
	if blame > 0 {
		tot.BlameShare = float64(f.blame) / blame
	}
	if estSum > 0 {
		tot.DemandShare = est[t.Name] / estSum
	}
	return tot
}

// demandBlame returns each tenant's blame over w scaled to its whole
// demand: its blame per completed request times its requests offered. A
// tenant none of whose requests completed is given the fleet's mean blame
// per unit of work.
func (r *Result) demandBlame(w span) map[string]float64 {
	out := map[string]float64{}
	var blame, work float64
	for i := range r.Tenants {
		f := r.figures(&r.Tenants[i], w)
		blame += float64(f.blame)
		work += float64(f.completed) * r.Tenants[i].Cost
	}
	for i := range r.Tenants {
		t := &r.Tenants[i]
		f := r.figures(t, w)
		switch {
		case f.completed > 0:
			out[t.Name] = float64(f.blame) / float64(f.completed) * float64(f.offered)
		case work > 0:
			out[t.Name] = blame / work * t.Cost * float64(f.offered)
		}
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
