package scenario

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
	"github.com/sluice-go/sluice/bench/report"
)

// The parts of the stray scenario, as in StrayDetail.Part and
// bench.Point.Part, in the order it runs them on each target.
const (
	// StrayTrivial offers Stray.TrivialRate to TrivialPath with the
	// stray calls alongside.
	StrayTrivial = "trivial"
	// StrayCPU offers Stray.Multiple of C to the CPU-bound handler,
	// alone.
	StrayCPU = "cpu"
	// StrayCPUWith offers the same with the stray calls alongside.
	StrayCPUWith = "cpu+stray"
)

// Defaults of Stray's zero fields.
const (
	DefaultStrayDelay        = time.Second
	DefaultStrayRate         = 2.0
	DefaultStrayTrivialRate  = 500.0
	DefaultStrayTrivialConns = 32
	DefaultStrayMultiple     = 2.0
)

// StrayGrace is how long after the slow service's delay a stray call may
// still count as answered: the stray calls have a deadline of their own,
// Delay + StrayGrace, since each takes Delay by design.
const StrayGrace = 2 * time.Second

// Bounds of -stray-delay and -stray-x.
const (
	maxStrayDelay    = time.Minute
	maxStrayMultiple = 1000
)

// Stray measures a handler that blocks its thread without saying so:
// StrayPath calls a slow service (a net/http server in the
// generator's process, on loopback, that answers after Delay) with a plain
// net/http client, Rate times a second at constant gaps. Beside those
// calls it measures, each part on a fresh target process:
//
//   - trivial: TrivialPath, offered TrivialRate requests a second on
//     TrivialConns kept-alive connections of their own (its p50, p99 and
//     errors are the figures);
//   - cpu: Shape's handler (CPU-bound) at Multiple of the target's C
//     (measured just before, as in the other scenarios), without the stray
//     calls;
//   - cpu+stray: the same with the stray calls alongside.
//
// A sluice target that lets a stray call hold its worker serves nothing
// else on it until the call returns; the report compares the CPU-bound
// goodput with the stray calls and without them.
type Stray struct {
	// Delay is how long the slow service takes to answer; default
	// DefaultStrayDelay.
	Delay time.Duration
	// Rate is the stray calls per second; default DefaultStrayRate.
	Rate float64
	// TrivialRate and TrivialConns are the trivial endpoint's load;
	// default DefaultStrayTrivialRate requests a second on
	// DefaultStrayTrivialConns connections.
	TrivialRate  float64
	TrivialConns int
	// Multiple is the CPU-bound load in multiples of C; default
	// DefaultStrayMultiple.
	Multiple float64
	// Shape is the CPU-bound handler; default bench.ShapeCPU.
	Shape bench.Shape

	flags *strayFlags // set by Flags
}

// strayFlags are -stray-delay and -stray-x, which replace Stray's Delay
// and Multiple once checked.
type strayFlags struct {
	delay    time.Duration
	multiple float64
}

// Name is "stray".
func (*Stray) Name() string { return "stray" }

// Describe says what the scenario does, for the command's help.
func (*Stray) Describe() string {
	return "a handler blocking in a plain http.Get"
}

// Flags registers -stray-delay and -stray-x.
func (st *Stray) Flags(fs *flag.FlagSet) {
	st.flags = &strayFlags{}
	fs.DurationVar(&st.flags.delay, "stray-delay", DefaultStrayDelay, "how long the stray scenario's blocking call waits for its slow service")
	fs.Float64Var(&st.flags.multiple, "stray-x", DefaultStrayMultiple, "the stray scenario's CPU-bound load, in multiples of capacity")
}

