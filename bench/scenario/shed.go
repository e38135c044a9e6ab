package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
	"github.com/sluice-go/sluice/bench/report"
	"github.com/sluice-go/sluice/gate"
)

// Defaults of Shed's zero fields.
const (
	DefaultShedLow    = 0.3
	DefaultShedHigh   = 3.0
	DefaultShedBefore = 10 * time.Second
	DefaultShedDuring = 15 * time.Second
	DefaultShedAfter  = 10 * time.Second
	DefaultShedBucket = 250 * time.Millisecond
)

// ShedReference is the target whose capacity C the shed scenario's loads
// are multiples of, measured before each run: the README's sluice server,
// unprotected but by its age limit. Every target is offered the same
// rates, rather than multiples of its own C (the busy gate's 50% rule
// lowers its C).
const ShedReference = "sluice"

// ShedDisturbed is the CPU time other programs may use during a shed run,
// in CPU-seconds per second, before the run counts as disturbed.
const ShedDisturbed = 0.1

// ShedMargin is how far above the share of requests refused before the
// step a bucket's share must be to count as refusing: a target may refuse
// some of a light load (the busy gate alone, when the other worker happens
// to be busy), and that is not a reaction to the overload.
const ShedMargin = 0.10

// Shed puts loadshed's proportional CPU shedding (gate.CPU, with loadshed's
// example settings) against the busy-worker gate on the same step of
// overload, each the only protection of a sluice server: the targets
// bench.TargetSluiceBusy and bench.TargetSluiceCPU, which `sluice bench`
// runs when -targets names them (any other target runs it too).
//
// The suite's Shape (I/O-bound by default, the busy gate's case) is
// offered Low×C for Before, High×C for During and Low×C for After, open
// loop, and the outcome is counted in buckets of Bucket by send time, as
// in the step scenario. C is the capacity of ShedReference, measured just
// before each run, so that every target gets the same load. The CPU
// reading lags by design: it averages the last 10 s, so Before fills its
// window as a server that has been running would have it (10 s), During
// is long enough for it to act (15 s), and After shows how long it goes on
// refusing once the load is light again (10 s).
//
// The busy gate needs two workers or more to refuse anything, so on a
// machine whose split leaves the target one CPU run the scenario with
// -cpus shared (both the generator and the target on every CPU, the
// target at a lower priority).
type Shed struct {
	// Low and High are the offered loads in multiples of C; defaults
	// DefaultShedLow and DefaultShedHigh.
	Low, High float64
	// Before, During and After are the phases' lengths; defaults
	// DefaultShedBefore, DefaultShedDuring and DefaultShedAfter.
	Before, During, After time.Duration
	// Bucket is the width of the series' buckets; default
	// DefaultShedBucket.
	Bucket time.Duration
}

// Name is "shed".
func (*Shed) Name() string { return "shed" }

// Describe says what the scenario does, for the command's help.
func (*Shed) Describe() string {
	return "one signal alone against a step of overload: -targets sluice-busy,sluice-cpu"
}

// Check fills in the defaults of the zero fields and checks each. The
// scenario starts its targets itself and offers plain requests from a
// pool, so the suite's TLS, NewConns and Clients do not apply.
func (sh *Shed) Check(s *bench.SuiteConfig) error {
	if s.TLS || s.NewConns || s.Clients != 0 {
		return errors.New("bench: -tls, -newconns and -clients (SuiteConfig.TLS, NewConns, Clients) do not apply to the shed scenario, which starts its servers its own way")
	}
	for _, f := range []struct {
		name string
		d    *time.Duration
		def  time.Duration
	}{{"Before", &sh.Before, DefaultShedBefore}, {"During", &sh.During, DefaultShedDuring}, {"After", &sh.After, DefaultShedAfter}, {"Bucket", &sh.Bucket, DefaultShedBucket}} {
		if *f.d < 0 {
			return fmt.Errorf("bench: the shed scenario's %s must not be negative (zero for the default), got %v", f.name, *f.d)
		}
		if *f.d == 0 {
			*f.d = f.def
		}
	}
	if sh.Low == 0 {
		sh.Low = DefaultShedLow
	}
	if sh.High == 0 {
		sh.High = DefaultShedHigh
	}
	return positiveFinite("shed", setting{"Low multiple", sh.Low}, setting{"High multiple", sh.High})
}

