// Package scenario holds the benchmark's scenarios, one file each, and the
// list that `sluice bench -scenarios` reads (All).
//
// A scenario is a bench.Scenario: its name, the check of its settings, the
// points one repeat runs, and how one point runs on a target, with what
// package bench gives every scenario (bench.Trial: the target's child
// process, the load generator, the CPU bracket). A scenario whose samples
// are rows of the table of rates by offered load implements Tabled; one
// with a report of its own implements Reporter (its tables and its rows in
// the JSON document); one with plots, Plotter; one with flags of its own,
// Flagger; one whose runs are checked against rules, Enforcer.
// WriteReport, WriteJSON and Plots put the whole report together from
// them.
//
// A scenario whose targets serve more than the weather service implements
// bench.ChildHooker: its hook (handlers, a change to a sluice target's
// configuration, machinery beside the target, a report) runs in the
// target's child process, which finds it among ChildHooks by the name the
// scenario puts in the child's spec (bench.ChildSpec.SetHook). The hook
// sits beside its scenario, in <name>_child.go.
//
// Adding a scenario is its file (and its hook's, if it has one) here and
// one line in All; package bench is not edited. The command's usage (the
// -scenarios flag of cmd/sluice) describes each scenario in words.
package scenario

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/report"
)

// All returns every scenario, in the order a report shows them, each a
// fresh value with its settings at their defaults.
func All() []bench.Scenario {
	return []bench.Scenario{
		&Sweep{},
		&Shapes{},
		&Slowdown{},
		&Mix{},
		&Step{},
		&Closed{},
		&Quota{},
		&Soak{},
		&Noisy{},
		&Stray{},
		&LongLived{},
		&Cluster{},
		&Shed{},
		&Tenants{},
		&Lanes{},
		&GRPC{},
	}
}

// ChildHooks returns the child hooks of the scenarios of All that have
// one (bench.ChildHooker). Pass them to bench.ServeChild first thing in
// main, and in TestMain of a test binary that runs such scenarios, so that
// a target's child process finds its scenario's hook.
func ChildHooks() []bench.ChildHook {
	var hooks []bench.ChildHook
	for _, s := range All() {
		if h, ok := s.(bench.ChildHooker); ok {
			hooks = append(hooks, h.ChildHook())
		}
	}
	return hooks
}

// Default names the scenarios `sluice bench` runs when -scenarios is not
// given: those of the table of rates by offered load (TableNames), in the
// order of All.
func Default() []string { return TableNames(All()) }

// A Describer is a scenario that says in a line what it does, for the
// command's help (Usage). Every scenario outside Default is one.
type Describer interface {
	Describe() string
}

// Usage is the help of the command's -scenarios: the default scenarios by
// name, then every other scenario of All with its description.
func Usage() string {
	var b strings.Builder
	b.WriteString("comma-separated scenarios: " + strings.Join(Default(), ", ") + "; and, when named, ")
	first := true
	for _, s := range All() {
		if slices.Contains(Default(), s.Name()) {
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		b.WriteString(s.Name())
		if d, ok := s.(Describer); ok {
			b.WriteString(" (" + d.Describe() + ")")
		}
	}
	return b.String()
}

// Names returns the names of All, in order.
func Names() []string {
	var names []string
	for _, s := range All() {
		names = append(names, s.Name())
	}
	return names
}

// Select returns the scenarios of all with the given names, in the order
// named, or an error naming an unknown or repeated one.
func Select(all []bench.Scenario, names []string) ([]bench.Scenario, error) {
	var out []bench.Scenario
	for _, n := range names {
		i := slices.IndexFunc(all, func(s bench.Scenario) bool { return s.Name() == n })
		if i < 0 {
			var have []string
			for _, s := range all {
				have = append(have, s.Name())
			}
			return nil, fmt.Errorf("scenario: unknown scenario %q (have %s)", n, strings.Join(have, ", "))
		}
		if slices.Contains(out, all[i]) {
			return nil, fmt.Errorf("scenario: %s named twice", n)
		}
		out = append(out, all[i])
	}
	return out, nil
}

// detailed is one of a scenario's samples with its detail
// (bench.Sample.Detail) decoded.
type detailed[D any] struct {
	bench.Sample
	detail D
}

// detailedRuns returns rep's samples of the scenario called name that
// have a detail, in report order, or an error naming a sample whose detail
// does not decode as a D.
func detailedRuns[D any](rep *bench.Report, name string) ([]detailed[D], error) {
	if rep == nil {
		return nil, nil
	}
	var out []detailed[D]
	for i := range rep.Samples {
		s := &rep.Samples[i]
		if s.Scenario != name {
			continue
		}
		d, err := bench.DetailOf[D](s)
		if err != nil {
			return nil, fmt.Errorf("%w (%s, repeat %d)", err, s.Target, s.Repeat)
		}
		if d != nil {
			out = append(out, detailed[D]{*s, *d})
		}
	}
	return out, nil
}

// grouped groups runs by key (a target, or a target and a part) and
// returns row(key, its runs) for each, the keys in the order they first
// appear in runs.
func grouped[T any, K comparable, R any](runs []T, key func(T) K, row func(K, []T) R) []R {
	var keys []K
	by := make(map[K][]T)
	for _, r := range runs {
		k := key(r)
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], r)
	}
	rows := make([]R, 0, len(keys))
	for _, k := range keys {
		rows = append(rows, row(k, by[k]))
	}
	return rows
}

