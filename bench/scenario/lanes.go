package scenario

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
	"github.com/sluice-go/sluice/bench/report"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/laneadmin"
	"github.com/sluice-go/sluice/lanes"
)

// The parts of the lanes scenario, as in LanesDetail.Part.
const (
	// LanesOneLane floods the batch beside the interactive load, every
	// request in the built-in lanes.
	LanesOneLane = "one-lane"
	// LanesInBackground does the same with the batch route in the
	// background lane (Lanes.Priority and Shares).
	LanesInBackground = "background"
	// LanesLive is LanesInBackground whose lane gets Lanes.LiveShares
	// through the lane admin endpoint at the middle of the run.
	LanesLive = "live"
	// LanesAlone offers the interactive load without the batch: the
	// baseline.
	LanesAlone = "alone"
)

// lanesParts are the parts of the lanes scenario, in the order it runs them
// for each target; targets without lanes (not sluice) run LanesOneLane and
// LanesAlone only.
var lanesParts = []string{LanesOneLane, LanesInBackground, LanesLive, LanesAlone}

// LanesShape names the interactive handler's shape in the samples of the
// lanes scenario; its capacity is measured as the other scenarios measure
// theirs, on the weather handler with the same CPU work.
const LanesShape = "lanes-interactive"

// Defaults of Lanes' zero fields.
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

