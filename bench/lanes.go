package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/examples/weather"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/laneadmin"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/server"
)

// ScenarioLanes offers an interactive route below capacity beside a flood
// of long batch requests that yield between slices of their work, with the
// batch in the built-in lanes, in a background lane of few shares, in that
// lane with its shares raised halfway through the run, and without the
// batch (see LanesConfig).
const ScenarioLanes = "lanes"

// Paths of the lanes scenario's target.
const (
	// LanesInteractivePath computes for LanesConfig.Interactive.
	LanesInteractivePath = "/interactive"
	// LanesBatchPath computes for LanesConfig.Batch, in slices of
	// LanesConfig.Slice with sluice.Yield between them.
	LanesBatchPath = "/batch"
	// LanesAdminPath is the lane admin endpoint (package laneadmin) of a
	// sluice target in the live part, behind a token of the run.
	LanesAdminPath = "/admin/lanes"
)

// LanesBackground is the name of the lane the batch route goes to.
const LanesBackground = "background"

// The parts of the lanes scenario, as in LanesInfo.Part.
const (
	// LanesOneLane floods the batch beside the interactive load, every
	// request in the built-in lanes.
	LanesOneLane = "one-lane"
	// LanesInBackground does the same with the batch route in the
	// background lane (LanesConfig.Priority and Shares).
	LanesInBackground = "background"
	// LanesLive is LanesInBackground whose lane gets LanesConfig.LiveShares
	// through the lane admin endpoint at the middle of the run.
	LanesLive = "live"
	// LanesAlone offers the interactive load without the batch: the
	// baseline.
	LanesAlone = "alone"
)

// LanesParts are the parts of the lanes scenario, in the order it runs them
// for each target; targets without lanes (not sluice) run LanesOneLane and
// LanesAlone only.
var LanesParts = []string{LanesOneLane, LanesInBackground, LanesLive, LanesAlone}

// LanesShape names the interactive handler's shape in the samples of the
// lanes scenario; its capacity is measured as the other scenarios measure
// theirs, on the weather handler with the same CPU work.
const LanesShape = "lanes-interactive"

// Defaults of LanesConfig's zero fields.
const (
	DefaultLanesInteractive   = time.Millisecond
	DefaultLanesBatch         = 20 * time.Millisecond
	DefaultLanesSlice         = 500 * time.Microsecond
	DefaultLanesMultiple      = 0.8
	DefaultLanesBatchMultiple = 2.0
	DefaultLanesPriority      = 2
	DefaultLanesShares        = 11
	DefaultLanesLiveShares    = 100
	DefaultLanesWindow        = 100 * time.Millisecond
	// DefaultLanesConnsPerWorker is the batch connections per worker of
	// the target.
	DefaultLanesConnsPerWorker = 4
)

// LanesConfig shapes the lanes scenario. Each part runs on a fresh target
// process, for the suite's Duration:
//
//   - the interactive route, LanesInteractivePath, computes for
//     Interactive and is offered Multiple of C, the target's capacity on a
//     handler of that work (measured as in the other scenarios);
//   - the batch route, LanesBatchPath, computes for Batch in slices of
//     Slice, calling sluice.Yield between them (a no-op on net/http), and
//     is offered BatchMultiple of C_b = workers / Batch on BatchConns
//     connections of its own: a flood that always has requests waiting at
//     the target. Its requests have no deadline that matters (they are
//     cut when the interactive load is done): what counts is how much of
//     the CPU the target gives them, not how long they waited for a
//     connection.
//
// The parts: one-lane (every request in the built-in lanes), background
// (the runtime registers LanesBackground with Priority and Shares, and the
// server routes LanesBatchPath to it), live (as background, then at the
// middle of the run the generator sets the lane's shares to LiveShares
// through the lane admin endpoint, package laneadmin, mounted on the target
// behind a token of the run), alone (the interactive load without the
// batch). Targets without lanes run one-lane and alone only.
//
// The CPU shares are counted twice, per Window of the run: from the
// completion times of the requests at the generator (a batch request
// counts its whole Batch when it ends), and from the completion times, in
// the target, of each batch slice and interactive request (LanesInfo.Series).
type LanesConfig struct {
	// Interactive is the interactive route's CPU work; default 1 ms.
	Interactive time.Duration
	// Batch is a batch request's CPU work, done in slices of Slice;
	// default 20 ms in slices of 0.5 ms.
	Batch, Slice time.Duration
	// Multiple is the interactive load in multiples of C; default 0.8.
	Multiple float64
	// BatchMultiple is the batch load in multiples of C_b; default 2.
	BatchMultiple float64
	// BatchConns is the batch's connections; default 4 per worker of the
	// target.
	BatchConns int
	// Priority and Shares are the background lane's; default 2 and 11
	// (a floor of 11/111 of the worker, about 10%: see lanes.Strict).
	Priority int32
	Shares   uint32
	// LiveShares are the background lane's shares after the live change;
	// default 100 (a floor of half the worker).
	LiveShares uint32
	// Window is the width of the windows of the CPU shares' series;
	// default 100 ms.
	Window time.Duration
}