// Points is one point on the suite's Shape, with no Multiple: its loads
// are multiples of ShedReference's C, which the run measures itself. Its
// window is that calibration and the three phases.
func (sh *Shed) Points(s *bench.SuiteConfig) []bench.Point {
	cal := time.Duration(len(s.CalibrateConns)) * (s.Calibrate.Warmup + s.Calibrate.Duration)
	return []bench.Point{{Shape: s.Shape, Spec: s.Shape.Spec, Window: cal + sh.window()}}
}

// window is the sending window of a run: the three phases.
func (sh *Shed) window() time.Duration { return sh.Before + sh.During + sh.After }

// ShedDetail is what a shed sample records beyond the common figures
// (Sample.Detail, beside Sample.Step and Sample.Series): what else ran on
// the machine. The CPU target reads the whole machine's CPU, so another
// program's work makes it refuse; a run where others used more than
// ShedDisturbed is disturbed, and the report leaves it out.
type ShedDetail struct {
	// HostCPU is the machine's CPU time during the run, in CPU-seconds
	// per second (read as the CPU gate reads it, over the run, times the
	// CPUs); -1 when /proc/stat could not be read.
	HostCPU float64 `json:"host_cpu"`
	// OtherCPU is what of it neither the target nor the load generator
	// used: other programs.
	OtherCPU float64 `json:"other_cpu"`
}

// Disturbed reports whether other programs used more than ShedDisturbed
// of the machine's CPU during the run.
func (d *ShedDetail) Disturbed() bool { return d != nil && d.OtherCPU > ShedDisturbed }

// Run measures ShedReference's capacity, then offers the three phases, in
// buckets, to a fresh target process, reading the machine's CPU over the
// run.
func (sh *Shed) Run(ctx context.Context, t *bench.Trial) (*bench.Sample, error) {
	capacity, capCPU, err := t.Calibrate(ctx, ShedReference, t.Point.Spec)
	if err != nil {
		return nil, err
	}
	proc, err := t.Start(ctx, t.Child())
	if err != nil {
		return nil, err
	}
	rc, err := t.Generator(proc)
	if err != nil {
		return nil, errors.Join(err, proc.Stop())
	}
	rc.Conns = 0 // the pool the rates need
	rc.Phases = []load.Phase{
		{Rate: sh.Low * capacity, Duration: sh.Before},
		{Rate: sh.High * capacity, Duration: sh.During},
		{Rate: sh.Low * capacity, Duration: sh.After},
	}
	rc.Bucket = sh.Bucket
	s := t.Sample()
	s.Capacity, s.CapacityCPU, s.Multiple = capacity, capCPU, sh.High
	s.Step = &bench.StepInfo{Low: sh.Low, High: sh.High, Up: sh.Before, Down: sh.Before + sh.During, End: sh.window()}
	host, err := gate.NewCPU(gate.CPUConfig{Interval: gate.Manual, Window: 1}) // its first reading: now
	if err != nil {
		return nil, err
	}
	defer host.Close()
	m := bench.MeterCPU(proc)
	res, err := load.Run(ctx, rc)
	m.Stop(s)
	hst := host.Refresh()
	err = errors.Join(err, proc.Stop())
	if res == nil {
		return nil, err
	}
	bench.Fill(s, res)
	s.Server = proc.Stats
	s.Placement = proc.Placement
	d := ShedDetail{HostCPU: hst.Utilisation * float64(runtime.NumCPU())}
	if hst.Err != nil || hst.Span == 0 {
		d.HostCPU = -1
	} else {
		d.OtherCPU = max(0, d.HostCPU-s.TargetCPU-s.GeneratorCPU)
	}
	return s, errors.Join(err, s.SetDetail(d))
}

