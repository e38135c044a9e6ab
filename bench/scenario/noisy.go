package scenario

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
	"github.com/sluice-go/sluice/bench/report"
)

// DefaultNoisyRates returns the noisy scenario's offered loads when Noisy
// names none, in requests per second: on a 2-CPU machine, where the
// weather handler's capacity on both CPUs is about 1800/s, a load that
// the CPU left to a target carries and one that it barely carries.
func DefaultNoisyRates() []float64 { return []float64{800, 1200} }

// maxNoisyRate bounds an offered rate of the noisy scenario.
const maxNoisyRate = 1e6

// Noisy measures a target beside a noisy neighbour. Each target serves the
// suite's Shape (the weather handler, 1 ms of CPU and 10 ms of database by
// default) on every CPU of the suite, the split's two sets together (so a
// sluice target has one worker per CPU), while a busy loop in another
// process, started just before the target, holds the last of those CPUs
// at the targets' nice value (bench.TargetNice), so that a thread of the
// target on that CPU gets about half of it. Each rate is offered open loop
// for the suite's Duration, the same rate to every target: the question is
// whether a target serves a load that the CPUs left to it can carry, not
// how it fares at a multiple of its own capacity.
//
// Besides the rates and latencies, each sample records the neighbour's
// CPU time and how long the target's threads waited for a CPU
// (NoisyDetail), and the report shows where a sluice target's workers ran,
// pinned or floating.
type Noisy struct {
	// Rates are the offered loads in requests per second, each a point;
	// default DefaultNoisyRates.
	Rates []float64
	// Quiet runs the same points without the neighbour: the control,
	// what each target does with every CPU to itself.
	Quiet bool

	rates string // -noisy-rates
}

// Name is "noisy".
func (*Noisy) Name() string { return "noisy" }

// Describe says what the scenario does, for the command's help.
func (*Noisy) Describe() string {
	return "a busy neighbour on the last CPU"
}

// Flags registers -noisy-rates and -noisy-quiet.
func (n *Noisy) Flags(fs *flag.FlagSet) {
	fs.StringVar(&n.rates, "noisy-rates", "", "offered loads of the noisy scenario, in requests per second (the same for every target), comma-separated (default "+formatRates(DefaultNoisyRates())+")")
	fs.BoolVar(&n.Quiet, "noisy-quiet", false, "run the noisy scenario without its neighbour: the control")
}

// Check reads -noisy-rates, fills in the default rates and checks each. The
// scenario starts its target on every CPU itself and offers its rates from
// the generator's own pool, so the suite's TLS, NewConns and Clients do
// not apply.
func (n *Noisy) Check(s *bench.SuiteConfig) error {
	if s.TLS || s.NewConns || s.Clients != 0 {
		return errors.New("bench: -tls, -newconns and -clients (SuiteConfig.TLS, NewConns, Clients) do not apply to the noisy scenario, which starts its target on every CPU and offers plain requests from a pool")
	}
	if n.rates != "" {
		n.Rates = nil
		for _, f := range strings.Split(n.rates, ",") {
			f = strings.TrimSpace(f)
			r, err := strconv.ParseFloat(strings.TrimSuffix(f, "/s"), 64)
			if err != nil {
				return fmt.Errorf("-noisy-rates: %q is not a rate in requests a second", f)
			}
			n.Rates = append(n.Rates, r)
		}
	}
	if len(n.Rates) == 0 {
		n.Rates = DefaultNoisyRates()
	}
	for _, r := range n.Rates {
		if !(r > 0) || r > maxNoisyRate {
			return fmt.Errorf("bench: the noisy scenario's rate %v must be in (0, %.0f] requests a second (-noisy-rates)", r, maxNoisyRate)
		}
	}
	return nil
}

// Points are one per rate, each on the suite's Shape.
func (n *Noisy) Points(s *bench.SuiteConfig) []bench.Point {
	var ps []bench.Point
	for _, r := range n.Rates {
		ps = append(ps, bench.Point{Shape: s.Shape, Spec: s.Shape.Spec, Rate: r})
	}
	return ps
}

