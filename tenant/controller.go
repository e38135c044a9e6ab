package tenant

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
)

// ControllerConfig configures a Controller. The zero value works.
type ControllerConfig struct {
	// Weights favours tenants on purpose: in an overload each tenant's
	// fair share of the capacity is proportional to its weight. A tenant
	// not in it (Other included) weighs DefaultWeight.
	Weights map[string]float64
	// DefaultWeight is the weight of tenants not in Weights; zero means 1.
	DefaultWeight float64
	// Overloaded is the fraction of the requests that reached the
	// servers' own admission stages (gates, queue, age limit) and were
	// rejected there, above which the fleet is overloaded and the drops
	// are computed anew; zero means 0.005.
	Overloaded float64
	// Hold is the fraction of the time the gates were closed at or above
	// which drops in force are kept (the fleet is full, though no longer
	// rejecting: the drops are what keeps it so); below it, and without
	// overload, drops decay. Zero means 0.3.
	Hold float64
	// Decay multiplies every drop fraction each period once the fleet is
	// neither overloaded nor full, but not below the drop that the
	// tenant's demand of the period still asks (the drops may be what
	// keeps the fleet from refusing); fractions under 0.5% become zero.
	// Zero means 0.5.
	Decay float64
	// Alpha and Beta are the smoothing factors of the demand prediction
	// (Holt's linear trend: Alpha for the level, in (0, 1], Beta for the
	// trend, in [0, 1]). Zero means 0.8 for Alpha and no trend (a plain
	// EWMA) for Beta: the changes of demand the controller sees are mostly
	// steps (a tenant arrives, leaves, or is named after a period pooled
	// under Other), on which a trend overshoots and drops the tenant
	// below its share for periods; give Beta (0.3, say) for demand that
	// ramps.
	Alpha, Beta float64
	// Utilisation is the fraction of the fleet's capacity that the
	// water-filling shares out, in (0, 1]: a little headroom, so that the
	// tenants within their share do not queue. Zero means 0.97.
	Utilisation float64
}

// Controller turns the servers' reports into the drop table, once a
// period. It is plain computation (Step); an Agent runs it against a store,
// embedded in a server or as its own process (sluice controller).
//
// Each period it:
//
//  1. adds up the reports of every server, per tenant;
//  2. measures each tenant's demand in units of the fleet's capacity:
//     its requests offered (arrived at the tenant policy) times the
//     blame each of its requests bears while the fleet is saturated (the
//     closed time of the gates attributed to its requests, over its
//     requests admitted, on the servers whose gates were closed at least
//     saturatedClosed of the period), with one second of closed time per
//     server and second as the capacity. While the gates are closed only
//     part of the time, a request's blame measures its cost badly (the
//     requests that arrive in bursts take more of it than a smooth
//     stream's), so the blame per request last measured while saturated
//     is kept until the next; a tenant never seen so is measured by its
//     share of the blame of the period, over the capacity served;
//  3. predicts each tenant's demand for the next period from its history
//     (an EWMA, with Holt's trend when Beta is set);
//  4. when the fleet is overloaded (it rejected more than Overloaded of
//     the requests it let in), water-fills Utilisation of the capacity:
//     each tenant gets at most its demand, and the rest is shared in
//     proportion to the weights (weighted max-min), so a tenant is dropped
//     only by what it asks beyond its fair share; its drop fraction is
//     1 - share/demand;
//  5. when the fleet is full but no longer rejecting (its gates were
//     closed at least Hold of the time), keeps the drops, recomputed on
//     the new demand; otherwise lets them decay by Decay a period, down
//     to what each tenant's demand of the period still asks (its
//     requests at its cost measured while saturated, or at the price its
//     share of the blame gave it when the fleet was last overloaded or
//     full): a flood that goes on keeps its drop, one that ended loses
//     it.
//
// No drops are ever set while the fleet rejects nothing: a fleet that
// keeps up is not overloaded, whatever any tenant sends.
type Controller struct {
	opts    ControllerConfig
	version uint64
	drops   map[string]float64
	hist    map[string]*history

	cost map[string]float64 // blame per request while saturated, in seconds
	// share is the cost per request (demand over requests, per server)
	// that a tenant's share of the blame gave it in the last period the
	// fleet was overloaded or full, for a tenant never measured while
	// saturated: what a decaying period prices its requests at.
	share map[string]float64

	mu   sync.Mutex // last, which Last reads from other goroutines
	last Decision
}