// ShedMetrics is what one run of the shed scenario shows, read from its
// Series and StepInfo (ShedMetricsOf). Shares are of the requests offered
// in a phase: the low load before the step up, the high load, the low load
// after the step down. A bucket is refusing when the share it refused is
// more than ShedMargin above RefusedBefore.
type ShedMetrics struct {
	// FirstRefusal is the time from the step up to the end of the first
	// refusing bucket of the high phase: how long the target took to
	// protect itself. Refused is false when no bucket of the high phase
	// was refusing (FirstRefusal is then zero).
	FirstRefusal time.Duration `json:"first_refusal"`
	Refused      bool          `json:"refused"`
	// Goodput is the high phase's goodput (2xx within the deadline, by
	// send time) per second, over C: what the target served in time
	// while overloaded.
	Goodput float64 `json:"goodput"`
	// Late is the share of the high phase's requests that failed (late
	// or in error): admitted when they could not be served in time.
	Late float64 `json:"late"`
	// RefusedBefore, RefusedDuring and RefusedAfter are the shares
	// refused in each phase; before and after, the load was well under
	// capacity, so every refusal there was needless.
	RefusedBefore float64 `json:"refused_before"`
	RefusedDuring float64 `json:"refused_during"`
	RefusedAfter  float64 `json:"refused_after"`
	// RefusingFor is the time from the step down to the end of the last
	// refusing bucket (zero when none was after it): how long the target
	// went on refusing once the overload had ended.
	RefusingFor time.Duration `json:"refusing_for"`
}

// ShedMetricsOf computes what a shed sample shows (see ShedMetrics). It
// returns false for a sample without StepInfo or without a usable Series.
func ShedMetricsOf(s bench.Sample) (ShedMetrics, bool) {
	info := s.Step
	if info == nil || len(s.Series) == 0 || info.Down <= info.Up {
		return ShedMetrics{}, false
	}
	w := report.BucketWidth(s.Series, info.End)
	if w <= 0 {
		return ShedMetrics{}, false
	}
	phaseOf := func(b load.Bucket) int {
		switch {
		case b.Start >= info.Down:
			return 2
		case b.Start >= info.Up:
			return 1
		}
		return 0
	}
	var phase [3]struct{ offered, ok, rejected, failed int64 }
	for _, b := range s.Series {
		p := &phase[phaseOf(b)]
		p.offered += b.Offered
		p.ok += b.OK
		p.rejected += b.Rejected
		p.failed += b.Failed
	}
	share := func(n, of int64) float64 {
		if of <= 0 {
			return 0
		}
		return float64(n) / float64(of)
	}
	var m ShedMetrics
	m.RefusedBefore = share(phase[0].rejected, phase[0].offered)
	m.RefusedDuring = share(phase[1].rejected, phase[1].offered)
	m.RefusedAfter = share(phase[2].rejected, phase[2].offered)
	m.Late = share(phase[1].failed, phase[1].offered)
	if d := (info.Down - info.Up).Seconds(); d > 0 && s.Capacity > 0 {
		m.Goodput = float64(phase[1].ok) / d / s.Capacity
	}
	for _, b := range s.Series {
		if b.Rejected == 0 || share(b.Rejected, b.Offered) <= m.RefusedBefore+ShedMargin {
			continue
		}
		end := min(b.Start+w, info.End)
		switch phaseOf(b) {
		case 1:
			if !m.Refused {
				m.Refused, m.FirstRefusal = true, end-info.Up
			}
		case 2:
			m.RefusingFor = end - info.Down
		}
	}
	return m, true
}

// ShedRow is the shed scenario's summary of one target: medians over the
// kept runs (those whose generator kept its schedule and that other
// programs did not disturb, ShedDetail.Disturbed), or over all of them
// when none was kept.
type ShedRow struct {
	Target string `json:"target"`
	// Runs counts the kept runs, Behind those whose generator fell
	// behind, Disturbed the others left out: other programs used more
	// than ShedDisturbed of the CPU.
	Runs      int `json:"runs"`
	Behind    int `json:"behind"`
	Disturbed int `json:"disturbed"`
	// Capacity is the median C the loads were multiples of, Low and High
	// the multiples, Up and Down when the load stepped up and down.
	Capacity float64       `json:"capacity"`
	Low      float64       `json:"low"`
	High     float64       `json:"high"`
	Up       time.Duration `json:"up"`
	Down     time.Duration `json:"down"`
	// Shed holds the medians of each quantity of ShedMetrics;
	// FirstRefusal over the runs that refused in the high phase,
	// NeverRefused counting the others.
	Shed         ShedMetrics `json:"shed"`
	NeverRefused int         `json:"never_refused"`
	// P99 is the median p99 latency of the 2xx answers, in milliseconds.
	P99 float64 `json:"p99_ms"`
	// RefusedBy is the median count of refusals by reason, as the
	// target's admission counted them.
	RefusedBy map[string]float64 `json:"refused_by,omitempty"`
}

