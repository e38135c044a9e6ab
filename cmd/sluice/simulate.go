package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-go/sluice/tenant/tenantsim"
)

// simulateCmd runs the tenant-fairness simulation (package tenantsim): each
// scenario on virtual time, with the real admission pipeline, tenant
// policy, agents and controller, prints its table and targets, and writes
// simulate.json and a plot per scenario. It fails when a target fails.
func simulateCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		names    = fs.String("scenario", "all", "comma-separated scenarios to run, all, or list (print them and exit)")
		file     = fs.String("file", "", "a JSON file of scenarios (one object or an array) to run instead of the built-in ones")
		seed     = fs.Uint64("seed", 0, "seed of the first run of each scenario (default: the scenario's own)")
		runs     = fs.Int("runs", 1, "runs of each scenario, with seeds seed, seed+1, ...: the table shows the first, the targets' figures are given as medians")
		duration = fs.Duration("duration", 0, "run each scenario for this long, its times scaled to fit (0: as written, 30s for the built-in ones)")
		out      = fs.String("out", "", "directory for simulate.json and the plots (empty: a new temporary directory)")
		progress = fs.String("progress", "lines", "progress on stderr: lines (one line per run) or off")
	)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sluice simulate [flags]\n\nThe tenant-fairness simulation on virtual time (see docs/benchmarks.md). Flags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	seedSet := false
	fs.Visit(func(f *flag.Flag) { seedSet = seedSet || f.Name == "seed" })
	switch {
	case *runs < 1 || *runs > 100:
		return fmt.Errorf("-runs must be in [1, 100], got %d", *runs)
	case *duration < 0 || *duration > time.Hour:
		return fmt.Errorf("-duration must be in [0, 1h], got %v", *duration)
	case *progress != "lines" && *progress != "off":
		return fmt.Errorf("-progress must be lines or off, got %q", *progress)
	}
	all := tenantsim.Builtin()
	if *file != "" {
		f, err := os.Open(*file)
		if err != nil {
			return err
		}
		all, err = tenantsim.Load(f)
		f.Close()
		if err != nil {
			return err
		}
	}
	if *names == "list" {
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		for _, sc := range all {
			fmt.Fprintf(tw, "%s\t%s\n", sc.Name, sc.Description)
		}
		return tw.Flush()
	}
	chosen, err := pickScenarios(all, *names)
	if err != nil {
		return err
	}
	dir := *out
	if dir == "" {
		if dir, err = os.MkdirTemp("", "sluice-simulate-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}

	var results []*tenantsim.Result
	var plots []string
	var failed []string
	for _, sc := range chosen {
		if *duration > 0 {
			sc = sc.Scaled(*duration)
		}
		first := sc.Seed
		if seedSet {
			first = *seed
		}
		var mine []*tenantsim.Result
		for i := range *runs {
			sc.Seed = first + uint64(i)
			r, err := tenantsim.Run(sc)
			if err != nil {
				return err
			}
			if *progress == "lines" {
				verdict := "all targets met"
				if n := countFailed(r); n > 0 {
					verdict = fmt.Sprintf("%d target(s) failed", n)
				}
				fmt.Fprintf(stderr, "sluice simulate: %s seed %d: %v virtual in %v, %s\n",
					sc.Name, sc.Seed, time.Duration(r.Scenario.Duration), time.Duration(r.Elapsed).Round(time.Millisecond), verdict)
			}
			for _, t := range r.Targets {
				if !t.Pass {
					failed = append(failed, fmt.Sprintf("%s seed %d: %s: %s", sc.Name, sc.Seed, t.Kind, t.Text))
				}
			}
			mine = append(mine, r)
		}
		results = append(results, mine...)
		fmt.Fprintln(stdout)
		if err := tenantsim.WriteTable(stdout, mine[0]); err != nil {
			return err
		}
		if len(mine) > 1 {
			if err := writeAcross(stdout, mine); err != nil {
				return err
			}
		}
		path := filepath.Join(dir, plotName(sc.Name)+".png")
		if err := tenantsim.Plot(path, mine[0]); err != nil {
			return err
		}
		plots = append(plots, path)
	}
	jsonPath := filepath.Join(dir, "simulate.json")
	jf, err := os.Create(jsonPath)
	if err != nil {
		return err
	}
	if err := errors.Join(tenantsim.WriteJSON(jf, results), jf.Close()); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nJSON:  %s\n", jsonPath)
	for _, p := range plots {
		fmt.Fprintf(stdout, "plot:  %s\n", p)
	}
	if len(failed) > 0 {
		return fmt.Errorf("simulate: %d target(s) failed:\n  %s", len(failed), strings.Join(failed, "\n  "))
	}
	return nil
}

// pickScenarios returns the scenarios that names (comma-separated, or
// "all") names, in the order of all.
func pickScenarios(all []tenantsim.Scenario, names string) ([]tenantsim.Scenario, error) {
	if strings.TrimSpace(names) == "all" {
		return all, nil
	}
	want := splitList(names)
	if len(want) == 0 {
		return nil, errors.New("-scenario is empty: name scenarios, or give all or list")
	}
	var out []tenantsim.Scenario
	for _, n := range want {
		i := slices.IndexFunc(all, func(sc tenantsim.Scenario) bool { return sc.Name == n })
		if i < 0 {
			have := make([]string, len(all))
			for j, sc := range all {
				have[j] = sc.Name
			}
			return nil, fmt.Errorf("unknown scenario %q (have %s)", n, strings.Join(have, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// countFailed returns the number of r's targets that failed.
func countFailed(r *tenantsim.Result) int {
	n := 0
	for _, t := range r.Targets {
		if !t.Pass {
			n++
		}
	}
	return n
}

// writeAcross writes each target's figure across the runs of one
// scenario: the median, the range, and how many runs met it.
func writeAcross(w io.Writer, runs []*tenantsim.Result) error {
	fmt.Fprintf(w, "  across %d seeds (%d to %d): median [min, max], runs that met the target\n",
		len(runs), runs[0].Scenario.Seed, runs[len(runs)-1].Scenario.Seed)
	for i, t := range runs[0].Targets {
		var vals []float64
		passed := 0
		for _, r := range runs {
			vals = append(vals, r.Targets[i].Value)
			if r.Targets[i].Pass {
				passed++
			}
		}
		sort.Float64s(vals)
		med := vals[len(vals)/2]
		if len(vals)%2 == 0 {
			med = (vals[len(vals)/2-1] + vals[len(vals)/2]) / 2
		}
		window := fmt.Sprintf("from %v", time.Duration(t.From))
		if t.To != 0 {
			window += fmt.Sprintf(" to %v", time.Duration(t.To))
		}
		if _, err := fmt.Fprintf(w, "  %-15s %-16s %8.4g [%.4g, %.4g]  %d/%d\n",
			t.Kind, window, med, vals[0], vals[len(vals)-1], passed, len(runs)); err != nil {
			return err
		}
	}
	return nil
}

// plotName reduces a scenario's name to safe file-name characters.
func plotName(name string) string {
	safe := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		default:
			return '_'
		}
	}, name)
	return "simulate-" + safe
}