// defaults checks c and fills in its zero fields.
func (c *LanesConfig) defaults() error {
	if c.Interactive == 0 {
		c.Interactive = DefaultLanesInteractive
	}
	if c.Batch == 0 {
		c.Batch = DefaultLanesBatch
	}
	if c.Slice == 0 {
		c.Slice = DefaultLanesSlice
	}
	if c.Multiple == 0 {
		c.Multiple = DefaultLanesMultiple
	}
	if c.BatchMultiple == 0 {
		c.BatchMultiple = DefaultLanesBatchMultiple
	}
	if c.Priority == 0 {
		c.Priority = DefaultLanesPriority
	}
	if c.Shares == 0 {
		c.Shares = DefaultLanesShares
	}
	if c.LiveShares == 0 {
		c.LiveShares = DefaultLanesLiveShares
	}
	if c.Window == 0 {
		c.Window = DefaultLanesWindow
	}
	switch {
	case c.Interactive < 0 || c.Batch < 0 || c.Slice < 0 || c.Window < 0 || c.BatchConns < 0:
		return errors.New("bench: lanes durations and connections must not be negative")
	case c.Slice > c.Batch:
		return fmt.Errorf("bench: lanes slice %v is longer than the batch request's %v", c.Slice, c.Batch)
	case c.Shares > lanes.MaxShares || c.LiveShares > lanes.MaxShares:
		return fmt.Errorf("bench: lanes shares must be at most %d", lanes.MaxShares)
	}
	for name, v := range map[string]float64{"multiple": c.Multiple, "batch multiple": c.BatchMultiple} {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("bench: lanes %s %v must be positive and finite", name, v)
		}
	}
	return nil
}

// shape is the interactive handler, whose capacity C the scenario offers
// multiples of.
func (c *LanesConfig) shape() Shape {
	return Shape{Name: LanesShape, Spec: HandlerSpec{CPU: c.Interactive}}
}

// batchConns returns the batch's connections for a target of workers.
func (c *LanesConfig) batchConns(workers int) int {
	if c.BatchConns > 0 {
		return c.BatchConns
	}
	return DefaultLanesConnsPerWorker * max(workers, 1)
}

// lanesCapable reports whether a target can have lanes (the sluice ones).
func lanesCapable(target string) bool { return strings.HasPrefix(target, "sluice") }

// needsLanes reports whether a part of the scenario needs a target with
// lanes.
func needsLanes(part string) bool { return part == LanesInBackground || part == LanesLive }

// lanesRunsOn reports whether a point of the lanes scenario is measured on
// the target: the parts with a background lane are not measured on targets
// without lanes.
func lanesRunsOn(p Point, target string) bool {
	return !needsLanes(p.Part) || lanesCapable(target)
}

// LanesChild is what a target of the lanes scenario serves beyond its
// interactive work (ChildSpec.Handler.CPU): the batch route, and on a
// sluice target the background lane and the lane admin endpoint.
type LanesChild struct {
	Batch time.Duration `json:"batch"`
	Slice time.Duration `json:"slice"`
	// Span is how long after it starts the child records its work
	// (WorkSeries).
	Span time.Duration `json:"span"`
	// Lane, when set, is registered on a sluice target's runtime, and
	// LanesBatchPath routed to it.
	Lane *lanes.Spec `json:"lane,omitempty"`
	// Token, when set, serves the lane admin endpoint at LanesAdminPath
	// of a loopback listener beside the target's (Process.AdminURL),
	// behind this bearer token.
	Token string `json:"token,omitempty"`
}

