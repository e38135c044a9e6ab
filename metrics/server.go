package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/obs"
	"github.com/sluice-go/sluice/sched"
	"github.com/sluice-go/sluice/server"
)

// Server is the source of a sluice server (sluice.Listen): its admission
// (see Admission), its open connections and those parked after a refusal
// (sluice_http_connections, sluice_http_connections_parked) and moved to
// an idle worker (sluice_http_connection_moves_total), its TLS handshakes when it serves
// HTTPS (sluice_tls_handshakes_total{result}: completed, failed, refused,
// late; sluice_tls_handshakes_in_progress), and its runtime's executor
// (see Executor), all labelled with name (server="name",
// executor="name"). Off Linux, where the server is net/http behind the
// same pipeline, it has only the admission's.
func Server(name string, s *sluice.Server) Source {
	return Source{kind: "server", name: name, also: []string{"executor"}, open: func(c *Collector) live {
		p := openPipeline(c, name, s.Pipeline())
		srv, rt := s.Server(), s.Runtime()
		if srv == nil || rt == nil {
			// Off Linux: net/http behind the same pipeline, no
			// connections or executor of sluice's to read.
			return p
		}
		p.conns = srv.OpenConns
		p.parked = srv.ParkedConns
		p.holds = srv.Holds
		p.moves = srv.Moves
		if srv.HTTPServer().TLSConfig != nil {
			p.tls = srv.TLSStats
		}
		return multi{p, &executorLive{name: name, ex: rt}}
	}}
}

// Admission is the source of an admission pipeline alone: a
// server.Server's (Pipeline) or net/http middleware's (httpgate's
// Admission.Pipeline). Its metrics are labelled server="name":
//
//   - sluice_http_requests_total{class}: answers by status class, the
//     rejections included; sluice_http_request_duration_seconds (a
//     histogram of the time admitted requests ran);
//     sluice_http_requests_in_flight; sluice_http_handler_errors_total;
//   - sluice_admission_admitted_total, _queued_total,
//     _rejected_total{reason,code}, _canceled_total (clients gone before
//     their request ran), _late_total (a closed loop's requests started
//     past the age limit), _gates_closed_seconds_total,
//     _queue_length, _queue_wait_seconds (a histogram of the wait before
//     the start, from the arrival), _max_age_seconds, _standing;
//   - the autoscaling gauges, over the last Config.Window:
//     sluice_admission_gates_closed_ratio and
//     sluice_admission_queue_wait_mean_seconds.
//
// The histograms, the answers by class and the rejections by status count
// from the moment the source is added: it adds an observer to the
// pipeline (admit.Pipeline.Observe), which Remove takes away. The other
// counters are the pipeline's own, from its start.
func Admission(name string, p *admit.Pipeline) Source {
	return Source{kind: "server", name: name, open: func(c *Collector) live { return openPipeline(c, name, p) }}
}

// multi is several lives as one.
type multi []live

func (m multi) collect(d *descs, ch chan<- prometheus.Metric) {
	for _, l := range m {
		l.collect(d, ch)
	}
}

func (m multi) close() {
	for _, l := range m {
		l.close()
	}
}

// pipelineLive is an added admission source.
type pipelineLive struct {
	name   string
	p      *admit.Pipeline
	conns  func() int             // nil: not a server's
	parked func() int             // nil: not a server's
	holds  func() int64           // nil: not a server's
	moves  func() int64           // nil: not a server's
	tls    func() server.TLSStats // nil: not an HTTPS server's
	rec    *obs.Recorder
	remove func()
	clock  func() int64
	win    window
}

func openPipeline(c *Collector, name string, p *admit.Pipeline) *pipelineLive {
	l := &pipelineLive{name: name, p: p, rec: new(obs.Recorder), clock: c.clock, win: window{span: c.window}}
	l.remove = p.Observe(l.rec)
	l.win.add(l.sample(l.p.Stats(), l.rec.Wait.Counts()))
	return l
}