// Check reads -stray-delay and -stray-x, fills in the defaults of the zero
// fields and checks each. The scenario starts its targets with its own
// endpoints and offers plain requests from the generator's pools, so the
// suite's TLS, NewConns and Clients do not apply.
func (st *Stray) Check(s *bench.SuiteConfig) error {
	if s.TLS || s.NewConns || s.Clients != 0 {
		return errors.New("bench: -tls, -newconns and -clients (SuiteConfig.TLS, NewConns, Clients) do not apply to the stray scenario, which serves endpoints of its own and offers plain requests from pools")
	}
	if f := st.flags; f != nil {
		if f.delay <= 0 || f.delay > maxStrayDelay {
			return fmt.Errorf("-stray-delay must be in (0, %v], got %v", maxStrayDelay, f.delay)
		}
		if !(f.multiple > 0) || f.multiple > maxStrayMultiple {
			return fmt.Errorf("-stray-x must be in (0, %d], got %v", maxStrayMultiple, f.multiple)
		}
		st.Delay, st.Multiple = f.delay, f.multiple
	}
	if st.Delay == 0 {
		st.Delay = DefaultStrayDelay
	}
	if st.Rate == 0 {
		st.Rate = DefaultStrayRate
	}
	if st.TrivialRate == 0 {
		st.TrivialRate = DefaultStrayTrivialRate
	}
	if st.TrivialConns == 0 {
		st.TrivialConns = DefaultStrayTrivialConns
	}
	if st.Multiple == 0 {
		st.Multiple = DefaultStrayMultiple
	}
	if st.Shape.Name == "" {
		st.Shape = bench.ShapeCPU
	}
	if st.Delay < 0 || st.Delay > maxStrayDelay {
		return fmt.Errorf("bench: the stray scenario's Delay must be in (0, %v] (-stray-delay), got %v", maxStrayDelay, st.Delay)
	}
	if !(st.Multiple > 0) || st.Multiple > maxStrayMultiple {
		return fmt.Errorf("bench: the stray scenario's Multiple must be in (0, %d] (-stray-x), got %v", maxStrayMultiple, st.Multiple)
	}
	if st.TrivialConns < 0 {
		return fmt.Errorf("bench: the stray scenario's TrivialConns must be positive, got %d", st.TrivialConns)
	}
	return positiveFinite("stray", setting{"Rate", st.Rate}, setting{"TrivialRate", st.TrivialRate})
}

// Points are the three parts, on Shape: trivial (no capacity: its own
// rate), cpu and cpu+stray at Multiple of C. The parts with the stray
// calls plan a window of the suite's Duration plus Delay, for the last
// call's answer.
func (st *Stray) Points(s *bench.SuiteConfig) []bench.Point {
	var ps []bench.Point
	for _, part := range []string{StrayTrivial, StrayCPU, StrayCPUWith} {
		p := bench.Point{Shape: st.Shape, Spec: st.Shape.Spec, Multiple: st.Multiple, Part: part, Window: s.Duration + st.Delay}
		switch part {
		case StrayTrivial:
			p.Multiple = 0
		case StrayCPU:
			p.Window = s.Duration
		}
		ps = append(ps, p)
	}
	return ps
}

// StrayDetail is what a stray sample records beyond the common figures
// (Sample.Detail), whose rates and latencies are those of the measured
// endpoint (TrivialPath, or the CPU-bound handler).
type StrayDetail struct {
	// Part is StrayTrivial, StrayCPU or StrayCPUWith.
	Part string `json:"part"`
	// Delay is the slow service's delay; Rate the stray calls offered
	// per second (0 in the part without them).
	Delay time.Duration `json:"delay"`
	Rate  float64       `json:"rate"`
	// Calls and CallLatency are the stray calls' own outcome: answered
	// with a 2xx within Delay + StrayGrace, or not.
	Calls       bench.Rates       `json:"calls"`
	CallLatency bench.Percentiles `json:"call_latency_ms"`
	// CallsBehind reports that the generator of the stray calls fell
	// behind its schedule.
	CallsBehind bool `json:"calls_behind,omitempty"`
}