// NoisyDetail is what a noisy sample records beyond the common figures
// (Sample.Detail).
type NoisyDetail struct {
	// Rate is the offered load, in requests per second.
	Rate float64 `json:"rate"`
	// CPUs are the CPUs the target ran on; NeighbourCPU the one the busy
	// loop held, at NeighbourNice, or -1 in a quiet run (Noisy.Quiet).
	CPUs          []int `json:"cpus"`
	NeighbourCPU  int   `json:"neighbour_cpu"`
	NeighbourNice int   `json:"neighbour_nice"`
	// NeighbourUse is the CPU time the busy loop got during the run, in
	// CPU-seconds per second.
	NeighbourUse float64 `json:"neighbour_use"`
	// RunQueue is how long the target's threads waited for a CPU during
	// the run.
	RunQueue bench.RunQueue `json:"run_queue"`
}

// Run starts the neighbour on the last of the suite's CPUs (none when
// Quiet), then a fresh target on all of them, and offers the point's rate
// for the suite's Duration, metering the target's and the neighbour's CPU
// time and the target's run queue over the run.
func (n *Noisy) Run(ctx context.Context, t *bench.Trial) (s *bench.Sample, err error) {
	cpus := t.AllCPUs()
	if len(cpus) < 2 {
		return nil, fmt.Errorf("bench: the noisy scenario needs two CPUs or more, the suite has %v", cpus)
	}
	d := NoisyDetail{Rate: t.Point.Rate, CPUs: cpus, NeighbourCPU: -1, NeighbourNice: bench.TargetNice}
	var nb *bench.Neighbour
	if !n.Quiet {
		d.NeighbourCPU = cpus[len(cpus)-1]
		if nb, err = t.StartNeighbour(ctx, d.NeighbourCPU, t.Suite.Duration+t.Suite.Deadline); err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, nb.Stop()) }()
	}
	proc, err := t.StartOn(ctx, t.Child(), cpus)
	if err != nil {
		return nil, err
	}
	rc, err := t.Generator(proc)
	if err != nil {
		return nil, errors.Join(err, proc.Stop())
	}
	rc.Conns = 0 // the pool the rate needs; the suite's Conns is the weather scenarios'
	rc.Rate, rc.Duration = t.Point.Rate, t.Suite.Duration
	s = t.Sample()
	queue := bench.MeterRunQueue(proc)
	used := nb.CPUTime()
	m := bench.MeterCPU(proc)
	res, err := load.Run(ctx, rc)
	elapsed := m.Stop(s)
	used = nb.CPUTime() - used
	if rq, ok := queue.Stop(); ok {
		d.RunQueue = rq
	}
	err = errors.Join(err, proc.Stop())
	if res == nil {
		return nil, err
	}
	bench.Fill(s, res)
	s.Server = proc.Stats
	s.Placement = proc.Placement
	if sec := elapsed.Seconds(); sec > 0 {
		d.NeighbourUse = used.Seconds() / sec
	}
	return s, errors.Join(err, s.SetDetail(d))
}

// NoisyRow is the noisy scenario's summary of one target at one offered
// rate: medians over the kept runs (those whose generator kept its
// schedule), or over the others, marked Indicative, when none was kept.
type NoisyRow struct {
	Target string `json:"target"`
	// Rate is the offered load asked for, in requests per second.
	Rate   float64 `json:"rate"`
	Runs   int     `json:"runs"`
	Behind int     `json:"behind"`
	// Offered, Goodput, Rejected and Failed are per second; the
	// fractions are of the offered load.
	Offered      float64 `json:"offered"`
	Goodput      float64 `json:"goodput"`
	Rejected     float64 `json:"rejected"`
	Failed       float64 `json:"failed"`
	RejectedFrac float64 `json:"rejected_frac"`
	FailedFrac   float64 `json:"failed_frac"`
	P50          float64 `json:"p50_ms"`
	P99          float64 `json:"p99_ms"`
	// Ratio is Goodput over report.BaselineTarget's at the same rate; 0
	// without a baseline row with goodput. RatioIndicative marks a ratio
	// that rests on runs whose generator fell behind (this row's or the
	// baseline's).
	Ratio           float64 `json:"ratio"`
	RatioIndicative bool    `json:"ratio_indicative,omitempty"`
	// TargetCPU is the target's CPU-seconds per second, NeighbourUse the
	// busy loop's.
	TargetCPU    float64 `json:"target_cpu"`
	NeighbourUse float64 `json:"neighbour_use"`
	// RunQueueWait and MaxThreadWait are the target's threads' wait for a
	// CPU, all of them together and the one that waited most, in seconds
	// per second.
	RunQueueWait  float64 `json:"run_queue_wait"`
	MaxThreadWait float64 `json:"max_thread_wait"`
	// Placement says where a sluice target's workers ran: "pinned 0-1"
	// or "floating"; "" for other targets.
	Placement  string `json:"placement,omitempty"`
	Indicative bool   `json:"indicative,omitempty"`
}