// Lanes offers an interactive route below capacity beside a flood of long
// batch requests that yield between slices of their work, with the batch
// in the built-in lanes, in a background lane of few shares, in that lane
// with its shares raised halfway through the run, and without the batch.
// Each part runs on a fresh target process (LanesChild), for the
// suite's Duration:
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
// the target, of each batch slice and interactive request
// (LanesDetail.Series).
type Lanes struct {
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

// Name is "lanes".
func (*Lanes) Name() string { return "lanes" }

// Describe says what the scenario does, for the command's help.
func (*Lanes) Describe() string {
	return "an interactive route at 0.8x C beside a flood of 20 ms batch requests: one lane, a background lane of 10 shares, raised to 50 live, and alone; -targets sluice,nethttp"
}

// Check fills in the defaults of the zero fields and checks each. The
// scenario starts its target and sends its two loads its own way, so the
// suite's TLS, NewConns and Clients do not apply.
func (c *Lanes) Check(s *bench.SuiteConfig) error {
	if s.TLS || s.NewConns || s.Clients != 0 {
		return errors.New("bench: -tls, -newconns and -clients (SuiteConfig.TLS, NewConns, Clients) do not apply to the lanes scenario, which starts its target and sends its two loads its own way")
	}
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
func (c *Lanes) shape() bench.Shape {
	return bench.Shape{Name: LanesShape, Spec: bench.HandlerSpec{CPU: c.Interactive}}
}

// Points are the four parts, on LanesShape, at Multiple of C.
func (c *Lanes) Points(*bench.SuiteConfig) []bench.Point {
	sh := c.shape()
	var ps []bench.Point
	for _, part := range lanesParts {
		ps = append(ps, bench.Point{Shape: sh, Spec: sh.Spec, Multiple: c.Multiple, Part: part})
	}
	return ps
}

// batchConns returns the batch's connections for a target of workers.
func (c *Lanes) batchConns(workers int) int {
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

// RunsOn reports whether a point is measured on the target: the parts
// with a background lane are not measured on targets without lanes.
func (*Lanes) RunsOn(p bench.Point, target string) bool {
	return !needsLanes(p.Part) || lanesCapable(target)
}

// lanesSpanSlack is how long a lanes child records its work beyond the
// sending window and two deadlines: its start and the batch's end.
const lanesSpanSlack = 5 * time.Second

// LanesDetail is what a lanes sample records beyond the common figures
// (Sample.Detail); the sample's rates, latencies and series are the
// interactive route's.
type LanesDetail struct {
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

// Run runs one part on a fresh target process: the interactive load and,
// but alone, the batch's flood beside it; in the live part, the change of
// the background lane's shares halfway through.
func (c *Lanes) Run(ctx context.Context, t *bench.Trial) (s *bench.Sample, err error) {
	cfg, p := t.Suite, t.Point
	// One worker (or GOMAXPROCS) per CPU the target runs on.
	workers := len(cfg.TargetCPUs)
	if workers == 0 {
		workers = max(len(t.AllCPUs()), 1)
	}
	window := cfg.Duration
	child := &LanesChild{Batch: c.Batch, Slice: c.Slice, Span: window + 2*cfg.Deadline + lanesSpanSlack}
	if needsLanes(p.Part) {
		child.Lane = &lanes.Spec{Name: LanesBackground, Priority: c.Priority, Shares: c.Shares}
	}
	live := p.Part == LanesLive
	if live {
		if child.Token, err = newToken(); err != nil {
			return nil, err
		}
	}
	cs := t.Child()
	cs.TLS = false
	if err := cs.SetHook(c.Name(), child); err != nil {
		return nil, err
	}
	proc, err := t.Start(ctx, cs)
	if err != nil {
		return nil, err
	}
	arrival := load.Poisson
	if cfg.Constant {
		arrival = load.Constant
	}
	ic := load.Config{
		URL: proc.URL + LanesInteractivePath, Rate: c.Multiple * t.Capacity, Duration: window,
		Deadline: cfg.Deadline, Arrival: arrival, Seed: cfg.Seed + uint64(t.Index), Bucket: c.Window,
	}
	withBatch := p.Part != LanesAlone
	batchRate := c.BatchMultiple * float64(workers) / c.Batch.Seconds()
	bc := load.Config{
		URL: proc.URL + LanesBatchPath, Rate: batchRate, Duration: window,
		// Cut when the interactive load is done, not by a deadline.
		Deadline: window + 2*cfg.Deadline, Conns: c.batchConns(workers),
		Arrival: arrival, Seed: cfg.Seed + uint64(t.Index) + lanesBatchSeed, Bucket: c.Window,
	}
	bctx, cancelBatch := context.WithCancel(ctx)
	defer cancelBatch()
	var (
		wg     sync.WaitGroup
		bres   *load.Result
		berr   error
		change *LanesChange
	)
	host, err := gate.NewCPU(gate.CPUConfig{Interval: gate.Manual, Window: 1}) // its first reading: now
	if err != nil {
		return nil, errors.Join(err, proc.Stop())
	}
	defer host.Close()
	s = t.Sample()
	m := bench.MeterCPU(proc)
	t0 := time.Now()
	if withBatch {
		wg.Go(func() { bres, berr = load.Run(bctx, bc) })
	}
	if live {
		wg.Go(func() {
			timer := time.NewTimer(window / 2)
			defer timer.Stop()
			select {
			case <-timer.C:
				change = changeShares(bctx, proc.AdminURL(), child.Token, c.LiveShares, t0)
			case <-bctx.Done():
			}
		})
	}
	ires, err := load.Run(ctx, ic)
	cancelBatch()
	wg.Wait()
	if berr != nil && !(errors.Is(berr, context.Canceled) && ctx.Err() == nil) {
		err = errors.Join(err, berr)
	}
	m.Stop(s)
	hst := host.Refresh()
	err = errors.Join(err, proc.Stop())
	if ires == nil {
		return nil, err
	}
	s.Placement = proc.Placement
	bench.Fill(s, ires)
	s.Server = proc.Stats
	d := &LanesDetail{
		Part: p.Part, Workers: workers, Interactive: p.Spec.CPU, Batch: c.Batch, Slice: c.Slice,
		Window: c.Window, Change: change, HostCPU: -1,
	}
	if hst.Err == nil && hst.Span > 0 {
		d.HostCPU = hst.Utilisation * float64(runtime.NumCPU())
		d.OtherCPU = max(0, d.HostCPU-s.TargetCPU-s.GeneratorCPU)
	}
	if child.Lane != nil {
		d.Priority, d.Shares = child.Lane.Priority, child.Lane.Shares
	}
	if live {
		d.LiveShares = c.LiveShares
		if change == nil {
			err = errors.Join(err, errors.New("bench: lanes: the live change was not made (the run ended first)"))
		}
	}
	if withBatch {
		d.BatchRate, d.BatchConns = batchRate, bc.Conns
	}
	var work *WorkSeries
	if len(proc.Report) > 0 {
		var ws WorkSeries
		if jerr := json.Unmarshal(proc.Report, &ws); jerr == nil {
			work = &ws
		} else {
			err = errors.Join(err, fmt.Errorf("bench: lanes: the target's work log: %w", jerr))
		}
	}
	d.fill(ires, bres, work, t0)
	return s, errors.Join(err, s.SetDetail(d))
}

// fill computes li's counts, shares and series from the interactive and
// batch results (bres nil without the batch) and the target's work log
// (nil when it reported none), the run having started at t0.
func (li *LanesDetail) fill(ires, bres *load.Result, work *WorkSeries, t0 time.Time) {
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

// The targets the lanes scenario is checked against (docs: the issue of
// the background lane).
const (
	// LanesMaxP99Ratio is the most the interactive p99 with the batch in
	// the background lane may be, as a multiple of its p99 alone.
	LanesMaxP99Ratio = 1.2
	// LanesMinBatchShare is the least CPU share the batch in the
	// background lane must get: its 10%, within 10%.
	LanesMinBatchShare = 0.10 * 0.9
	// LanesMaxSettle is how soon after the live change the new shares
	// must hold.
	LanesMaxSettle = time.Second
	// LanesSettleTolerance is how close to its final mean the batch share
	// must be for the shares to hold: within 10% of it.
	LanesSettleTolerance = 0.10
	// LanesHoldSpan is the span the share is averaged over to say whether
	// it holds: a 100 ms window is 50 batch slices, whose count the
	// interactive load's own bursts move by more than 10% now and then.
	LanesHoldSpan = time.Second
)

// LanesPart sums up the runs of one part of the lanes scenario for one
// target: medians over the kept runs (those whose generator kept the
// interactive load's schedule), or over all of them when none was kept.
type LanesPart struct {
	Runs   int `json:"runs"`
	Behind int `json:"behind"`
	// Offered is the interactive load per second; GoodputFrac the share
	// of it answered with a 2xx within the deadline; P50 and P99 its
	// latencies in milliseconds.
	Offered     float64 `json:"offered"`
	GoodputFrac float64 `json:"goodput_frac"`
	P50         float64 `json:"p50_ms"`
	P99         float64 `json:"p99_ms"`
	// BatchRate is the batch requests completed per second of the window.
	BatchRate float64 `json:"batch_rate"`
	// BatchShare and InteractiveShare are the CPU shares from the
	// generator's completions; the Target ones from the target's (see
	// LanesDetail).
	BatchShare             float64 `json:"batch_share"`
	InteractiveShare       float64 `json:"interactive_share"`
	TargetBatchShare       float64 `json:"target_batch_share"`
	TargetInteractiveShare float64 `json:"target_interactive_share"`
	// OtherCPU is the CPU time neither the target nor the generator used
	// during the run, in CPU-seconds per second (LanesDetail); 0 when
	// unknown.
	OtherCPU float64 `json:"other_cpu"`
	// Live only: when the change was made (from the start of the run),
	// the batch's share (the target's count) before it and once settled
	// (the final mean), how long after it the share first reached its
	// final mean (Reach) and settled there by the target's count
	// (Settle) and by the generator's (SettleRequests): medians over the
	// runs, a run that never settled counting as longer than any;
	// Settles are the target's per run, in report order; Settled and
	// SettledRequests count the runs that did, Changed the runs whose
	// change was made. See LanesSettle.
	// Windows, Above and Below are the sums over the runs of LanesSettling's:
	// the windows from the first within the band on, and those of them
	// above and below it.
	Windows         int             `json:"windows,omitempty"`
	Above           int             `json:"above,omitempty"`
	Below           int             `json:"below,omitempty"`
	ChangeAt        time.Duration   `json:"change_at,omitempty"`
	BatchBefore     float64         `json:"batch_before,omitempty"`
	BatchAfter      float64         `json:"batch_after,omitempty"`
	Reach           time.Duration   `json:"reach,omitempty"`
	Settle          time.Duration   `json:"settle,omitempty"`
	Settles         []time.Duration `json:"settles,omitempty"`
	Settled         int             `json:"settled,omitempty"`
	SettleRequests  time.Duration   `json:"settle_requests,omitempty"`
	SettledRequests int             `json:"settled_requests,omitempty"`
	Changed         int             `json:"changed,omitempty"`
}

// LanesNever is the settle time of a share that never settled.
const LanesNever = time.Duration(math.MaxInt64)

// LanesRow sums up the lanes scenario for one target.
type LanesRow struct {
	Target string `json:"target"`
	// Placement says where a sluice target's workers ran; Workers how
	// many there were (GOMAXPROCS for net/http).
	Placement string `json:"placement,omitempty"`
	Workers   int    `json:"workers"`
	// Capacity is the median C of the interactive handler.
	Capacity float64 `json:"capacity"`
	// Parts holds the parts the target ran, by name (lanesParts).
	Parts map[string]LanesPart `json:"parts"`
	// P99Ratio is the interactive p99 under the batch flood (in the
	// background lane for a target with lanes, one-lane for the others)
	// over its p99 alone, from the parts' medians; 0 when either is
	// missing. Pairs are the same per repeat, for the repeats where both
	// runs were kept.
	P99Ratio float64     `json:"p99_ratio"`
	Pairs    []LanesPair `json:"pairs,omitempty"`
}

// LanesPair is one repeat's interactive p99 under the flood and alone, and
// the CPU time others used in each run (LanesDetail.OtherCPU, -1 when
// unknown).
type LanesPair struct {
	Repeat       int     `json:"repeat"`
	Flooded      float64 `json:"flooded_p99_ms"`
	Alone        float64 `json:"alone_p99_ms"`
	FloodedOther float64 `json:"flooded_other_cpu"`
	AloneOther   float64 `json:"alone_other_cpu"`
}

// Ratio is the pair's p99 under the flood over alone.
func (p LanesPair) Ratio() float64 { return p.Flooded / p.Alone }

// flooded returns the part a target's interactive p99 under the flood is
// read from: background when it ran it, else one-lane.
func (r LanesRow) flooded() string {
	if _, ok := r.Parts[LanesInBackground]; ok {
		return LanesInBackground
	}
	return LanesOneLane
}

// lanesRun is a lanes sample with its detail.
type lanesRun = detailed[LanesDetail]

// samplesOf returns the samples of runs.
func samplesOf(runs []lanesRun) []bench.Sample {
	out := make([]bench.Sample, len(runs))
	for i, r := range runs {
		out[i] = r.Sample
	}
	return out
}

// Summarize returns one LanesRow per target of rep's lanes samples, in
// the order the targets first appear; nil when there are none, or an
// error naming a sample whose detail does not decode.
func (c *Lanes) Summarize(rep *bench.Report) ([]LanesRow, error) {
	runs, err := detailedRuns[LanesDetail](rep, c.Name())
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	return grouped(runs, func(r lanesRun) string { return r.Target }, lanesRow), nil
}

// Rows are Summarize's, nil without lanes samples or when a sample's
// detail does not decode (WriteReport says which).
func (c *Lanes) Rows(rep *bench.Report) any { return rowsOf(c.Summarize(rep)) }

// lanesRow computes the row of one target.
func lanesRow(target string, samples []lanesRun) LanesRow {
	r := LanesRow{Target: target, Placement: report.PlacementOf(samplesOf(samples)), Parts: map[string]LanesPart{}}
	var capacity, workers []float64
	byPart := map[string][]lanesRun{}
	for _, s := range samples {
		capacity = append(capacity, s.Capacity)
		workers = append(workers, float64(s.detail.Workers))
		byPart[s.detail.Part] = append(byPart[s.detail.Part], s)
	}
	r.Capacity, r.Workers = report.Median(capacity), int(report.Median(workers))
	for part, ss := range byPart {
		r.Parts[part] = lanesPart(ss)
	}
	flood, alone := r.Parts[r.flooded()], r.Parts[LanesAlone]
	if flood.P99 > 0 && alone.P99 > 0 {
		r.P99Ratio = flood.P99 / alone.P99
	}
	for _, a := range byPart[LanesAlone] {
		for _, f := range byPart[r.flooded()] {
			if f.Repeat == a.Repeat && !f.Behind && !a.Behind && a.Latency.P99 > 0 && f.Latency.P99 > 0 {
				r.Pairs = append(r.Pairs, LanesPair{
					Repeat: a.Repeat, Flooded: f.Latency.P99, Alone: a.Latency.P99,
					FloodedOther: otherCPU(f), AloneOther: otherCPU(a),
				})
			}
		}
	}
	return r
}

// otherCPU returns the CPU time others used during a lanes run, or -1.
func otherCPU(s lanesRun) float64 {
	if s.detail.HostCPU < 0 {
		return -1
	}
	return s.detail.OtherCPU
}

// lanesPart computes one part's medians.
func lanesPart(samples []lanesRun) LanesPart {
	var p LanesPart
	kept := slices.DeleteFunc(slices.Clone(samples), func(s lanesRun) bool { return s.Behind })
	p.Runs, p.Behind = len(kept), len(samples)-len(kept)
	if len(kept) == 0 {
		kept = samples
	}
	var offered, good, p50, p99, batchRate, bs, is, tbs, tis, other []float64
	var at, before, after []float64
	var reach, settleReq []time.Duration
	for _, s := range kept {
		li := s.detail
		offered = append(offered, s.Rates.Offered)
		if s.Rates.Offered > 0 {
			good = append(good, s.Rates.Goodput/s.Rates.Offered)
		}
		if s.Rates.Goodput > 0 {
			p50 = append(p50, s.Latency.P50)
			p99 = append(p99, s.Latency.P99)
		}
		if sec := windowOf(s).Seconds(); sec > 0 {
			batchRate = append(batchRate, float64(li.BatchDone)/sec)
		}
		if o := otherCPU(s); o >= 0 {
			other = append(other, o)
		}
		bs, is = append(bs, li.BatchShare), append(is, li.InteractiveShare)
		tbs, tis = append(tbs, li.TargetBatchShare), append(tis, li.TargetInteractiveShare)
		if c := li.Change; c != nil && c.OK {
			p.Changed++
			at = append(at, float64(c.At))
			st := LanesSettle(li.Series, li.Window, c.At, func(w LanesWindow) float64 { return w.TargetBatch })
			before, after = append(before, st.Before), append(after, st.Final)
			reach = append(reach, st.Reach)
			p.Windows, p.Above, p.Below = p.Windows+st.Windows, p.Above+st.Above, p.Below+st.Below
			p.Settles = append(p.Settles, st.Settle)
			if st.Settle != LanesNever {
				p.Settled++
			}
			sr := LanesSettle(li.Series, li.Window, c.At, func(w LanesWindow) float64 { return w.Batch })
			settleReq = append(settleReq, sr.Settle)
			if sr.Settle != LanesNever {
				p.SettledRequests++
			}
		}
	}
	p.Offered, p.GoodputFrac, p.P50, p.P99 = report.Median(offered), report.Median(good), report.Median(p50), report.Median(p99)
	p.BatchRate = report.Median(batchRate)
	p.BatchShare, p.InteractiveShare = report.Median(bs), report.Median(is)
	p.TargetBatchShare, p.TargetInteractiveShare = report.Median(tbs), report.Median(tis)
	p.OtherCPU = report.Median(other)
	if len(at) > 0 {
		p.ChangeAt = time.Duration(report.Median(at))
		p.BatchBefore, p.BatchAfter = report.Median(before), report.Median(after)
		p.Reach, p.Settle, p.SettleRequests = durationMedian(reach), durationMedian(p.Settles), durationMedian(settleReq)
	}
	return p
}

// durationMedian is the median of settle times, which may be LanesNever:
// the middle two of an even count are averaged unless one is LanesNever,
// which is then the median.
func durationMedian(xs []time.Duration) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	lo, hi := s[(n-1)/2], s[n/2]
	if hi == LanesNever {
		return LanesNever
	}
	return lo + (hi-lo)/2
}

// windowOf returns the sending window of a lanes sample: its series'
// extent.
func windowOf(s lanesRun) time.Duration {
	li := s.detail
	return time.Duration(len(li.Series)) * li.Window
}

// LanesSettling is when a share settles after a change, by LanesSettle.
type LanesSettling struct {
	// Before is the mean share over the windows wholly before the change;
	// Final the mean over the last half of those wholly after it.
	Before, Final float64
	// Reach is the time from the change to the start of the first window
	// whose share is within LanesSettleTolerance of Final; LanesNever when none
	// is. Settle is the time from the change from which on the share
	// holds: Reach, or later if the share's mean over a LanesHoldSpan
	// (sliding by a window) strays out of that band afterwards; LanesNever when
	// the last span's mean does (or the run has less than a span after
	// the change).
	Settle, Reach time.Duration
	// Windows counts the windows from the first within the band on;
	// Above and Below those of them above and below it.
	Windows, Above, Below int
}

// LanesSettle reads, from a run's series of windows of width, how the share
// that get reads settles after a change at at.
func LanesSettle(series []LanesWindow, width, at time.Duration, get func(LanesWindow) float64) LanesSettling {
	st := LanesSettling{Settle: LanesNever, Reach: LanesNever}
	var pre, post []LanesWindow
	for _, w := range series {
		switch {
		case w.Start+width <= at:
			pre = append(pre, w)
		case w.Start >= at:
			post = append(post, w)
		}
	}
	mean := func(ws []LanesWindow) float64 {
		if len(ws) == 0 {
			return 0
		}
		sum := 0.0
		for _, w := range ws {
			sum += get(w)
		}
		return sum / float64(len(ws))
	}
	st.Before = mean(pre)
	if len(post) == 0 {
		return st
	}
	st.Final = mean(post[len(post)/2:])
	if st.Final <= 0 {
		return st
	}
	inBand := func(v float64) bool { return math.Abs(v-st.Final) <= LanesSettleTolerance*st.Final }
	within := func(w LanesWindow) bool { return inBand(get(w)) }
	var holds time.Duration = LanesNever
	if n := max(int(LanesHoldSpan/width), 1); len(post) >= n {
		k := len(post) - n + 1 // spans post[j:j+n] in band for every j >= k
		for k > 0 && inBand(mean(post[k-1:k-1+n])) {
			k--
		}
		if k < len(post)-n+1 {
			holds = post[k].Start - at
		}
	}
	if i := slices.IndexFunc(post, within); i >= 0 {
		st.Reach = post[i].Start - at
		if holds != LanesNever {
			st.Settle = max(holds, st.Reach)
		}
		for _, w := range post[i:] {
			st.Windows++
			switch v := get(w); {
			case v > (1+LanesSettleTolerance)*st.Final:
				st.Above++
			case v < (1-LanesSettleTolerance)*st.Final:
				st.Below++
			}
		}
	}
	return st
}

// LanesCheck is one of the targets the lanes scenario is checked against.
type LanesCheck struct {
	// What the check is, in words; Value what was measured.
	What  string `json:"what"`
	Value string `json:"value"`
	// Pass, when Known, says whether the target was met; a check without
	// a threshold (shown beside the others) is Info.
	Pass  bool `json:"pass"`
	Known bool `json:"known"`
	Info  bool `json:"info,omitempty"`
}

// LanesChecks checks rows against the targets: the first target with
// lanes (sluice) for the first three, the targets without lanes (net/http)
// for the last, which has no threshold.
func LanesChecks(rows []LanesRow) []LanesCheck {
	var lane *LanesRow
	for i := range rows {
		if _, ok := rows[i].Parts[LanesInBackground]; ok {
			lane = &rows[i]
			break
		}
	}
	p99 := LanesCheck{What: fmt.Sprintf("interactive p99 with the batch in the background lane within %.0f%% of alone", 100*(LanesMaxP99Ratio-1))}
	share := LanesCheck{What: fmt.Sprintf("the batch in the background lane gets at least %.0f%% of the CPU (its 10%%, within 10%%)", 100*LanesMinBatchShare)}
	settle := LanesCheck{What: fmt.Sprintf("after the live change the batch's new share holds within %v (its mean over every later %v within %.0f%% of its final mean)", LanesMaxSettle, LanesHoldSpan, 100*LanesSettleTolerance)}
	for _, c := range []*LanesCheck{&p99, &share, &settle} {
		c.Value = "not measured"
	}
	if lane != nil {
		bg, alone := lane.Parts[LanesInBackground], lane.Parts[LanesAlone]
		if lane.P99Ratio > 0 {
			p99.Known, p99.Pass = true, lane.P99Ratio <= LanesMaxP99Ratio
			p99.Value = fmt.Sprintf("%s: %.2fx (p99 %s ms against %s ms alone)", lane.Target, lane.P99Ratio, report.FormatMS(bg.P99), report.FormatMS(alone.P99))
		}
		if bg.Runs+bg.Behind > 0 {
			share.Known, share.Pass = true, bg.BatchShare >= LanesMinBatchShare
			share.Value = fmt.Sprintf("%s: %.1f%% (the target's count: %.1f%%; interactive %.1f%%)",
				lane.Target, 100*bg.BatchShare, 100*bg.TargetBatchShare, 100*bg.InteractiveShare)
		}
		if live, ok := lane.Parts[LanesLive]; ok && live.Changed > 0 {
			settle.Known, settle.Pass = true, live.Settle <= LanesMaxSettle
			settle.Value = fmt.Sprintf("%s: %s (per run: %s; first reached after %s; batch %.1f%% -> %.1f%%)",
				lane.Target, formatSettle(live.Settle), formatSettles(live.Settles), formatSettle(live.Reach), 100*live.BatchBefore, 100*live.BatchAfter)
		}
	}
	checks := []LanesCheck{p99, share, settle}
	for _, r := range rows {
		if _, ok := r.Parts[LanesInBackground]; ok {
			continue
		}
		one, alone := r.Parts[LanesOneLane], r.Parts[LanesAlone]
		if one.Runs+one.Behind == 0 {
			continue
		}
		c := LanesCheck{What: r.Target + "'s interactive p99 under the same flood", Info: true, Known: true}
		c.Value = fmt.Sprintf("%s ms (alone %s ms", report.FormatMS(one.P99), report.FormatMS(alone.P99))
		if r.P99Ratio > 0 {
			c.Value += fmt.Sprintf(", %.2fx", r.P99Ratio)
		}
		if lane != nil {
			c.Value += fmt.Sprintf("; %s with the batch in the background lane: %s ms", lane.Target, report.FormatMS(lane.Parts[LanesInBackground].P99))
		}
		c.Value += ")"
		checks = append(checks, c)
	}
	return checks
}

// formatOther prints the CPU time others used, or "?" when unknown.
func formatOther(x float64) string {
	if x < 0 {
		return "?"
	}
	return fmt.Sprintf("%.2f", x)
}

// formatSettles prints settle times, comma-separated.
func formatSettles(ds []time.Duration) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = formatSettle(d)
	}
	return strings.Join(out, ", ")
}

// formatSettle prints a settle time, or "never".
func formatSettle(d time.Duration) string {
	if d == LanesNever {
		return "never"
	}
	return d.Round(time.Millisecond).String()
}

// WriteReport writes the lanes samples of rep to w: the load, a table of
// every part per target, the live change, and the targets checked
// (LanesChecks). It writes nothing for a report without lanes samples.
func (c *Lanes) WriteReport(w io.Writer, rep *bench.Report) error {
	runs, err := detailedRuns[LanesDetail](rep, c.Name())
	if err != nil {
		return err
	}
	rows, err := c.Summarize(rep)
	if err != nil || len(rows) == 0 {
		return err
	}
	// The setup, from the samples that show each part of it.
	var (
		first, batch, lane, live LanesDetail
		multiple                 float64
	)
	for _, s := range runs {
		li := s.detail
		if first.Part == "" {
			first, multiple = li, s.Multiple
		}
		if batch.BatchRate == 0 && li.BatchRate > 0 {
			batch = li
		}
		if lane.Shares == 0 && li.Shares > 0 {
			lane = li
		}
		if live.LiveShares == 0 && li.LiveShares > 0 {
			live = li
		}
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "\nlanes: %s computes %v at %sx of C, beside %s computing %v in slices of %v (sluice.Yield between; a no-op on net/http)\n",
		LanesInteractivePath, first.Interactive, formatMultiple(multiple), LanesBatchPath, first.Batch, first.Slice)
	if batch.BatchRate > 0 {
		fmt.Fprintf(&buf, "batch offered at %.4g/s (C_b = workers / %v = %.4g/s) on %d connections of its own\n",
			batch.BatchRate, batch.Batch, float64(batch.Workers)/batch.Batch.Seconds(), batch.BatchConns)
	}
	if lane.Shares > 0 {
		fmt.Fprintf(&buf, "background lane: priority %d, %d shares", lane.Priority, lane.Shares)
		if live.LiveShares > 0 {
			fmt.Fprintf(&buf, "; live: %d -> %d shares through laneadmin at the middle of the run", lane.Shares, live.LiveShares)
		}
		buf.WriteString("\n")
	}
	tw := report.NewTab(&buf)
	report.Line(tw, "target", "part", "workers", "C/s", "offered/s", "goodput", "p50 ms", "p99 ms", "batch/s", "batch CPU", "interactive CPU", "in target: batch", "interactive", "others' CPU", "runs")
	for _, r := range rows {
		for _, part := range lanesParts {
			p, ok := r.Parts[part]
			if !ok {
				continue
			}
			report.Line(tw, r.Target, part, workersOf(r), fmt.Sprintf("%.0f", r.Capacity), fmt.Sprintf("%.0f", p.Offered),
				fmt.Sprintf("%.3f", p.GoodputFrac), report.FormatMS(p.P50), report.FormatMS(p.P99),
				fmt.Sprintf("%.1f", p.BatchRate), percentCell(p.BatchShare), percentCell(p.InteractiveShare),
				percentCell(p.TargetBatchShare), percentCell(p.TargetInteractiveShare), fmt.Sprintf("%.2f", p.OtherCPU), fmt.Sprintf("%d/%d", p.Runs, p.Behind))
		}
	}
	_ = tw.Flush() // into a bytes.Buffer
	for _, r := range rows {
		live, ok := r.Parts[LanesLive]
		if !ok {
			continue
		}
		if live.Changed == 0 {
			fmt.Fprintf(&buf, "\n%s live: the change was not made\n", r.Target)
			continue
		}
		if n := max(live.Runs, live.Behind); live.Changed < n {
			fmt.Fprintf(&buf, "\n%s live: the change was made in %d of %d runs; the others are left out below", r.Target, live.Changed, n)
		}
		fmt.Fprintf(&buf, "\n%s live: change at %.2f s; batch share (in target) %.1f%% before, %.1f%% after (final mean), first reached after %s;\n"+
			"  from then on, %d of %d windows strayed out of the band (10%% of the final mean): %d above, %d below;\n"+
			"  settled after %s by the target's count (per run: %s; %d of %d runs settled), %s by the requests' completions (%d of %d runs)\n",
			r.Target, live.ChangeAt.Seconds(), 100*live.BatchBefore, 100*live.BatchAfter, formatSettle(live.Reach),
			live.Above+live.Below, live.Windows, live.Above, live.Below,
			formatSettle(live.Settle), formatSettles(live.Settles), live.Settled, live.Changed,
			formatSettle(live.SettleRequests), live.SettledRequests, live.Changed)
	}
	buf.WriteString("\np99 under the flood over p99 alone (background part for a target with lanes, one-lane otherwise):\n")
	for _, r := range rows {
		ratio := "-"
		if r.P99Ratio > 0 {
			ratio = fmt.Sprintf("%.2fx", r.P99Ratio)
		}
		fmt.Fprintf(&buf, "  %s %s: %s; per repeat:", r.Target, r.flooded(), ratio)
		if len(r.Pairs) == 0 {
			buf.WriteString(" -")
		}
		for _, pr := range r.Pairs {
			fmt.Fprintf(&buf, "\n    #%d %.2fx (%s ms against %s ms; others' CPU %s, %s)", pr.Repeat, pr.Ratio(),
				report.FormatMS(pr.Flooded), report.FormatMS(pr.Alone), formatOther(pr.FloodedOther), formatOther(pr.AloneOther))
		}
		buf.WriteString("\n")
	}
	buf.WriteString("\ntargets:\n")
	for _, c := range LanesChecks(rows) {
		mark := "INFO"
		switch {
		case c.Info:
		case !c.Known:
			mark = "----"
		case c.Pass:
			mark = "PASS"
		default:
			mark = "FAIL"
		}
		fmt.Fprintf(&buf, "  %s  %s: %s\n", mark, c.What, c.Value)
	}
	buf.WriteString("\n" + strings.Join([]string{
		"goodput: interactive answers with a 2xx within the deadline over those offered; p50, p99: of those answers;",
		"batch/s: batch requests completed per second of the window; batch CPU, interactive CPU: completions within the window",
		"times their work, over the window times the workers (from the generator's completion times); in target: the same",
		"counted in the target, each batch slice and interactive request where it ended (answered in time or not);",
		"settled: the first 100 ms window from which on the batch share's mean over every 1 s span is within 10% of the mean",
		"of the last half of the windows after the change; first reached: the first single window within it; strayed: single",
		"windows out of that band after it (a batch request is 20 ms of a 100 ms window times the workers: the requests'",
		"completions cannot settle within 10% at that resolution, and the check reads the target's count);",
		"the work is a busy-wait of wall time, as the weather handler's: a thread descheduled in it counts the time it waited;",
		"others' CPU: CPU-seconds per second of the machine that neither the target nor the generator used (other programs,",
		"the kernel's work for neither, the hypervisor's steal): a shared machine's disturbance;",
		"runs: kept/behind (the generator fell behind the interactive schedule).",
	}, "\n") + "\n")
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("bench: write the lanes report: %w", err)
	}
	return nil
}

// workersOf prints a row's workers and placement: "1", "2 floating".
func workersOf(r LanesRow) string {
	return strings.TrimSpace(fmt.Sprintf("%d %s", r.Workers, r.Placement))
}

// percentCell prints a share as a percentage.
func percentCell(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// LanesPlotName is the file LanesPlots writes.
const LanesPlotName = "lanes-live.png"

// Plots draws the live part of the lanes scenario in dir, which it creates
// if missing, and returns the path: LanesPlotName, the batch's and the
// interactive route's CPU shares per window against time, for the first
// kept run (lowest repeat) of the first target with one, counted in the
// target (solid) and from the generator's completions (thin), with the
// change and the settle time marked. It returns nothing without such a
// run.
func (c *Lanes) Plots(dir string, rep *bench.Report) ([]string, error) {
	runs, err := detailedRuns[LanesDetail](rep, c.Name())
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	return report.ShapePlots(dir, rep, c.Name(), func(string) (*plot.Plot, string, error) {
		p, err := lanesPlot(runs)
		return p, LanesPlotName, err
	})
}

// liveRun picks the live run LanesPlots draws.
func liveRun(runs []lanesRun) (lanesRun, bool) {
	var pick lanesRun
	found := false
	for _, s := range runs {
		li := s.detail
		if li.Part != LanesLive || li.Change == nil || !li.Change.OK || len(li.Series) == 0 {
			continue
		}
		switch {
		case !found:
		case pick.Target != s.Target:
			continue
		case pick.Behind && !s.Behind, pick.Behind == s.Behind && s.Repeat < pick.Repeat:
		default:
			continue
		}
		pick, found = s, true
	}
	return pick, found
}

// lanesPlot draws the chart of Plots, nil without a live run.
func lanesPlot(runs []lanesRun) (*plot.Plot, error) {
	s, ok := liveRun(runs)
	if !ok {
		return nil, nil
	}
	li := s.detail
	st := LanesSettle(li.Series, li.Window, li.Change.At, func(w LanesWindow) float64 { return w.TargetBatch })
	behind := ""
	if s.Behind {
		behind = ", generator behind schedule"
	}
	p := report.NewPlot(fmt.Sprintf("Lanes, live change of the background lane's shares %d -> %d\n%s, repeat #%d%s; CPU share per %s ms window; settled (every later second within 10%%): %s",
		li.Shares, li.LiveShares, s.Target, s.Repeat, behind, strconv.FormatInt(li.Window.Milliseconds(), 10), formatSettle(st.Settle)),
		"time since start of run (s)", "share of the workers' CPU")
	p.Legend.Left, p.Legend.XOffs = false, -report.LegendInset
	ymax := 1.0
	for _, ln := range []struct {
		name  string
		get   func(LanesWindow) float64
		color int
		width vg.Length
		dash  []vg.Length
	}{
		{"batch, in target", func(w LanesWindow) float64 { return w.TargetBatch }, 0, vg.Points(1.5), nil},
		{"interactive, in target", func(w LanesWindow) float64 { return w.TargetInteractive }, 1, vg.Points(1.5), nil},
		{"batch, by request completions", func(w LanesWindow) float64 { return w.Batch }, 0, vg.Points(0.5), []vg.Length{vg.Points(1), vg.Points(2)}},
		{"interactive, by request completions", func(w LanesWindow) float64 { return w.Interactive }, 1, vg.Points(0.5), []vg.Length{vg.Points(1), vg.Points(2)}},
	} {
		var xys plotter.XYs
		for _, w := range li.Series {
			v := ln.get(w)
			xys = append(xys, plotter.XY{X: (w.Start + li.Window/2).Seconds(), Y: v})
			ymax = math.Max(ymax, v)
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("bench: lanes plot, %s: %w", ln.name, err)
		}
		l.Color, l.Width, l.Dashes = plotutil.Color(ln.color), ln.width, ln.dash
		p.Add(l)
		p.Legend.Add(ln.name, l)
	}
	marks := []struct {
		name string
		at   time.Duration
		dash []vg.Length
	}{{fmt.Sprintf("change to %d shares", li.LiveShares), li.Change.At, []vg.Length{vg.Points(4), vg.Points(2)}}}
	if st.Settle != LanesNever {
		marks = append(marks, struct {
			name string
			at   time.Duration
			dash []vg.Length
		}{"settled (in target)", li.Change.At + st.Settle, []vg.Length{vg.Points(1), vg.Points(2)}})
	}
	for _, m := range marks {
		l, err := plotter.NewLine(plotter.XYs{{X: m.at.Seconds(), Y: 0}, {X: m.at.Seconds(), Y: ymax * 1.05}})
		if err != nil {
			return nil, fmt.Errorf("bench: lanes plot, marker: %w", err)
		}
		l.Color, l.Dashes = color.Gray{Y: 96}, m.dash
		p.Add(l)
		p.Legend.Add(m.name, l)
	}
	if st.Final > 0 {
		end := (time.Duration(len(li.Series)) * li.Window).Seconds()
		for i, f := range []float64{1 - LanesSettleTolerance, 1 + LanesSettleTolerance} {
			l, err := plotter.NewLine(plotter.XYs{{X: li.Change.At.Seconds(), Y: f * st.Final}, {X: end, Y: f * st.Final}})
			if err != nil {
				return nil, fmt.Errorf("bench: lanes plot, band: %w", err)
			}
			l.Color, l.Width = color.Gray{Y: 160}, vg.Points(0.5)
			p.Add(l)
			if i == 0 {
				p.Legend.Add("batch's final mean, within 10%", l)
			}
		}
	}
	p.X.Tick.Marker = secondTicks{}
	p.Y.Min, p.Y.Max = 0, ymax*1.6 // room for the legend
	return p, nil
}

// secondTicks marks a time axis in seconds every second, or every few
// seconds on a long one.
type secondTicks struct{}

func (secondTicks) Ticks(lo, hi float64) []plot.Tick {
	step := math.Max(1, math.Ceil((hi-lo)/12))
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	return ticks
}
