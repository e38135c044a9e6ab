// Package report renders the results of the overload benchmark (a
// bench.Report) as aligned text tables, as JSON and as PNG plots.
//
// A bench.Report holds one bench.Sample per run: one target at one offered
// load, repeated a few times. The report groups the repeats of the same
// scenario, handler shape, target and offered multiple, and gives the
// MEDIAN of each quantity over the repeats that count. A run whose load
// generator fell behind its schedule (Sample.Behind) was not offered the
// asked load, so it is left out of every median; the rows still say how
// many runs were kept and how many were behind, and a row whose runs were
// all behind is shown as such rather than as numbers.
//
// The table of rates by offered load shows the samples of the scenarios it
// is given (package bench/scenario gives those that are Tabled: sweep,
// shapes, slowdown, mix and step): Summarize gives its rows, StepMetrics
// and SummarizeSteps the step response of a scenario whose load is a step
// (how fast goodput settles after the load steps up and how long
// rejections go on after it steps down), WriteTable and WriteJSON print
// them (the table with a legend of its columns and notes on its blanks),
// and PlainSummary says in plain words what the table shows. OfferedPlots
// and StepPlots draw goodput, latency and step-response charts. Every
// other scenario writes its own tables, JSON rows (Document.Scenarios) and
// plots, with this package's helpers (NewTab, Line, Median, FormatMS,
// TargetRanks, PlacementOf, HandlerOf, BucketWidth, StepPlots, ShapePlots,
// NewPlot, PlotFile); package bench/scenario puts the whole report
// together.
package report

import (
	"math"
	"slices"
	"sort"

	"github.com/sluice-go/sluice/bench"
)

// BaselineTarget is the target every other one is compared with: Row.Ratio
// is a target's goodput over this one's.
const BaselineTarget = "nethttp"

// Row is the summary of the repeats of one target at one offered load in
// one scenario and handler shape, for the whole sample or for one request
// class. Rates are per second; every number is a median over the kept runs
// (those not Behind), and 0 when no run was kept.
type Row struct {
	Scenario string `json:"scenario"`
	Shape    string `json:"shape"`
	Target   string `json:"target"`
	// Multiple is the offered load as a multiple of the capacity (for the
	// step scenario, the high one).
	Multiple float64 `json:"multiple"`
	// Class is the request class the row counts, or "" for the whole
	// sample.
	Class string `json:"class,omitempty"`
	// Client is the generator's client mode of the row's runs
	// (bench.Sample.Client): "" when the run named none.
	Client string `json:"client,omitempty"`
	// Runs is the number of kept runs, Behind the number of runs left out
	// because the generator fell behind.
	Runs   int `json:"runs"`
	Behind int `json:"behind"`
	// Capacity is the median of the capacity C measured in each kept run
	// (of the whole target, also on a class row).
	Capacity float64 `json:"capacity"`
	Offered  float64 `json:"offered"`
	Goodput  float64 `json:"goodput"`
	Rejected float64 `json:"rejected"`
	Failed   float64 `json:"failed"`
	// GoodputFrac is the median over the kept runs of goodput / C, each run
	// against the capacity measured in its own repeat (runs without a
	// capacity are left out).
	GoodputFrac float64 `json:"goodput_frac"`
	// RejectedFrac and FailedFrac are the medians over the kept runs of the
	// rejected and failed rates as fractions of the offered rate.
	RejectedFrac float64 `json:"rejected_frac"`
	FailedFrac   float64 `json:"failed_frac"`
	// BaselineGoodput is the median goodput of BaselineTarget for the same
	// scenario, shape, multiple and class; 0 when it has no kept run.
	BaselineGoodput float64 `json:"baseline_goodput"`
	// Ratio is Goodput / BaselineGoodput, or 0 when BaselineGoodput is 0
	// (the baseline is absent, all behind, or served nothing).
	Ratio float64 `json:"ratio"`
	// IndicativeRatio is Goodput over the baseline's goodput when that
	// comparison rests on runs whose generator fell behind: this row is
	// Indicative while the baseline has kept runs, or the baseline's row
	// is Indicative (then BaselineGoodput and Ratio are 0). It is shown
	// for information and counted nowhere; 0 when Ratio is set, when there
	// is no baseline row, or when the baseline served nothing.
	IndicativeRatio float64 `json:"indicative_ratio,omitempty"`
	// P50, P99 and P999 are latency percentiles of the OK answers in
	// milliseconds, medians over the kept runs that had some goodput (a run
	// without OK answers has no latency); 0 when there is none.
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	// TargetCPU and GeneratorCPU are the medians of the CPU-seconds per
	// second the target and the load generator used during the run (0 on
	// class rows and when unmeasured).
	TargetCPU    float64 `json:"target_cpu"`
	GeneratorCPU float64 `json:"generator_cpu"`
	// Efficiency is the median of the target's goodput per CPU-second it
	// used, relative to the same at capacity (C over the CPU it used while
	// calibrated): 1 means every CPU-second the target got turned into as
	// much goodput as at capacity. On a machine shared with the generator,
	// goodput/C also falls because the generator takes CPU as the offered
	// load grows; Efficiency does not. 0 when unmeasured.
	Efficiency float64 `json:"efficiency"`
	// NewConns is the median of the TCP connections the generator
	// opened per second (0 on class rows).
	NewConns float64 `json:"new_conns"`
	// Jain and Starved are the medians of the runs' Sample.Jain and
	// Sample.Starved: how alike the generator's clients were served, when
	// it had a connection per client (0 otherwise).
	Jain    float64 `json:"jain,omitempty"`
	Starved float64 `json:"starved,omitempty"`
	// Indicative marks a row with no kept run: its numbers are the
	// medians over the runs whose generator fell behind, shown for
	// information and counted nowhere (not in Ratio either).
	Indicative bool `json:"indicative,omitempty"`
}