// attach gives a sluice target the child's lanes: the lane on the runtime
// (cfg.Runtime.Lanes) and the batch route to it (cfg.Lanes). With a Token,
// the returned ready, called once the server listens, serves the lane
// admin endpoint over the server's lanes on a loopback listener of its
// own, as docs/operations.md advises for admin endpoints: it stays
// reachable while the server refuses what it cannot serve in time. ready
// returns that endpoint's URL ("" without a Token) and what stops it.
func (lc *LanesChild) attach(cfg *sluice.Config) (ready func(*sluice.Server) (string, func() error, error)) {
	none := func(*sluice.Server) (string, func() error, error) { return "", func() error { return nil }, nil }
	if lc.Lane == nil {
		return none
	}
	cfg.Runtime.Lanes = append(slices.Clip(cfg.Runtime.Lanes), *lc.Lane)
	cfg.Lanes = server.Lanes{Routes: map[string]string{LanesBatchPath: lc.Lane.Name}}
	if lc.Token == "" {
		return none
	}
	return func(srv *sluice.Server) (string, func() error, error) {
		a, err := laneadmin.New(srv.Runtime().Lanes(), laneadmin.Config{Token: lc.Token})
		if err != nil {
			return "", nil, err
		}
		mux := http.NewServeMux()
		mux.Handle(LanesAdminPath, a)
		url, stop, err := ServeNetHTTP(mux)
		if err != nil {
			return "", nil, fmt.Errorf("lane admin: %w", err)
		}
		return url + LanesAdminPath, stop, nil
	}
}

// workBuckets bounds the buckets of a child's work log, so that its line
// stays well under what the parent reads (1 MiB).
const workBuckets = 20000

// workLog records, per bucket of time since the child started, the work
// its handlers finished: batch slices and interactive requests.
type workLog struct {
	origin             time.Time
	bucket             time.Duration
	batch, interactive []atomic.Int64
}

func newWorkLog(span time.Duration) *workLog {
	b := max(5*time.Millisecond, span/workBuckets)
	n := int(span/b) + 1
	return &workLog{origin: time.Now(), bucket: b, batch: make([]atomic.Int64, n), interactive: make([]atomic.Int64, n)}
}

// add counts d of work that ended now.
func (l *workLog) add(cells []atomic.Int64, d time.Duration) {
	if i := int(time.Since(l.origin) / l.bucket); i >= 0 && i < len(cells) {
		cells[i].Add(int64(d))
	}
}

// series returns what the log holds, without its trailing empty buckets.
func (l *workLog) series() WorkSeries {
	read := func(cells []atomic.Int64) []int64 {
		out := make([]int64, len(cells))
		for i := range cells {
			out[i] = cells[i].Load()
		}
		n := len(out)
		for n > 0 && out[n-1] == 0 {
			n--
		}
		return out[:n]
	}
	return WorkSeries{Origin: l.origin, Bucket: l.bucket, Batch: read(l.batch), Interactive: read(l.interactive)}
}

// WorkSeries is the work a lanes child's handlers finished, in nanoseconds
// per Bucket from Origin: the batch's slices and the interactive requests,
// each counted in the bucket where it ended.
type WorkSeries struct {
	Origin      time.Time     `json:"origin"`
	Bucket      time.Duration `json:"bucket"`
	Batch       []int64       `json:"batch"`
	Interactive []int64       `json:"interactive"`
}

// lanesHandler is the lanes scenario's target handler and its work log.
func lanesHandler(cs ChildSpec) (http.Handler, *workLog) {
	lc := cs.Lanes
	log := newWorkLog(lc.Span)
	cpu := cs.Handler.CPU
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+LanesInteractivePath, func(w http.ResponseWriter, _ *http.Request) {
		weather.Spin(cpu)
		log.add(log.interactive, cpu)
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET "+LanesBatchPath, func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		for done := time.Duration(0); done < lc.Batch; {
			if ctx.Err() != nil {
				return // the client left: its work would be wasted
			}
			d := min(lc.Slice, lc.Batch-done)
			weather.Spin(d)
			log.add(log.batch, d)
			if done += d; done < lc.Batch {
				if err := sluice.Yield(ctx); err != nil {
					return
				}
			}
		}
		_, _ = io.WriteString(w, "done\n")
	})
	return mux, log
}

// lanesSpanSlack is how long a lanes child records its work beyond the
// sending window and two deadlines: its start and the batch's end.
const lanesSpanSlack = 5 * time.Second