// shedRun is a shed sample with its detail (nil when it has none).
type shedRun struct {
	bench.Sample
	detail *ShedDetail
}

// runs returns rep's shed samples that have a StepInfo, in report order,
// or an error naming a sample whose detail does not decode.
func (*Shed) runs(rep *bench.Report) ([]shedRun, error) {
	if rep == nil {
		return nil, nil
	}
	var out []shedRun
	for i := range rep.Samples {
		s := &rep.Samples[i]
		if s.Scenario != "shed" || s.Step == nil {
			continue
		}
		d, err := bench.DetailOf[ShedDetail](s)
		if err != nil {
			return nil, fmt.Errorf("%w (%s, repeat %d)", err, s.Target, s.Repeat)
		}
		out = append(out, shedRun{*s, d})
	}
	return out, nil
}

// Summarize returns one row per target of rep's shed samples, in the order
// the targets first appear; nil when there are none.
func (sh *Shed) Summarize(rep *bench.Report) ([]ShedRow, error) {
	runs, err := sh.runs(rep)
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	return grouped(runs, func(r shedRun) string { return r.Target }, shedRow), nil
}

// shedRow computes the row of one target from its runs.
func shedRow(target string, runs []shedRun) ShedRow {
	r := ShedRow{Target: target}
	kept := slices.DeleteFunc(slices.Clone(runs), func(s shedRun) bool {
		switch {
		case s.Behind:
			r.Behind++
		case s.detail.Disturbed():
			r.Disturbed++
		default:
			return false
		}
		return true
	})
	r.Runs = len(kept)
	if len(kept) == 0 {
		kept = runs
	}
	var capacity, first, goodput, late, before, during, after, refusing, p99 []float64
	var runsBy []map[string]int64
	for _, s := range kept {
		r.Low, r.High, r.Up, r.Down = s.Step.Low, s.Step.High, s.Step.Up, s.Step.Down
		capacity = append(capacity, s.Capacity)
		if s.Rates.Goodput > 0 {
			p99 = append(p99, s.Latency.P99)
		}
		runsBy = append(runsBy, refusedBy(s.Sample))
		m, ok := ShedMetricsOf(s.Sample)
		if !ok {
			continue
		}
		if m.Refused {
			first = append(first, float64(m.FirstRefusal))
		} else {
			r.NeverRefused++
		}
		goodput = append(goodput, m.Goodput)
		late = append(late, m.Late)
		before = append(before, m.RefusedBefore)
		during = append(during, m.RefusedDuring)
		after = append(after, m.RefusedAfter)
		refusing = append(refusing, float64(m.RefusingFor))
	}
	med := report.Median
	r.Capacity, r.P99 = med(capacity), med(p99)
	r.Shed = ShedMetrics{
		FirstRefusal: time.Duration(med(first)), Refused: len(first) > 0,
		Goodput: med(goodput), Late: med(late),
		RefusedBefore: med(before), RefusedDuring: med(during), RefusedAfter: med(after),
		RefusingFor: time.Duration(med(refusing)),
	}
	for _, by := range runsBy {
		for reason := range by {
			if _, done := r.RefusedBy[reason]; done {
				continue
			}
			if r.RefusedBy == nil {
				r.RefusedBy = make(map[string]float64)
			}
			var ns []float64
			for _, other := range runsBy {
				ns = append(ns, float64(other[reason])) // 0 for a run without it
			}
			r.RefusedBy[reason] = med(ns)
		}
	}
	return r
}

// refusedBy reads the rejections by reason from a sample's server counters
// (admit.Stats); nil when it has none.
func refusedBy(s bench.Sample) map[string]int64 {
	if len(s.Server) == 0 {
		return nil
	}
	var st struct{ RejectedBy map[string]int64 }
	if json.Unmarshal(s.Server, &st) != nil {
		return nil
	}
	return st.RejectedBy
}