// Run runs one part on a fresh target whose StrayPath calls a slow
// service that this process serves for the run: the part's load for the
// suite's Duration and, but in the cpu part, the stray calls alongside,
// each with a deadline of Delay + StrayGrace.
func (st *Stray) Run(ctx context.Context, t *bench.Trial) (s *bench.Sample, err error) {
	slowURL, stopSlow, err := serveSlow(st.Delay)
	if err != nil {
		return nil, fmt.Errorf("bench: the stray scenario's slow service: %w", err)
	}
	defer func() { err = errors.Join(err, stopSlow()) }()
	cs := t.Child()
	if err := cs.SetHook(st.Name(), strayChild{URL: slowURL + "/slow"}); err != nil {
		return nil, err
	}
	proc, err := t.Start(ctx, cs)
	if err != nil {
		return nil, err
	}
	rc, err := t.Generator(proc)
	if err != nil {
		return nil, errors.Join(err, proc.Stop())
	}
	rc.Duration = t.Suite.Duration
	if t.Point.Part == StrayTrivial {
		rc.URL, rc.Rate, rc.Conns = proc.URL+TrivialPath, st.TrivialRate, st.TrivialConns
	} else {
		rc.Rate, rc.Conns = t.Point.Multiple*t.Capacity, 0 // the pool the rate needs
	}
	d := StrayDetail{Part: t.Point.Part, Delay: st.Delay}
	withCalls := t.Point.Part != StrayCPU
	type outcome struct {
		res *load.Result
		err error
	}
	calls := make(chan outcome, 1)
	s = t.Sample()
	m := bench.MeterCPU(proc)
	if withCalls {
		go func() {
			res, err := load.Run(ctx, load.Config{
				URL: proc.URL + StrayPath, Rate: st.Rate, Duration: t.Suite.Duration,
				Deadline: st.Delay + StrayGrace, Arrival: load.Constant,
			})
			calls <- outcome{res, err}
		}()
	}
	res, err := load.Run(ctx, rc)
	var callRes *load.Result
	if withCalls {
		o := <-calls
		callRes, err = o.res, errors.Join(err, o.err)
	}
	m.Stop(s)
	err = errors.Join(err, proc.Stop())
	if res == nil {
		return nil, err
	}
	bench.Fill(s, res)
	s.Server = proc.Stats
	s.Placement = proc.Placement
	if callRes != nil {
		var call bench.Sample
		bench.Fill(&call, callRes)
		d.Rate = st.Rate
		d.Calls, d.CallLatency, d.CallsBehind = call.Rates, call.Latency, call.Behind
	}
	return s, errors.Join(err, s.SetDetail(d))
}

// serveSlow serves, on a loopback port of its own, a service that answers
// every request after delay (or gives up when the client goes away), and
// returns its URL and the function that stops it.
func serveSlow(delay time.Duration) (string, func() error, error) {
	return bench.ServeNetHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
			_, _ = io.WriteString(w, "slow\n")
		case <-r.Context().Done():
		}
	}))
}

// StrayPartRow sums up the runs of one part of the stray scenario for one
// target: medians over the kept runs (those whose generator kept the main
// load's schedule), or over all of them when none was kept.
type StrayPartRow struct {
	Runs   int `json:"runs"`
	Behind int `json:"behind"`
	// Offered and Goodput are the measured endpoint's, per second; the
	// fractions are of its offered load; latencies in milliseconds.
	Offered      float64 `json:"offered"`
	Goodput      float64 `json:"goodput"`
	RejectedFrac float64 `json:"rejected_frac"`
	FailedFrac   float64 `json:"failed_frac"`
	P50          float64 `json:"p50_ms"`
	P99          float64 `json:"p99_ms"`
	// CallsOffered and CallsDone are the stray calls sent and answered
	// in time, per second (0 in the part without them).
	CallsOffered float64 `json:"calls_offered"`
	CallsDone    float64 `json:"calls_done"`
}