func (l *pipelineLive) close() { l.remove() }

// sample is the window's reading of the pipeline now.
func (l *pipelineLive) sample(st admit.Stats, wait obs.Counts) windowSample {
	return windowSample{at: l.clock(), closed: st.GatesClosed, waitSum: wait.Sum, waits: wait.Count}
}

func (l *pipelineLive) collect(d *descs, ch chan<- prometheus.Metric) {
	st := l.p.Stats()
	snap := l.rec.Snapshot()
	name := l.name

	for i, n := range snap.Classes {
		if n > 0 {
			counter(ch, d.requests, float64(n), name, obs.ClassName(i))
		}
	}
	histogram(ch, d.duration, d.bounds, snap.Latency, name)
	gauge(ch, d.inFlight, float64(st.InFlight), name)
	if l.conns != nil {
		gauge(ch, d.conns, float64(l.conns()), name)
		gauge(ch, d.parked, float64(l.parked()), name)
		counter(ch, d.holds, float64(l.holds()), name)
		counter(ch, d.moves, float64(l.moves()), name)
	}
	if l.tls != nil {
		t := l.tls()
		counter(ch, d.handshakes, float64(t.Completed), name, "completed")
		counter(ch, d.handshakes, float64(t.Failed), name, "failed")
		counter(ch, d.handshakes, float64(t.Waited), name, "waited")
		counter(ch, d.handshakes, float64(t.Evicted), name, "evicted")
		counter(ch, d.handshakes, float64(t.Late), name, "late")
		gauge(ch, d.handshaking, float64(t.InProgress), name)
	}
	counter(ch, d.handlerErrors, float64(snap.Errors), name)

	counter(ch, d.admitted, float64(st.Admitted), name)
	counter(ch, d.queued, float64(st.Queued), name)
	counter(ch, d.canceled, float64(st.Canceled), name)
	counter(ch, d.late, float64(st.Late), name)
	for _, r := range snap.Rejected {
		counter(ch, d.rejected, float64(r.N), name, r.Reason, strconv.Itoa(r.Status))
	}
	counter(ch, d.closed, st.GatesClosed.Seconds(), name)
	gauge(ch, d.queueLen, float64(st.Queue.Len), name)
	histogram(ch, d.queueWait, d.bounds, snap.Wait, name)
	gauge(ch, d.maxAge, st.MaxAge.Seconds(), name)
	gauge(ch, d.standing, boolValue(st.Standing), name)

	ratio, mean := l.win.add(l.sample(st, snap.Wait))
	gauge(ch, d.closedRatio, ratio, name)
	gauge(ch, d.waitMean, mean.Seconds(), name)
}

// histogram sends c as a Prometheus histogram on bounds.
func histogram(ch chan<- prometheus.Metric, d *prometheus.Desc, bounds []time.Duration, c obs.Counts, labels ...string) {
	m, err := prometheus.NewConstHistogram(d, c.Count, c.Sum.Seconds(), c.Cumulative(bounds), validLabels(labels)...)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(d, err)
		return
	}
	ch <- m
}

// Snapshotter is what Executor reads: *runtime.Runtime and
// *sched.Scheduler implement it.
type Snapshotter interface {
	Snapshot() sched.Snapshot
}

// Executor is the source of a sluice executor (a *runtime.Runtime, or a
// *sched.Scheduler), labelled executor="name": sluice_executor_workers,
// _busy_workers, _worker_busy_seconds_total{worker},
// _worker_cpu_wait_seconds_total{worker}, _worker_lends_total{worker},
// _worker_lends_taken_total{worker}, _lane_queued_tasks{lane},
// _lane_tasks_total{lane}, _lane_wait_seconds_total{lane},
// _lane_run_seconds_total{lane}, and the blocked-worker rescue's
// _blocked_total, _handovers_total, _spare_threads, _starved_total;
// _dropped_tasks_total. Server includes it.
func Executor(name string, ex Snapshotter) Source {
	return Source{kind: "executor", name: name, open: func(*Collector) live { return &executorLive{name: name, ex: ex} }}
}