// noisyRun is a noisy sample with its detail.
type noisyRun = detailed[NoisyDetail]

// runs returns rep's noisy samples that have a detail, in report order,
// or an error naming a sample whose detail does not decode.
func (*Noisy) runs(rep *bench.Report) ([]noisyRun, error) {
	return detailedRuns[NoisyDetail](rep, "noisy")
}

// Summarize returns one row per target and rate of rep's noisy samples,
// by ascending rate, then target in the order it first appears in rep;
// nil when there are none.
func (n *Noisy) Summarize(rep *bench.Report) ([]NoisyRow, error) {
	runs, err := n.runs(rep)
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	type key struct {
		target string
		rate   float64
	}
	var order []key
	by := make(map[key][]noisyRun)
	for _, r := range runs {
		k := key{r.Target, math.Round(r.detail.Rate*1e6) / 1e6}
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], r)
	}
	var rows []NoisyRow
	for _, k := range order {
		rows = append(rows, noisyRow(k.target, k.rate, by[k]))
	}
	ranks := report.TargetRanks(rep)
	slices.SortStableFunc(rows, func(a, b NoisyRow) int {
		if a.Rate != b.Rate {
			if a.Rate < b.Rate {
				return -1
			}
			return 1
		}
		return ranks[a.Target] - ranks[b.Target]
	})
	base := make(map[float64]NoisyRow)
	for _, r := range rows {
		if r.Target == report.BaselineTarget {
			base[r.Rate] = r
		}
	}
	for i := range rows {
		r := &rows[i]
		if b, ok := base[r.Rate]; ok && b.Goodput > 0 {
			r.Ratio = r.Goodput / b.Goodput
			r.RatioIndicative = r.Indicative || b.Indicative
		}
	}
	return rows, nil
}

// noisyRow computes the row of one target and rate from its runs.
func noisyRow(target string, rate float64, runs []noisyRun) NoisyRow {
	samples := make([]bench.Sample, len(runs))
	for i, r := range runs {
		samples[i] = r.Sample
	}
	r := NoisyRow{Target: target, Rate: rate, Placement: report.PlacementOf(samples)}
	kept := slices.DeleteFunc(slices.Clone(runs), func(r noisyRun) bool { return r.Behind })
	r.Runs, r.Behind = len(kept), len(runs)-len(kept)
	if len(kept) == 0 {
		kept, r.Indicative = runs, true
	}
	var offered, goodput, rejected, failed, rejFrac, failFrac, p50, p99, tcpu, nuse, rq, rqMax []float64
	for _, s := range kept {
		rt := s.Rates
		offered = append(offered, rt.Offered)
		goodput = append(goodput, rt.Goodput)
		rejected = append(rejected, rt.Rejected)
		failed = append(failed, rt.Failed)
		if rt.Offered > 0 {
			rejFrac = append(rejFrac, rt.Rejected/rt.Offered)
			failFrac = append(failFrac, rt.Failed/rt.Offered)
		}
		if rt.Goodput > 0 {
			p50 = append(p50, s.Latency.P50)
			p99 = append(p99, s.Latency.P99)
		}
		tcpu = append(tcpu, s.TargetCPU)
		nuse = append(nuse, s.detail.NeighbourUse)
		rq = append(rq, s.detail.RunQueue.Wait)
		rqMax = append(rqMax, s.detail.RunQueue.MaxThread)
	}
	med := report.Median
	r.Offered, r.Goodput, r.Rejected, r.Failed = med(offered), med(goodput), med(rejected), med(failed)
	r.RejectedFrac, r.FailedFrac = med(rejFrac), med(failFrac)
	r.P50, r.P99 = med(p50), med(p99)
	r.TargetCPU, r.NeighbourUse = med(tcpu), med(nuse)
	r.RunQueueWait, r.MaxThreadWait = med(rq), med(rqMax)
	return r
}