// setting is one of a scenario's numeric settings, by the name its errors
// give it.
type setting struct {
	name string
	v    float64
}

// positiveFinite returns an error naming the first of settings that is
// not positive and finite, for the scenario called name; nil when all are.
func positiveFinite(name string, settings ...setting) error {
	for _, s := range settings {
		if !(s.v > 0) || math.IsInf(s.v, 0) {
			return fmt.Errorf("bench: the %s scenario's %s must be positive and finite, got %v", name, s.name, s.v)
		}
	}
	return nil
}

// readMultiples sets *ms from the value v of the flag called name when it
// was given, and to def when *ms is still empty, then checks that each
// multiple is positive and finite.
func readMultiples(ms *[]float64, name, v string, def []float64) error {
	if v != "" {
		xs, err := bench.ParseMultiples(name, v)
		if err != nil {
			return err
		}
		*ms = xs
	}
	if len(*ms) == 0 {
		*ms = def
	}
	for _, m := range *ms {
		if !(m > 0) || math.IsInf(m, 0) {
			return fmt.Errorf("bench: %s: offered multiple %v must be positive and finite", name, m)
		}
	}
	return nil
}

// orMultiples returns ms, or def when ms is empty.
func orMultiples(ms, def []float64) []float64 {
	if len(ms) == 0 {
		return def
	}
	return ms
}

// orFloat returns v, or def when v is zero.
func orFloat(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

// rowsOf returns a scenario's summary rows for Reporter.Rows: nil when
// there are none, or when they could not be made (err).
func rowsOf[R any](rows []R, err error) any {
	if err != nil || len(rows) == 0 {
		return nil
	}
	return rows
}

// A Reporter is a scenario with a report of its own, written after the
// suite's table of rates by offered load (WriteReport).
type Reporter interface {
	// WriteReport writes the scenario's tables of rep's samples to w,
	// nothing when rep has none of them.
	WriteReport(w io.Writer, rep *bench.Report) error
	// Rows returns the scenario's summary of rep for the JSON document
	// (WriteJSON), nil when rep has none of its samples.
	Rows(rep *bench.Report) any
}

// A Plotter is a scenario with plots of its own: Plots draws those of
// rep's samples in dir and returns their files.
type Plotter interface {
	Plots(dir string, rep *bench.Report) ([]string, error)
}

// A Flagger is a scenario with settings of its own on the command line:
// Flags registers them on fs, named after the scenario ("-closed-conns"),
// and Check (bench.Scenario's) checks what they were given.
type Flagger interface {
	Flags(fs *flag.FlagSet)
}

// An Enforcer is a scenario whose runs are checked against rules of its
// own, some of them enforced: Failures returns the enforced checks of
// rep's samples that failed, one line each, or an error naming a sample
// it cannot read.
type Enforcer interface {
	Failures(rep *bench.Report) ([]string, error)
}

// A Tabled scenario shows its samples as rows of the table of rates by
// offered load (report.WriteTable, report.Summarize): one row per target,
// handler shape and multiple of the capacity offered, medians over the
// repeats. A scenario with a report of its own is a Reporter instead.
type Tabled interface {
	// Tabled marks the scenario; it does nothing.
	Tabled()
}

// TableNames returns the names of the scenarios of all that are Tabled, in
// the order of all: the order of their sections in the table.
func TableNames(all []bench.Scenario) []string {
	var names []string
	for _, s := range all {
		if _, ok := s.(Tabled); ok {
			names = append(names, s.Name())
		}
	}
	return names
}

// WriteReport writes rep to w: the table of rates by offered load of the
// Tabled scenarios of all (report.WriteTable), then each reporting
// scenario's tables.
func WriteReport(w io.Writer, rep *bench.Report, all []bench.Scenario) error {
	if err := report.WriteTable(w, rep, TableNames(all)); err != nil {
		return err
	}
	for _, s := range all {
		if r, ok := s.(Reporter); ok {
			if err := r.WriteReport(w, rep); err != nil {
				return err
			}
		}
	}
	return nil
}

// WriteJSON writes rep to w as the report's JSON document
// (report.Document): the rows of the Tabled scenarios of all, and those of
// each reporting one.
func WriteJSON(w io.Writer, rep *bench.Report, all []bench.Scenario) error {
	if rep == nil {
		return errors.New("scenario: nil report")
	}
	d := report.NewDocument(rep, TableNames(all))
	for _, s := range all {
		r, ok := s.(Reporter)
		if !ok {
			continue
		}
		if rows := r.Rows(rep); rows != nil {
			if d.Scenarios == nil {
				d.Scenarios = make(map[string]any)
			}
			d.Scenarios[s.Name()] = rows
		}
	}
	return report.WriteDocument(w, d)
}

// Plots draws every plot of rep in dir, each plotting scenario's of all,
// and returns their files.
func Plots(dir string, rep *bench.Report, all []bench.Scenario) ([]string, error) {
	var plots []string
	for _, s := range all {
		if p, ok := s.(Plotter); ok {
			more, err := p.Plots(dir, rep)
			plots = append(plots, more...)
			if err != nil {
				return plots, err
			}
		}
	}
	return plots, nil
}