// LanesInfo is the lanes scenario's part of a Sample, whose rates,
// latencies and series are the interactive route's.
type LanesInfo struct {
	// Part is LanesOneLane, LanesInBackground, LanesLive or LanesAlone.
	Part string `json:"part"`
	// Workers are the target's workers (GOMAXPROCS for net/http): what
	// the CPU shares are shares of.
	Workers int `json:"workers"`
	// Interactive, Batch and Slice are the handlers' CPU work.
	Interactive time.Duration `json:"interactive"`
	Batch       time.Duration `json:"batch"`
	Slice       time.Duration `json:"slice"`
	// Priority and Shares are the background lane's at the start (0
	// without the lane); LiveShares the shares set at Change (live only).
	Priority   int32  `json:"priority,omitempty"`
	Shares     uint32 `json:"shares,omitempty"`
	LiveShares uint32 `json:"live_shares,omitempty"`
	// BatchRate is the batch offered per second, on BatchConns
	// connections (0 in the part without it); BatchOffered the requests
	// scheduled, BatchDone those that ended with a 2xx within the sending
	// window; BatchBehind reports that the batch's generator fell behind
	// its schedule.
	BatchRate    float64 `json:"batch_rate"`
	BatchConns   int     `json:"batch_conns,omitempty"`
	BatchOffered int64   `json:"batch_offered"`
	BatchDone    int64   `json:"batch_done"`
	BatchBehind  bool    `json:"batch_behind,omitempty"`
	// InteractiveDone are the interactive requests that ended with a 2xx
	// within the deadline and the sending window.
	InteractiveDone int64 `json:"interactive_done"`
	// BatchShare and InteractiveShare are the CPU shares of the requests
	// completed within the sending window: completions times their work
	// over the window times Workers.
	BatchShare       float64 `json:"batch_share"`
	InteractiveShare float64 `json:"interactive_share"`
	// TargetBatchShare and TargetInteractiveShare are the same counted in
	// the target: every batch slice and interactive request that ended
	// within the window, whether or not its answer made it in time.
	TargetBatchShare       float64 `json:"target_batch_share"`
	TargetInteractiveShare float64 `json:"target_interactive_share"`
	// HostCPU is the machine's CPU time during the run, in CPU-seconds
	// per second (as the shed scenario reads it), -1 when unknown;
	// OtherCPU what of it neither the target nor the load generator
	// used: other programs, the kernel's work for no process of the run,
	// time the hypervisor took.
	HostCPU  float64 `json:"host_cpu"`
	OtherCPU float64 `json:"other_cpu"`
	// Window is the width of Series' windows.
	Window time.Duration `json:"window"`
	Series []LanesWindow `json:"series,omitempty"`
	// Change is the live change of shares (live only).
	Change *LanesChange `json:"change,omitempty"`
}

// LanesWindow is one window of a lanes run: the CPU shares of the batch
// and the interactive route in it, from the generator's completions
// (Batch, Interactive) and from the target's (TargetBatch,
// TargetInteractive).
type LanesWindow struct {
	Start             time.Duration `json:"start"`
	Batch             float64       `json:"batch"`
	Interactive       float64       `json:"interactive"`
	TargetBatch       float64       `json:"target_batch"`
	TargetInteractive float64       `json:"target_interactive"`
}

// LanesChange is the live part's change of the background lane's shares.
type LanesChange struct {
	// At is when the request that made it was sent, from the start of
	// the run; Took how long until its answer; Attempts how many requests
	// it took (a refused one is tried again).
	At       time.Duration `json:"at"`
	Took     time.Duration `json:"took"`
	Attempts int           `json:"attempts"`
	// OK reports that the endpoint answered 200 with the lane at its new
	// shares; Err says what went wrong otherwise.
	OK  bool   `json:"ok"`
	Err string `json:"err,omitempty"`
}

// lanesBatchSeed separates the batch's Poisson arrivals from the
// interactive ones.
const lanesBatchSeed = 1 << 32

// targetWorkers returns how many workers (or GOMAXPROCS) a target of the
// suite has: one per CPU it runs on.
func (cfg *SuiteConfig) targetWorkers() int {
	if len(cfg.TargetCPUs) > 0 {
		return len(cfg.TargetCPUs)
	}
	return max(len(cfg.allCPUs), 1)
}

