package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/report"
	"github.com/sluice-go/sluice/bench/scenario"
)

// reportCmd prints the table of a saved report.json again, with its plain
// summary, and redraws its plots, without running anything. The file is
// given as an argument or with -in, and flags may come before or after it.
func reportCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: sluice report [-out DIR] FILE   (or -in FILE)")
		fs.PrintDefaults()
	}
	in := fs.String("in", "", "report.json written by demo or bench (or give it as the argument)")
	out := fs.String("out", "", "directory for the plots (default: the directory of the report)")
	files, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	path := *in
	switch {
	case len(files) > 1:
		return fmt.Errorf("report: one report at a time, got %q", files)
	case len(files) == 1 && path != "":
		return fmt.Errorf("report: the report is given twice, as -in %s and as %s", path, files[0])
	case len(files) == 1:
		path = files[0]
	case path == "":
		return errors.New("report: which report? usage: sluice report FILE (a report.json written by demo or bench)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc report.Document
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("report: %s: %w", path, err)
	}
	if doc.Report == nil {
		return fmt.Errorf("report: %s holds no report", path)
	}
	dir := *out
	if dir == "" {
		dir = filepath.Dir(path)
	}
	// The soak's checks are shown again (its report); a failed one is no
	// error of this command, which only reads.
	return printReport(stdout, doc.Report, dir, "", scenario.All(), false)
}

// saveAndPrintReport writes the report of a run that just ended: its JSON
// document (scenario.WriteJSON) as report.json in dir, then the text and
// plots of printReport, whose enforced checks it enforces.
func saveAndPrintReport(w io.Writer, rep *bench.Report, dir string, all []bench.Scenario) error {
	jsonPath := filepath.Join(dir, "report.json")
	jf, err := os.Create(jsonPath)
	if err != nil {
		return err
	}
	if err := errors.Join(scenario.WriteJSON(jf, rep, all), jf.Close()); err != nil {
		return err
	}
	return printReport(w, rep, dir, jsonPath, all, true)
}

// printReport writes the one report of a run, whether it just ran or was
// read back: every scenario's tables (the soak's checks among them), the
// path of the JSON (when given), the plots drawn in dir and the plain
// summary. With enforce, the enforced checks that failed (the soak's,
// scenario.Enforcer) are the error returned.
func printReport(w io.Writer, rep *bench.Report, dir, jsonPath string, all []bench.Scenario, enforce bool) error {
	if err := scenario.WriteReport(w, rep, all); err != nil {
		return err
	}
	plots, err := scenario.Plots(dir, rep, all)
	if err != nil {
		return err
	}
	if jsonPath != "" {
		fmt.Fprintf(w, "\nJSON:  %s\n", jsonPath)
	} else if len(plots) > 0 {
		fmt.Fprintln(w)
	}
	for _, p := range plots {
		fmt.Fprintf(w, "plot:  %s\n", p)
	}
	writeSummary(w, rep, all)
	if !enforce {
		return nil
	}
	var errs []error
	for _, s := range all {
		e, ok := s.(scenario.Enforcer)
		if !ok {
			continue
		}
		failed, err := e.Failures(rep)
		if err != nil {
			errs = append(errs, err)
		} else if len(failed) > 0 {
			errs = append(errs, fmt.Errorf("%s: %d check(s) failed:\n  %s", s.Name(), len(failed), strings.Join(failed, "\n  ")))
		}
	}
	return errors.Join(errs...)
}

// parseInterspersed parses args with fs, letting flags follow the
// positional arguments (the flag package stops at the first of them), and
// returns the positional arguments. After a "--" every argument is
// positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// writeSummary ends the output with what the table of rates by offered
// load shows (the Tabled scenarios of all), in plain words
// (report.PlainSummary), after a blank line; nothing when it has nothing
// to say.
func writeSummary(w io.Writer, rep *bench.Report, all []bench.Scenario) {
	lines := report.PlainSummary(rep, scenario.TableNames(all))
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}