// StrayRow is the stray scenario's summary of one target.
type StrayRow struct {
	Target string `json:"target"`
	// Placement says where a sluice target's workers ran ("pinned 0-1",
	// "floating"); "" for other targets.
	Placement string `json:"placement,omitempty"`
	// Trivial is the trivial endpoint beside the stray calls; CPU the
	// CPU-bound handler alone, CPUWith the same beside the stray calls.
	Trivial StrayPartRow `json:"trivial"`
	CPU     StrayPartRow `json:"cpu"`
	CPUWith StrayPartRow `json:"cpu_with"`
	// Capacity is the median C of the CPU-bound handler and Multiple the
	// load it was offered, in multiples of C.
	Capacity float64 `json:"capacity"`
	Multiple float64 `json:"multiple"`
	// WithOverAlone is the median, over the repeats where both CPU parts
	// were kept, of the goodput with the stray calls over the goodput
	// without them in the same repeat; 0 when there is no such repeat.
	WithOverAlone float64 `json:"with_over_alone"`
}

// strayRun is a stray sample with its detail.
type strayRun = detailed[StrayDetail]

// runs returns rep's stray samples that have a detail, in report order,
// or an error naming a sample whose detail does not decode.
func (*Stray) runs(rep *bench.Report) ([]strayRun, error) {
	return detailedRuns[StrayDetail](rep, "stray")
}

// Summarize returns one row per target of rep's stray samples, in the
// order the targets first appear; nil when there are none.
func (st *Stray) Summarize(rep *bench.Report) ([]StrayRow, error) {
	runs, err := st.runs(rep)
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	return grouped(runs, func(r strayRun) string { return r.Target }, strayRow), nil
}

// strayRow computes the row of one target from its runs.
func strayRow(target string, runs []strayRun) StrayRow {
	samples := make([]bench.Sample, len(runs))
	for i, r := range runs {
		samples[i] = r.Sample
	}
	r := StrayRow{Target: target, Placement: report.PlacementOf(samples)}
	of := func(part string) []strayRun {
		return slices.DeleteFunc(slices.Clone(runs), func(r strayRun) bool { return r.detail.Part != part })
	}
	r.Trivial = strayPart(of(StrayTrivial))
	alone, with := of(StrayCPU), of(StrayCPUWith)
	r.CPU, r.CPUWith = strayPart(alone), strayPart(with)
	var capacity, multiple, ratios []float64
	for _, a := range alone {
		capacity = append(capacity, a.Capacity)
		multiple = append(multiple, a.Multiple)
		if a.Behind || a.Rates.Goodput <= 0 {
			continue
		}
		for _, w := range with {
			if w.Repeat == a.Repeat && !w.Behind {
				ratios = append(ratios, w.Rates.Goodput/a.Rates.Goodput)
			}
		}
	}
	r.Capacity, r.Multiple, r.WithOverAlone = report.Median(capacity), report.Median(multiple), report.Median(ratios)
	return r
}

// strayPart computes one part's medians.
func strayPart(runs []strayRun) StrayPartRow {
	var p StrayPartRow
	kept := slices.DeleteFunc(slices.Clone(runs), func(r strayRun) bool { return r.Behind })
	p.Runs, p.Behind = len(kept), len(runs)-len(kept)
	if len(kept) == 0 {
		kept = runs
	}
	var offered, goodput, rejFrac, failFrac, p50, p99, callsOffered, callsDone []float64
	for _, s := range kept {
		rt := s.Rates
		offered = append(offered, rt.Offered)
		goodput = append(goodput, rt.Goodput)
		if rt.Offered > 0 {
			rejFrac = append(rejFrac, rt.Rejected/rt.Offered)
			failFrac = append(failFrac, rt.Failed/rt.Offered)
		}
		if rt.Goodput > 0 {
			p50 = append(p50, s.Latency.P50)
			p99 = append(p99, s.Latency.P99)
		}
		callsOffered = append(callsOffered, s.detail.Calls.Offered)
		callsDone = append(callsDone, s.detail.Calls.Goodput)
	}
	med := report.Median
	p.Offered, p.Goodput = med(offered), med(goodput)
	p.RejectedFrac, p.FailedFrac = med(rejFrac), med(failFrac)
	p.P50, p.P99 = med(p50), med(p99)
	p.CallsOffered, p.CallsDone = med(callsOffered), med(callsDone)
	return p
}