// lanes runs one part of the lanes scenario on a fresh target process.
func (cfg *SuiteConfig) lanes(ctx context.Context, target string, p Point, capacity float64, repeat, run int) (s *Sample, err error) {
	lc := cfg.Lanes
	workers := cfg.targetWorkers()
	window := cfg.Duration
	child := &LanesChild{Batch: lc.Batch, Slice: lc.Slice, Span: window + 2*cfg.Deadline + lanesSpanSlack}
	if needsLanes(p.Part) {
		child.Lane = &lanes.Spec{Name: LanesBackground, Priority: lc.Priority, Shares: lc.Shares}
	}
	live := p.Part == LanesLive
	if live {
		if child.Token, err = newToken(); err != nil {
			return nil, err
		}
	}
	proc, err := startChild(ctx, cfg.Launch, ChildSpec{Target: target, Handler: p.Spec, Nice: TargetNice, Lanes: child}, cfg.TargetCPUs)
	if err != nil {
		return nil, err
	}
	arrival := Poisson
	if cfg.Constant {
		arrival = Constant
	}
	ic := Config{
		URL: proc.URL + LanesInteractivePath, Rate: lc.Multiple * capacity, Duration: window,
		Deadline: cfg.Deadline, Arrival: arrival, Seed: cfg.Seed + uint64(run), Bucket: lc.Window,
	}
	withBatch := p.Part != LanesAlone
	batchRate := lc.BatchMultiple * float64(workers) / lc.Batch.Seconds()
	bc := Config{
		URL: proc.URL + LanesBatchPath, Rate: batchRate, Duration: window,
		// Cut when the interactive load is done, not by a deadline.
		Deadline: window + 2*cfg.Deadline, Conns: lc.batchConns(workers),
		Arrival: arrival, Seed: cfg.Seed + uint64(run) + lanesBatchSeed, Bucket: lc.Window,
	}
	bctx, cancelBatch := context.WithCancel(ctx)
	defer cancelBatch()
	var (
		wg     sync.WaitGroup
		bres   *Result
		berr   error
		change *LanesChange
	)
	host, err := gate.NewCPU(gate.CPUConfig{Interval: gate.Manual, Window: 1}) // its first reading: now
	if err != nil {
		return nil, err
	}
	defer host.Close()
	cpu0, tcpu0, t0 := selfCPU(), proc.cpu(), time.Now()
	if withBatch {
		wg.Go(func() { bres, berr = Run(bctx, bc) })
	}
	if live {
		wg.Go(func() {
			timer := time.NewTimer(window / 2)
			defer timer.Stop()
			select {
			case <-timer.C:
				change = changeShares(bctx, proc.AdminURL(), child.Token, lc.LiveShares, t0)
			case <-bctx.Done():
			}
		})
	}
	ires, err := Run(ctx, ic)
	cancelBatch()
	wg.Wait()
	if berr != nil && !(errors.Is(berr, context.Canceled) && ctx.Err() == nil) {
		err = errors.Join(err, berr)
	}
	gen, tcpu, elapsed, hst := selfCPU()-cpu0, proc.cpu()-tcpu0, time.Since(t0), host.Refresh()
	err = errors.Join(err, proc.Stop())
	if ires == nil {
		return nil, err
	}
	s = &Sample{
		Scenario: ScenarioLanes, Shape: p.Shape.Name, Handler: p.Spec, Target: target,
		Repeat: repeat, Capacity: capacity, Multiple: lc.Multiple, Placement: proc.Placement,
	}
	Fill(s, ires)
	s.Server = proc.Stats
	if sec := elapsed.Seconds(); sec > 0 {
		s.TargetCPU = tcpu.Seconds() / sec
		s.GeneratorCPU = gen.Seconds() / sec
	}
	li := &LanesInfo{
		Part: p.Part, Workers: workers, Interactive: p.Spec.CPU, Batch: lc.Batch, Slice: lc.Slice,
		Window: lc.Window, Change: change, HostCPU: -1,
	}
	if hst.Err == nil && hst.Span > 0 {
		li.HostCPU = hst.Utilisation * float64(runtime.NumCPU())
		li.OtherCPU = max(0, li.HostCPU-s.TargetCPU-s.GeneratorCPU)
	}
	if child.Lane != nil {
		li.Priority, li.Shares = child.Lane.Priority, child.Lane.Shares
	}
	if live {
		li.LiveShares = lc.LiveShares
		if change == nil {
			err = errors.Join(err, errors.New("bench: lanes: the live change was not made (the run ended first)"))
		}
	}
	if withBatch {
		li.BatchRate, li.BatchConns = batchRate, bc.Conns
	}
	var work *WorkSeries
	if len(proc.Work) > 0 {
		var ws WorkSeries
		if jerr := json.Unmarshal(proc.Work, &ws); jerr == nil {
			work = &ws
		} else {
			err = errors.Join(err, fmt.Errorf("bench: lanes: the target's work log: %w", jerr))
		}
	}
	li.fill(ires, bres, work, t0)
	s.Lanes = li
	return s, err
}