// multipleKey rounds a multiple so that values equal up to float noise
// fall in the same group.
func multipleKey(m float64) float64 {
	return math.Round(m*1e6) / 1e6
}

// groupKey identifies the repeats that one Row summarises.
type groupKey struct {
	scenario, shape, target, client string
	multiple                        float64
}

// group is the samples of one groupKey, in report order.
type group struct {
	key     groupKey
	samples []bench.Sample
}

// TargetRanks maps each target to the position of its first appearance in
// the report.
func TargetRanks(rep *bench.Report) map[string]int {
	ranks := make(map[string]int)
	for _, s := range rep.Samples {
		if _, ok := ranks[s.Target]; !ok {
			ranks[s.Target] = len(ranks)
		}
	}
	return ranks
}

// groups collects the samples of rep's named scenarios by scenario, shape,
// target and multiple, in report order (sorted by the caller).
func groups(rep *bench.Report, scenarios []string) []*group {
	var out []*group
	index := make(map[groupKey]*group)
	for _, s := range rep.Samples {
		if !slices.Contains(scenarios, s.Scenario) {
			continue // tables of their own
		}
		k := groupKey{s.Scenario, s.Shape, s.Target, s.Client, multipleKey(s.Multiple)}
		g, ok := index[k]
		if !ok {
			g = &group{key: k}
			index[k] = g
			out = append(out, g)
		}
		g.samples = append(g.samples, s)
	}
	return out
}

// less orders rows: scenario (in the order of scenarios), shape,
// multiple, client mode, target (first appearance), then the whole sample
// before its classes, classes by name.
func less(a, b *Row, scenarios []string, ranks map[string]int) bool {
	if ra, rb := slices.Index(scenarios, a.Scenario), slices.Index(scenarios, b.Scenario); ra != rb {
		return ra < rb
	}
	if a.Shape != b.Shape {
		return a.Shape < b.Shape
	}
	if a.Multiple != b.Multiple {
		return a.Multiple < b.Multiple
	}
	if a.Client != b.Client {
		return a.Client < b.Client
	}
	if ra, rb := ranks[a.Target], ranks[b.Target]; ra != rb {
		return ra < rb
	}
	return a.Class < b.Class
}

// Summarize groups the samples of rep's named scenarios by scenario,
// handler shape, target and offered multiple and returns one Row per group
// for the whole sample plus, when samples have Classes, one Row per class.
// Each number is a median over the repeats that are not Behind (see Row).
// Rows are ordered by scenario (in the order named), shape, ascending
// multiple, target in the order it first appears in rep, and class (""
// first). Samples of other scenarios are left out: they have tables of
// their own. It returns nil for a nil report or one without such samples.
func Summarize(rep *bench.Report, scenarios []string) []Row {
	if rep == nil {
		return nil
	}
	var rows []Row
	for _, g := range groups(rep, scenarios) {
		rows = append(rows, summarizeGroup(g)...)
	}
	ranks := TargetRanks(rep)
	sort.SliceStable(rows, func(i, j int) bool { return less(&rows[i], &rows[j], scenarios, ranks) })

	type baseKey struct {
		scenario, shape, class, client string
		multiple                       float64
	}
	// The baseline's goodput at each load: counted when it has kept runs,
	// indicative when its runs were all behind.
	base := make(map[baseKey]float64)
	indicativeBase := make(map[baseKey]float64)
	for _, r := range rows {
		k := baseKey{r.Scenario, r.Shape, r.Class, r.Client, r.Multiple}
		switch {
		case r.Target != BaselineTarget:
		case r.Runs > 0:
			base[k] = r.Goodput
		case r.Indicative:
			indicativeBase[k] = r.Goodput
		}
	}
	for i := range rows {
		r := &rows[i]
		k := baseKey{r.Scenario, r.Shape, r.Class, r.Client, r.Multiple}
		r.BaselineGoodput = base[k]
		switch {
		case r.BaselineGoodput > 0 && !r.Indicative:
			r.Ratio = r.Goodput / r.BaselineGoodput
		case r.BaselineGoodput > 0:
			r.IndicativeRatio = r.Goodput / r.BaselineGoodput
		case indicativeBase[k] > 0 && (r.Runs > 0 || r.Indicative):
			r.IndicativeRatio = r.Goodput / indicativeBase[k]
		}
	}
	return rows
}