// Rows are Summarize's, nil without shed samples or when a sample's detail
// does not decode (WriteReport says which).
func (sh *Shed) Rows(rep *bench.Report) any { return rowsOf(sh.Summarize(rep)) }

// WriteReport writes the shed samples of rep: a line on the setup (from
// the first sample), a table with one row per target, and what its
// columns mean. It writes nothing for a report without shed samples.
func (sh *Shed) WriteReport(w io.Writer, rep *bench.Report) error {
	runs, err := sh.runs(rep)
	if err != nil {
		return err
	}
	rows, err := sh.Summarize(rep)
	if err != nil || len(rows) == 0 {
		return err
	}
	first := runs[0]
	shape := first.Shape
	if shape == "" {
		shape = "-"
	}
	multiple := func(m float64) string { return strconv.FormatFloat(m, 'g', -1, 64) }
	r0 := rows[0]
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "\nshed: one signal alone against a step of overload, shape %s%s: %sx of C for %v, %sx for %v, %sx for %v (C = %.0f/s, %s's capacity)\n",
		shape, report.HandlerOf(rep, "shed", first.Shape), multiple(r0.Low), r0.Up, multiple(r0.High), r0.Down-r0.Up,
		multiple(r0.Low), first.Step.End-first.Step.Down, r0.Capacity, ShedReference)
	tw := report.NewTab(&buf)
	report.Line(tw, "target", "first refusal", "goodput/C", "late %", "503 %", "503 % before", "503 % after", "refusing for", "p99 ms", "refused by", "runs")
	for _, r := range rows {
		refusal := "never"
		if r.Shed.Refused {
			refusal = formatSeconds(r.Shed.FirstRefusal)
			if r.NeverRefused > 0 {
				refusal += fmt.Sprintf(" (%d never)", r.NeverRefused)
			}
		}
		report.Line(tw, r.Target, refusal, fmt.Sprintf("%.2f", r.Shed.Goodput), fmt.Sprintf("%.1f", 100*r.Shed.Late),
			fmt.Sprintf("%.1f", 100*r.Shed.RefusedDuring), fmt.Sprintf("%.1f", 100*r.Shed.RefusedBefore),
			fmt.Sprintf("%.1f", 100*r.Shed.RefusedAfter), formatSeconds(r.Shed.RefusingFor), report.FormatMS(r.P99),
			formatReasons(r.RefusedBy), fmt.Sprintf("%d/%d/%d", r.Runs, r.Behind, r.Disturbed))
	}
	_ = tw.Flush() // into a bytes.Buffer
	buf.WriteString(strings.Join([]string{
		fmt.Sprintf("first refusal: from the step up to the end of the first bucket that refused (503) %.0f points more of its requests", 100*ShedMargin),
		"than were refused before the step; goodput/C: 2xx within the deadline, per second of the overload, over C; late %: of the",
		"overload's requests, failed (past the deadline, errors); 503 %: refused unstarted, during the overload, before it and after",
		"it (where the load was light: needless); refusing for: from the step down to the end of the last bucket refusing as above;",
		"refused by: the target's rejections by reason (median count); runs: kept/behind/disturbed (other programs used more than",
		fmt.Sprintf("%.2g CPU during the run, which the CPU target, reading the whole machine, counts as load).", ShedDisturbed),
	}, "\n") + "\n")
	_, err = w.Write(buf.Bytes())
	return err
}

// Plots draws, per shape, the first kept run (neither behind nor
// disturbed) of each target as a time series (report.StepPlots), as
// shed-<shape>.png.
func (sh *Shed) Plots(dir string, rep *bench.Report) ([]string, error) {
	return report.StepPlots(dir, rep, "shed", "Shed scenario: one signal alone against a step", func(s bench.Sample) bool {
		d, err := bench.DetailOf[ShedDetail](&s)
		return err == nil && !d.Disturbed()
	})
}

// formatSeconds writes a duration in seconds, two decimals.
func formatSeconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// formatReasons writes counts by reason, "busy 120, cpu 3"; "-" for none.
func formatReasons(by map[string]float64) string {
	if len(by) == 0 {
		return "-"
	}
	var parts []string
	for _, reason := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%s %.0f", reason, by[reason]))
	}
	return strings.Join(parts, ", ")
}