// executorLive is an added executor source.
type executorLive struct {
	name string
	ex   Snapshotter
}

func (l *executorLive) close() {}

func (l *executorLive) collect(d *descs, ch chan<- prometheus.Metric) {
	s := l.ex.Snapshot()
	name := l.name
	gauge(ch, d.workers, float64(len(s.Workers)), name)
	gauge(ch, d.busy, float64(s.Busy), name)
	for _, w := range s.Workers {
		id := strconv.Itoa(w.ID)
		counter(ch, d.workerBusy, seconds(w.BusyNs), name, id)
		counter(ch, d.workerCPUWait, seconds(w.RunQueueWaitNs), name, id)
		counter(ch, d.workerLends, float64(w.Lends), name, id)
		counter(ch, d.workerLendsTaken, float64(w.LendsTaken), name, id)
	}
	for _, ln := range s.Lanes {
		gauge(ch, d.laneQueued, float64(ln.Queued), name, ln.Name)
		counter(ch, d.laneTasks, float64(ln.Run), name, ln.Name)
		counter(ch, d.laneWait, seconds(ln.WaitedNs), name, ln.Name)
		counter(ch, d.laneRun, seconds(ln.RanNs), name, ln.Name)
	}
	counter(ch, d.blocked, float64(s.Blocked), name)
	counter(ch, d.handovers, float64(s.Handovers), name)
	gauge(ch, d.spares, float64(s.Spares), name)
	counter(ch, d.starved, float64(s.Starved), name)
	counter(ch, d.droppedTasks, float64(s.Dropped), name)
	counter(ch, d.throttledPeriods, float64(s.Throttled.Periods), name)
	counter(ch, d.throttledTime, s.Throttled.Time.Seconds(), name)
}

// seconds converts nanoseconds to seconds.
func seconds(ns int64) float64 { return time.Duration(ns).Seconds() }

// window keeps the readings of one pipeline over the recent span, for the
// autoscaling gauges: the fraction of the span the gates were closed, and
// the mean wait of the requests started in it.
type window struct {
	span    time.Duration
	mu      sync.Mutex
	samples []windowSample // oldest first; samples[0] is the base
}

// windowSample is one reading of a pipeline.
type windowSample struct {
	at      int64 // the collector's clock
	closed  time.Duration
	waitSum time.Duration
	waits   uint64
}

// maxSamples bounds the readings kept: a reading closer than
// span/maxSamples to the one before it is replaced by the next.
const maxSamples = 64

// add records s and returns the figures from the newest reading at least
// span older than s (or the oldest there is) to s.
func (w *window) add(s windowSample) (closedRatio float64, meanWait time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// Drop the readings that another, still at least span old, makes
	// useless as a base.
	i := 0
	for i+1 < len(w.samples) && s.at-w.samples[i+1].at >= int64(w.span) {
		i++
	}
	w.samples = append(w.samples[:0], w.samples[i:]...)
	var base windowSample
	if len(w.samples) > 0 {
		base = w.samples[0]
		if dt := s.at - base.at; dt > 0 {
			closedRatio = min(max(float64(s.closed-base.closed)/float64(dt), 0), 1)
		}
		if n := s.waits - base.waits; s.waits > base.waits {
			meanWait = max(s.waitSum-base.waitSum, 0) / time.Duration(n)
		}
	}
	// Keep s, the newest reading, always: in place of the last one when
	// that one is too close to the one before it, or the readings too many.
	if n := len(w.samples); n >= 2 && (n >= maxSamples || w.samples[n-1].at-w.samples[n-2].at < int64(w.span)/maxSamples) {
		w.samples[n-1] = s
	} else {
		w.samples = append(w.samples, s)
	}
	return closedRatio, meanWait
}