// part is what a Row is computed from in one run: the whole sample's or
// one class's rates and latencies, and the run's capacity.
type part struct {
	behind   bool
	capacity float64
	rates    bench.Rates
	latency  bench.Percentiles
	// CPU-seconds per second: the target's and the generator's during
	// the run, the target's during its calibration (0 on class parts).
	targetCPU, genCPU, capCPU float64
	newConns                  float64 // per second; 0 on class parts
	clients                   int     // Sample.Clients; 0 on class parts
	jain, starved             float64
}

// summarizeGroup returns the whole-sample Row of g, then one Row per
// class, classes by name.
func summarizeGroup(g *group) []Row {
	whole := make([]part, 0, len(g.samples))
	classes := make(map[string][]part)
	for _, s := range g.samples {
		whole = append(whole, part{s.Behind, s.Capacity, s.Rates, s.Latency, s.TargetCPU, s.GeneratorCPU, s.CapacityCPU, s.NewConns, s.Clients, s.Jain, s.Starved})
		for name, c := range s.Classes {
			classes[name] = append(classes[name], part{behind: s.Behind, capacity: s.Capacity, rates: c.Rates, latency: c.Latency})
		}
	}
	rows := []Row{summarizeParts(g.key, "", whole)}
	names := make([]string, 0, len(classes))
	for name := range classes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		rows = append(rows, summarizeParts(g.key, name, classes[name]))
	}
	return rows
}

// summarizeParts computes one Row from the runs of a group.
func summarizeParts(k groupKey, class string, parts []part) Row {
	r := summarizeSome(k, class, parts, false)
	if r.Runs == 0 && r.Behind > 0 {
		// No run counts: show what the behind ones measured, flagged.
		ind := summarizeSome(k, class, parts, true)
		ind.Runs, ind.Behind, ind.Indicative = 0, r.Behind, true
		return ind
	}
	return r
}

// summarizeSome takes the medians over the kept parts, or over the behind
// ones when behind is set.
func summarizeSome(k groupKey, class string, parts []part, behind bool) Row {
	r := Row{
		Scenario: k.scenario,
		Shape:    k.shape,
		Target:   k.target,
		Multiple: k.multiple,
		Class:    class,
		Client:   k.client,
	}
	var capacity, offered, goodput, rejected, failed []float64
	var goodFrac, rejFrac, failFrac, p50, p99, p999 []float64
	var tcpu, gcpu, eff, conns, jain, starved []float64
	for _, p := range parts {
		if p.behind != behind {
			r.Behind++
			continue
		}
		r.Runs++
		conns = append(conns, p.newConns)
		if p.clients > 0 {
			jain = append(jain, p.jain)
			starved = append(starved, p.starved)
		}
		capacity = append(capacity, p.capacity)
		offered = append(offered, p.rates.Offered)
		goodput = append(goodput, p.rates.Goodput)
		rejected = append(rejected, p.rates.Rejected)
		failed = append(failed, p.rates.Failed)
		if p.capacity > 0 {
			goodFrac = append(goodFrac, p.rates.Goodput/p.capacity)
		}
		if p.rates.Offered > 0 {
			rejFrac = append(rejFrac, p.rates.Rejected/p.rates.Offered)
			failFrac = append(failFrac, p.rates.Failed/p.rates.Offered)
		}
		if p.targetCPU > 0 {
			tcpu = append(tcpu, p.targetCPU)
			gcpu = append(gcpu, p.genCPU)
			if p.capCPU > 0 && p.capacity > 0 {
				eff = append(eff, (p.rates.Goodput/p.targetCPU)/(p.capacity/p.capCPU))
			}
		}
		if p.rates.Goodput > 0 {
			p50 = append(p50, p.latency.P50)
			p99 = append(p99, p.latency.P99)
			p999 = append(p999, p.latency.P999)
		}
	}
	r.Capacity = Median(capacity)
	r.Offered = Median(offered)
	r.Goodput = Median(goodput)
	r.Rejected = Median(rejected)
	r.Failed = Median(failed)
	r.GoodputFrac = Median(goodFrac)
	r.RejectedFrac = Median(rejFrac)
	r.FailedFrac = Median(failFrac)
	r.P50 = Median(p50)
	r.P99 = Median(p99)
	r.P999 = Median(p999)
	r.TargetCPU = Median(tcpu)
	r.GeneratorCPU = Median(gcpu)
	r.Efficiency = Median(eff)
	if class == "" {
		r.NewConns = Median(conns)
		r.Jain, r.Starved = Median(jain), Median(starved)
	}
	return r
}

// Median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none. It does not modify xs.
func Median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