// Rates are a tenant's counts across the fleet, per second of the servers'
// periods.
type Rates struct {
	// Requests, Admitted, Rejected and Dropped are requests per second
	// (see Usage).
	Requests, Admitted, Rejected, Dropped float64
	// Blame and Busy are seconds per second.
	Blame, Busy float64
}

func (r *Rates) add(u Usage, sec float64) {
	r.Requests += float64(u.Requests) / sec
	r.Admitted += float64(u.Admitted) / sec
	r.Rejected += float64(u.Rejected) / sec
	r.Dropped += float64(u.Dropped) / sec
	r.Blame += u.Blame.Seconds() / sec
	r.Busy += u.Busy.Seconds() / sec
}

// history is one tenant's demand prediction state.
type history struct {
	level, trend float64
	predicted    float64 // the prediction made for this period, or NaN
	idle         int     // periods without a report
}

// Decision is what the controller saw and decided in one period.
type Decision struct {
	// Version is the version of the table it wrote.
	Version uint64
	// Servers is the number of reports used.
	Servers int
	// State is "overloaded", "full", "decaying" or "idle".
	State string
	// Rejected is the fraction of the requests let in that the servers
	// rejected; Closed the fraction of time their gates were closed.
	Rejected, Closed float64
	// Tenants holds each tenant's figures, sorted by name.
	Tenants []TenantDecision
	// PredictionError is the mean absolute error of last period's
	// predictions of this period's demand, relative to the demand, over
	// the tenants with a prediction and a demand (NaN when none).
	PredictionError float64
}

// TenantDecision is one tenant's figures in a Decision.
type TenantDecision struct {
	Tenant string
	// Rates are the fleet's counts, per second.
	Rates Rates
	// BlameShare is the tenant's share of the blame.
	BlameShare float64
	// Demand is its measured demand, Predicted the demand predicted for
	// the next period, in units of the fleet's capacity.
	Demand, Predicted float64
	// Drop is its drop fraction from now on.
	Drop float64
}

// NewController returns a Controller with opts; it fails for settings that
// cannot work, naming the value.
func NewController(opts ControllerConfig) (*Controller, error) {
	o := opts
	o.DefaultWeight = cmp.Or(o.DefaultWeight, 1)
	o.Overloaded = cmp.Or(o.Overloaded, 0.005)
	o.Hold = cmp.Or(o.Hold, 0.3)
	o.Decay = cmp.Or(o.Decay, 0.5)
	o.Alpha = cmp.Or(o.Alpha, 0.8)
	o.Utilisation = cmp.Or(o.Utilisation, 0.97)
	check := func(name string, v, lo, hi float64) error {
		if math.IsNaN(v) || v < lo || v > hi {
			return fmt.Errorf("tenant: ControllerConfig.%s %v: want a value in [%v, %v]", name, v, lo, hi)
		}
		return nil
	}
	for _, c := range []struct {
		name      string
		v, lo, hi float64
	}{
		{"DefaultWeight", o.DefaultWeight, 1e-9, math.MaxFloat64},
		{"Overloaded", o.Overloaded, 0, 1},
		{"Hold", o.Hold, 0, 1},
		{"Decay", o.Decay, 0, 1},
		{"Alpha", o.Alpha, 1e-9, 1},
		{"Beta", o.Beta, 0, 1},
		{"Utilisation", o.Utilisation, 1e-9, 1},
	} {
		if err := check(c.name, c.v, c.lo, c.hi); err != nil {
			return nil, err
		}
	}
	for name, w := range o.Weights {
		if err := check(fmt.Sprintf("Weights[%q]", name), w, 1e-9, math.MaxFloat64); err != nil {
			return nil, err
		}
	}
	return &Controller{opts: o, drops: map[string]float64{}, hist: map[string]*history{}, cost: map[string]float64{}, share: map[string]float64{}}, nil
}

// SetVersion makes the next table's version follow v (a controller that
// takes over from another continues its numbering).
func (c *Controller) SetVersion(v uint64) { c.version = max(c.version, v) }

