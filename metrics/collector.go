package metrics

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-go/sluice/internal/keys"
	"github.com/sluice-go/sluice/internal/monotime"
)

// DefaultWindow is the span of the autoscaling gauges when Config.Window
// is zero.
const DefaultWindow = 30 * time.Second

// Config configures a Collector. The zero value is ready.
type Config struct {
	// Window is the span over which the autoscaling gauges
	// (sluice_admission_gates_closed_ratio and
	// sluice_admission_queue_wait_mean_seconds) are computed, back from
	// each scrape; zero means DefaultWindow. A scrape that comes less often
	// than that gets the figures since the previous one.
	Window time.Duration
	// Clock returns monotonic nanoseconds, on the same base as the
	// pipelines' clocks (admit.Host.Clock); nil means the real clock. For
	// tests and simulations.
	Clock func() int64
}

// Collector is a prometheus.Collector over the counters of sluice's
// servers, executors and policies: register it once, and add to it what
// the program runs (Add), before or after registering. Each scrape reads
// every source's Stats then; the request histograms come from an observer
// each admission source adds to its pipeline (admit.Pipeline.Observe), at
// no allocation per request.
//
// A Collector is safe for concurrent use.
type Collector struct {
	d      *descs
	window time.Duration
	clock  func() int64

	mu      sync.RWMutex
	sources map[sourceID]*entry
	order   []sourceID // in the order added, for a stable output
}

// sourceID identifies a source in a Collector: its kind and name.
type sourceID struct{ kind, name string }

// entry is a source added to a collector.
type entry struct {
	live live
	ids  []sourceID
}

// live is what a Source becomes once added: it writes its metrics, and
// lets go of what it attached when removed.
type live interface {
	collect(d *descs, ch chan<- prometheus.Metric)
	close()
}

// Source is something whose counters a Collector exports: a server, an
// executor, a tenant tracker, a rate limiter, a client transport. The
// functions of this package make them (Server, Admission, Executor,
// Tenants, TenantAgent, RateLimiter, RedisSync, Transport); the zero
// Source is invalid.
type Source struct {
	kind, name string
	// also are the kinds of metrics it exports besides its own, under
	// the same name (a server's executor), which no other source may
	// export under that name.
	also []string
	open func(c *Collector) live
}

// ids returns the identities s claims in a collector.
func (s Source) ids() []sourceID {
	ids := []sourceID{{s.kind, s.name}}
	for _, k := range s.also {
		ids = append(ids, sourceID{k, s.name})
	}
	return ids
}

// New returns a Collector configured by opts, with sources added (see
// Add).
func New(opts Config, sources ...Source) (*Collector, error) {
	if opts.Window < 0 {
		return nil, fmt.Errorf("metrics: Config.Window %v: must be zero (the default, %v) or positive", opts.Window, DefaultWindow)
	}
	c := &Collector{
		d:       newDescs(),
		window:  opts.Window,
		clock:   opts.Clock,
		sources: map[sourceID]*entry{},
	}
	if c.window == 0 {
		c.window = DefaultWindow
	}
	if c.clock == nil {
		c.clock = monotime.Clock()
	}
	if err := c.Add(sources...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Add adds sources: their metrics appear from the next scrape, labelled
// with their names. A name must be unique among the sources of its kind;
// Add fails, adding none of them, for a duplicate, an empty name or the
// zero Source.
func (c *Collector) Add(sources ...Source) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	taken := map[sourceID]bool{}
	for _, e := range c.sources {
		for _, id := range e.ids {
			taken[id] = true
		}
	}
	var errs []error
	for i, s := range sources {
		switch {
		case s.open == nil:
			errs = append(errs, fmt.Errorf("metrics: source %d is the zero Source: make it with Server, Executor, Tenants, ...", i))
			continue
		case s.name == "":
			errs = append(errs, fmt.Errorf("metrics: %s source %d has no name", s.kind, i))
			continue
		}
		for _, id := range s.ids() {
			if taken[id] {
				errs = append(errs, fmt.Errorf("metrics: %s source %q: %s metrics named %q are already exported", s.kind, s.name, id.kind, id.name))
			}
			taken[id] = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, s := range sources {
		id := sourceID{s.kind, s.name}
		c.sources[id] = &entry{live: s.open(c), ids: s.ids()}
		c.order = append(c.order, id)
	}
	return nil
}

// Remove removes the sources of the same kind and name as those given,
// if added: their metrics are gone from the next scrape, and the
// observers they added to pipelines are removed.
func (c *Collector) Remove(sources ...Source) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range sources {
		id := sourceID{s.kind, s.name}
		if e := c.sources[id]; e != nil {
			e.live.close()
			delete(c.sources, id)
			c.order = slices.DeleteFunc(c.order, func(x sourceID) bool { return x == id })
		}
	}
}

// Close removes every source (see Remove). The Collector stays usable.
func (c *Collector) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.sources {
		e.live.close()
	}
	clear(c.sources)
	c.order = nil
}

// Describe sends the descriptors of every metric the Collector can
// export, whatever its sources.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.d.all {
		ch <- d
	}
}

// Collect reads every source and sends its metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, id := range c.order {
		c.sources[id].live.collect(c.d, ch)
	}
}

// counter and gauge send one sample; one that the client library refuses
// (a bug here, which the tests would catch) is sent as an invalid metric,
// which fails the scrape with its error.
func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	send(ch, d, prometheus.CounterValue, v, labels)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	send(ch, d, prometheus.GaugeValue, v, labels)
}

func send(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, v float64, labels []string) {
	m, err := prometheus.NewConstMetric(d, t, v, validLabels(labels)...)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(d, err)
		return
	}
	ch <- m
}

// validLabels returns labels with each value valid UTF-8 (the client
// library refuses a series otherwise, and one refused series fails the
// whole scrape): a value from a request, such as a tenant's name, may not
// be. The slice is returned as it is when every value is valid.
func validLabels(labels []string) []string {
	for i, v := range labels {
		if !utf8.ValidString(v) {
			fixed := slices.Clone(labels)
			for j := i; j < len(fixed); j++ {
				fixed[j] = keys.Valid(fixed[j])
			}
			return fixed
		}
	}
	return labels
}

// boolValue is 1 for true, 0 for false.
func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