// Rows are Summarize's, nil without stray samples or when a sample's
// detail does not decode (WriteReport says which).
func (st *Stray) Rows(rep *bench.Report) any { return rowsOf(st.Summarize(rep)) }

// WriteReport writes the stray samples of rep: a line on the setup (the
// slow service's delay and the calls' rate, from the first sample with
// calls), then a table of the trivial endpoint beside the stray calls and
// a table of the CPU-bound handler without and with them, one row per
// target. It writes nothing for a report without stray samples.
func (st *Stray) WriteReport(w io.Writer, rep *bench.Report) error {
	runs, err := st.runs(rep)
	if err != nil {
		return err
	}
	rows, err := st.Summarize(rep)
	if err != nil || len(rows) == 0 {
		return err
	}
	setup := runs[0].detail
	for _, r := range runs {
		if r.detail.Rate > 0 {
			setup = r.detail
			break
		}
	}
	cpuShape := runs[len(runs)-1].Shape
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "\nstray blocking: %s calls a service that answers after %v through a plain net/http client (holding its thread), %.3g a second\n",
		StrayPath, setup.Delay, setup.Rate)
	fmt.Fprintf(&buf, "%s beside the stray calls:\n", TrivialPath)
	tw := report.NewTab(&buf)
	report.Line(tw, "target", "workers", "offered/s", "goodput/s", "p50 ms", "p99 ms", "503 %", "failed %", "stray calls/s", "done/s", "runs")
	for _, r := range rows {
		p := r.Trivial
		report.Line(tw, r.Target, dash(r.Placement), fmt.Sprintf("%.0f", p.Offered), fmt.Sprintf("%.0f", p.Goodput),
			report.FormatMS(p.P50), report.FormatMS(p.P99), fmt.Sprintf("%.1f", 100*p.RejectedFrac), fmt.Sprintf("%.1f", 100*p.FailedFrac),
			fmt.Sprintf("%.2g", p.CallsOffered), fmt.Sprintf("%.2g", p.CallsDone), fmt.Sprintf("%d/%d", p.Runs, p.Behind))
	}
	_ = tw.Flush() // into a bytes.Buffer
	fmt.Fprintf(&buf, "\nCPU-bound handler, shape %s%s, at %sx of C, alone and beside the stray calls:\n",
		dash(cpuShape), report.HandlerOf(rep, "stray", cpuShape), strconv.FormatFloat(rows[0].Multiple, 'g', -1, 64))
	tw = report.NewTab(&buf)
	report.Line(tw, "target", "C/s", "goodput/s alone", "with stray", "with/alone", "p99 ms alone", "with stray", "503 % alone", "with stray", "runs")
	for _, r := range rows {
		ratio := "-"
		if r.WithOverAlone > 0 {
			ratio = fmt.Sprintf("%.2f", r.WithOverAlone)
		}
		report.Line(tw, r.Target, fmt.Sprintf("%.0f", r.Capacity), fmt.Sprintf("%.0f", r.CPU.Goodput), fmt.Sprintf("%.0f", r.CPUWith.Goodput),
			ratio, report.FormatMS(r.CPU.P99), report.FormatMS(r.CPUWith.P99),
			fmt.Sprintf("%.1f", 100*r.CPU.RejectedFrac), fmt.Sprintf("%.1f", 100*r.CPUWith.RejectedFrac),
			fmt.Sprintf("%d/%d, %d/%d", r.CPU.Runs, r.CPU.Behind, r.CPUWith.Runs, r.CPUWith.Behind))
	}
	_ = tw.Flush()
	buf.WriteString(strings.Join([]string{
		"503 %: refused unstarted (Sluice-Not-Started); failed %: late (past the deadline), errors, other statuses;",
		"stray calls/s, done/s: the blocking calls sent, and answered within their delay plus " + StrayGrace.String() + ";",
		"with/alone: the CPU-bound goodput with the stray calls over without, per repeat, median;",
		"runs: kept/behind (the generator fell behind its schedule); for the CPU table alone, then with.",
	}, "\n") + "\n")
	_, err = w.Write(buf.Bytes())
	return err
}