// Last returns the last period's Decision. It is safe to call while
// another goroutine steps the controller (a metrics scrape, a dashboard).
func (c *Controller) Last() Decision {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// Step computes the drop table from the latest report of every server.
func (c *Controller) Step(reports []Report) Table {
	fleet := map[string]*Rates{}
	var period, closed float64
	servers := 0
	// Blame and admissions on the servers that were saturated.
	type sat struct{ blame, admitted float64 }
	saturated := map[string]sat{}
	for _, r := range reports {
		sec := r.Period.Seconds()
		if sec <= 0 {
			continue
		}
		servers++
		period += sec
		closed += r.Closed.Seconds()
		full := r.Closed.Seconds() >= saturatedClosed*sec
		for _, u := range r.Tenants {
			if full && u.Admitted > 0 {
				s := saturated[u.Tenant]
				s.blame += u.Blame.Seconds()
				s.admitted += float64(u.Admitted)
				saturated[u.Tenant] = s
			}
			f := fleet[u.Tenant]
			if f == nil {
				f = &Rates{}
				fleet[u.Tenant] = f
			}
			f.add(u, sec)
		}
	}
	d := Decision{Servers: len(reports), PredictionError: math.NaN()}
	var blame, admitted, letIn, rejected float64
	for _, name := range slices.Sorted(maps.Keys(fleet)) { // in order: the same sums for the same reports
		f := fleet[name]
		blame += f.Blame
		admitted += f.Admitted
		rejected += f.Rejected
		letIn += f.Admitted + f.Rejected
	}
	if letIn > 0 {
		d.Rejected = rejected / letIn
	}
	if period > 0 {
		d.Closed = closed / period
	}

	// Demand, in units of the fleet's capacity.
	for name, s := range saturated {
		if old := c.cost[name]; old > 0 {
			c.cost[name] = (old + s.blame/s.admitted) / 2
		} else {
			c.cost[name] = s.blame / s.admitted
		}
	}
	demand := map[string]float64{}
	byShare := map[string]float64{} // cost per request of the tenants priced by their share of the blame
	if blame > 0 && admitted > 0 {
		mean := blame / admitted
		for name, f := range fleet {
			offered := f.Requests
			if d, ok := c.measured(name, f, servers); ok {
				demand[name] = d
				continue
			}
			cost := mean
			if f.Admitted > 0 {
				cost = f.Blame / f.Admitted
			}
			demand[name] = offered * cost / blame
			if offered > 0 {
				byShare[name] = demand[name] * float64(servers) / offered
			}
		}
	}
	c.predict(demand, &d)

	prev := c.drops
	overloaded := d.Rejected > c.opts.Overloaded && blame > 0
	full := d.Closed >= c.opts.Hold && len(prev) > 0 && blame > 0
	switch {
	case overloaded || full:
		d.State = "overloaded"
		predicted := make(map[string]float64, len(demand))
		for name := range demand {
			predicted[name] = c.hist[name].next()
		}
		next := waterFill(predicted, c.weight, c.opts.Utilisation)
		if !overloaded {
			// Full but not rejecting: the drops in force are what keeps
			// it so; follow the demand.
			d.State = "full"
		}
		c.drops = next
		maps.Copy(c.share, byShare)
	case len(prev) > 0:
		d.State = "decaying"
		// The drops in force may be what keeps the fleet from
		// refusing: a tenant whose demand this period still exceeds its
		// fair share keeps the drop that share asks, and only what the
		// demand no longer justifies decays. The demand is the tenant's
		// requests at a price: its cost per request last measured while
		// saturated; or else, since a server protected by its age limit
		// alone is seldom saturated, the cost its share of the blame gave
		// it in the last period the fleet was overloaded or full. Not
		// this period's share: a fleet under its capacity serves less
		// work than its capacity, so sharing the capacity out by blame
		// prices every request too high (live, one server: a heavy
		// tenant at 4.9 C read as 5.3 to 6.3 C, and held below its
		// share). A period without blame (the drops keep the fleet well
		// under its capacity) prices the same way. Failing both, the
		// period's own share; a tenant never priced loses its drop.
		want := map[string]float64{}
		for name, f := range fleet {
			if d, ok := c.measured(name, f, servers); ok {
				want[name] = d
			} else if cost := c.share[name]; cost > 0 && servers > 0 {
				want[name] = f.Requests * cost / float64(servers)
			} else if d, ok := demand[name]; ok {
				want[name] = d
			}
		}
		fair := waterFill(want, c.weight, c.opts.Utilisation)
		next := make(map[string]float64, len(prev))
		for name, f := range prev {
			next[name] = min(f, max(f*c.opts.Decay, fair[name]))
		}
		c.drops = next
	default:
		d.State = "idle"
	}
	for name, f := range c.drops {
		if f < 0.005 {
			delete(c.drops, name)
		}
	}
	c.version++
	d.Version = c.version
	for name, f := range fleet {
		td := TenantDecision{Tenant: name, Rates: *f, Demand: demand[name], Drop: c.drops[name]}
		if blame > 0 {
			td.BlameShare = f.Blame / blame
		}
		if h := c.hist[name]; h != nil {
			td.Predicted = h.next()
		}
		d.Tenants = append(d.Tenants, td)
	}
	slices.SortFunc(d.Tenants, func(a, b TenantDecision) int { return strings.Compare(a.Tenant, b.Tenant) })
	c.mu.Lock()
	c.last = d
	c.mu.Unlock()
	return Table{Version: c.version, Drops: maps.Clone(c.drops)}
}

// measured returns a tenant's demand, in units of the fleet's capacity,
// from its requests per second at its cost per request last measured while
// saturated; false when that cost was never measured.
func (c *Controller) measured(name string, f *Rates, servers int) (float64, bool) {
	cost := c.cost[name]
	if cost <= 0 || servers <= 0 {
		return 0, false
	}
	return f.Requests * cost / float64(servers), true
}

// saturatedClosed is the fraction of its period a server's gates must
// have been closed for its report to measure the blame of a request while
// saturated.
const saturatedClosed = 0.9

// weight returns a tenant's weight.
func (c *Controller) weight(name string) float64 {
	if w, ok := c.opts.Weights[name]; ok {
		return w
	}
	return c.opts.DefaultWeight
}

// maxIdle is how many periods a tenant's history outlives its last report.
const maxIdle = 10

// predict updates each tenant's history with this period's demand and
// sets d.PredictionError from the predictions made last period.
func (c *Controller) predict(demand map[string]float64, d *Decision) {
	var errSum float64
	var n int
	for _, name := range slices.Sorted(maps.Keys(demand)) {
		x := demand[name]
		h := c.hist[name]
		if h == nil {
			c.hist[name] = &history{level: x}
			continue
		}
		if h.idle == 0 && x > 0 {
			errSum += math.Abs(h.next()-x) / x
			n++
		}
		level := c.opts.Alpha*x + (1-c.opts.Alpha)*(h.level+h.trend)
		h.trend = c.opts.Beta*(level-h.level) + (1-c.opts.Beta)*h.trend
		h.level, h.idle = level, 0
	}
	for name, h := range c.hist {
		if _, ok := demand[name]; !ok {
			if h.idle++; h.idle > maxIdle {
				delete(c.hist, name)
				delete(c.cost, name)
				delete(c.share, name)
			}
		}
	}
	if n > 0 {
		d.PredictionError = errSum / float64(n)
	}
}

// next is the demand predicted for the next period.
func (h *history) next() float64 { return max(h.level+h.trend, 0) }

// waterFill shares capacity among demands by weighted max-min fairness:
// the water level L is the one at which the shares min(demand, weight·L)
// add up to the capacity (or every demand is met). It returns the drop
// fraction of each tenant whose share is less than its demand.
func waterFill(demand map[string]float64, weight func(string) float64, capacity float64) map[string]float64 {
	type item struct {
		name      string
		d, w, lvl float64 // lvl: the level at which the demand is met
	}
	items := make([]item, 0, len(demand))
	for name, d := range demand {
		if d > 0 {
			w := weight(name)
			items = append(items, item{name, d, w, d / w})
		}
	}
	slices.SortFunc(items, func(a, b item) int { return cmp.Or(cmp.Compare(a.lvl, b.lvl), strings.Compare(a.name, b.name)) })
	var total float64
	for _, it := range items {
		total += it.d
	}
	drops := map[string]float64{}
	if total <= capacity {
		return drops
	}
	left := capacity
	var wsum float64
	for _, it := range items {
		wsum += it.w
	}
	for i, it := range items {
		level := left / wsum
		if it.lvl <= level {
			left -= it.d
			wsum -= it.w
			continue
		}
		for _, rest := range items[i:] {
			drops[rest.name] = 1 - rest.w*level/rest.d
		}
		break
	}
	return drops
}