// fill computes li's counts, shares and series from the interactive and
// batch results (bres nil without the batch) and the target's work log
// (nil when it reported none), the run having started at t0.
func (li *LanesInfo) fill(ires, bres *Result, work *WorkSeries, t0 time.Time) {
	n, width := len(ires.Series), li.Window
	if n == 0 || width <= 0 || ires.Duration <= 0 {
		return
	}
	capacity := float64(width) * float64(li.Workers) // worker-ns per window
	li.Series = make([]LanesWindow, n)
	for i, b := range ires.Series {
		li.Series[i].Start = b.Start
		li.Series[i].Interactive = float64(b.Completed) * float64(li.Interactive) / capacity
		li.InteractiveDone += b.Completed
	}
	if bres != nil {
		li.BatchOffered, li.BatchBehind = bres.Offered, bres.Behind
		for i, b := range bres.Series {
			if i < n {
				li.Series[i].Batch = float64(b.Completed) * float64(li.Batch) / capacity
				li.BatchDone += b.Completed
			}
		}
	}
	total := float64(ires.Duration) * float64(li.Workers)
	li.InteractiveShare = float64(li.InteractiveDone) * float64(li.Interactive) / total
	li.BatchShare = float64(li.BatchDone) * float64(li.Batch) / total
	if work == nil || work.Bucket <= 0 {
		return
	}
	// Each bucket of the target's log goes to the window of its middle.
	off := work.Origin.Sub(t0) + work.Bucket/2
	var batch, interactive float64
	add := func(cells []int64, set func(w *LanesWindow, v float64), sum *float64) {
		for k, ns := range cells {
			at := off + time.Duration(k)*work.Bucket
			if at < 0 || ns == 0 {
				continue
			}
			if i := int(at / width); i < n && at < ires.Duration {
				set(&li.Series[i], float64(ns)/capacity)
				*sum += float64(ns)
			}
		}
	}
	add(work.Batch, func(w *LanesWindow, v float64) { w.TargetBatch += v }, &batch)
	add(work.Interactive, func(w *LanesWindow, v float64) { w.TargetInteractive += v }, &interactive)
	li.TargetBatchShare, li.TargetInteractiveShare = batch/total, interactive/total
}

// lanesChangeAttempts bounds the requests of a live change: a connection
// refused or a 503 (the CPU is shared with the load) is tried again.
const lanesChangeAttempts = 5

// changeShares sets the background lane's shares through the lane admin
// endpoint at url, and says when and how it went; t0 is the start of the
// run.
func changeShares(ctx context.Context, url, token string, shares uint32, t0 time.Time) *LanesChange {
	body, _ := json.Marshal(laneadmin.Change{Lane: LanesBackground, Shares: new(int64(shares))})
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	c := &LanesChange{}
	if url == "" {
		c.Err = "the target reported no lane admin endpoint"
		return c
	}
	for c.Attempts < lanesChangeAttempts {
		c.Attempts++
		sent := time.Now()
		c.At = sent.Sub(t0)
		status, st, err := postChange(ctx, client, url, token, body)
		c.Took = time.Since(sent)
		switch {
		case err != nil:
			c.Err = err.Error()
		case status == http.StatusOK && laneShares(st, LanesBackground) == shares:
			c.OK, c.Err = true, ""
			return c
		default:
			c.Err = fmt.Sprintf("status %d", status)
			if status != http.StatusServiceUnavailable {
				return c // an answer that another try would not change
			}
		}
		if ctx.Err() != nil {
			return c
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c
}

// postChange posts one change and reads the state it answers.
func postChange(ctx context.Context, client *http.Client, url, token string, body []byte) (int, laneadmin.State, error) {
	var st laneadmin.State
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, st, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, st, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return resp.StatusCode, st, err
	}
	if resp.StatusCode == http.StatusOK {
		err = json.Unmarshal(b, &st)
	}
	return resp.StatusCode, st, err
}

// laneShares returns the shares of the named lane in st, or 0.
func laneShares(st laneadmin.State, name string) uint32 {
	for _, l := range st.Lanes {
		if l.Name == name {
			return l.Shares
		}
	}
	return 0
}

// newToken returns a random token for a run's lane admin endpoint.
func newToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("bench: token: %w", err)
	}
	return hex.EncodeToString(b), nil
}