// Rows are Summarize's, nil without noisy samples or when a sample's
// detail does not decode (WriteReport says which).
func (n *Noisy) Rows(rep *bench.Report) any { return rowsOf(n.Summarize(rep)) }

// WriteReport writes the noisy samples of rep: a line on the setup (the
// target's CPUs and the neighbour's, from the first sample), one row per
// target and rate (Summarize), and what the columns mean. It writes
// nothing for a report without noisy samples.
func (n *Noisy) WriteReport(w io.Writer, rep *bench.Report) error {
	runs, err := n.runs(rep)
	if err != nil {
		return err
	}
	rows, err := n.Summarize(rep)
	if err != nil || len(rows) == 0 {
		return err
	}
	first := runs[0]
	shape, handler, cpus := first.Shape, report.HandlerOf(rep, "noisy", first.Shape), bench.FormatCPUList(first.detail.CPUs)
	if shape == "" {
		shape = "-"
	}
	var buf bytes.Buffer
	if d := first.detail; d.NeighbourCPU >= 0 {
		fmt.Fprintf(&buf, "\nnoisy neighbour, shape %s%s: targets on CPUs %s, a busy loop in another process on CPU %d (nice %d, as the targets)\n",
			shape, handler, cpus, d.NeighbourCPU, d.NeighbourNice)
	} else {
		fmt.Fprintf(&buf, "\nnoisy neighbour's control, shape %s%s: targets on CPUs %s, no neighbour\n", shape, handler, cpus)
	}
	tw := report.NewTab(&buf)
	report.Line(tw, "target", "workers", "offered/s", "goodput/s", "vs "+report.BaselineTarget, "503 %", "failed %", "p50 ms", "p99 ms",
		"CPU tgt", "CPU nbr", "rq wait", "rq max", "runs")
	indicative := false
	for _, r := range rows {
		name := r.Target
		if r.Indicative {
			name += "*"
			indicative = true
		}
		ratio := "-"
		if r.Ratio > 0 {
			ratio = fmt.Sprintf("%.2f", r.Ratio)
			if r.RatioIndicative {
				ratio += "*"
			}
		}
		placement := r.Placement
		if placement == "" {
			placement = "-"
		}
		report.Line(tw, name, placement, fmt.Sprintf("%.0f", r.Offered), fmt.Sprintf("%.0f", r.Goodput), ratio,
			fmt.Sprintf("%.1f", 100*r.RejectedFrac), fmt.Sprintf("%.1f", 100*r.FailedFrac),
			report.FormatMS(r.P50), report.FormatMS(r.P99),
			fmt.Sprintf("%.2f", r.TargetCPU), fmt.Sprintf("%.2f", r.NeighbourUse),
			fmt.Sprintf("%.2f", r.RunQueueWait), fmt.Sprintf("%.2f", r.MaxThreadWait),
			fmt.Sprintf("%d/%d", r.Runs, r.Behind))
	}
	_ = tw.Flush() // into a bytes.Buffer
	if indicative {
		buf.WriteString("* after a target: the load generator fell behind its schedule in every run of this row (indicative\n" +
			"  only); after a ratio: it rests on such runs, of this row or of " + report.BaselineTarget + "'s.\n")
	}
	buf.WriteString(strings.Join([]string{
		"workers: where a sluice target's workers ran (pinned to CPUs, or floating: placed by the kernel);",
		"503 %: refused unstarted (Sluice-Not-Started); failed %: late, errors, other statuses;",
		"CPU tgt / nbr: CPU-seconds per second of the target and of the busy neighbour;",
		"rq wait: seconds per second the target's threads, together, waited for a CPU while runnable;",
		"rq max: the same for the one thread that waited most (0.5: runnable half the time and not running).",
	}, "\n") + "\n")
	_, err = w.Write(buf.Bytes())
	return err
}

// formatRates writes rates as -noisy-rates takes them: "800,1200".
func formatRates(rates []float64) string {
	s := make([]string, len(rates))
	for i, r := range rates {
		s[i] = strconv.FormatFloat(r, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}
