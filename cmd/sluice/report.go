package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/report"
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
	if err := report.WriteLanesReport(stdout, doc.Report); err != nil {
		return err
	}
	dir := *out
	if dir == "" {
		dir = filepath.Dir(path)
	}
	plots, err := allPlots(dir, doc.Report)
	if err != nil {
		return err
	}
	if len(plots) > 0 {
		fmt.Fprintln(stdout)
	}
	for _, p := range plots {
		fmt.Fprintf(stdout, "plot:  %s\n", p)
	}
	writeSummary(stdout, doc.Report)
	// The soak's checks are shown again; a failed one is no error of
	// this command, which only reads.
	return report.WriteSoak(stdout, doc.Report)
}

// allPlots draws every plot of rep in dir (the sweep's and the scenarios',
// and the lanes scenario's live change) and returns their files.
func allPlots(dir string, rep *bench.Report) ([]string, error) {
	plots, err := report.Plots(dir, rep)
	if err != nil {
		return nil, err
	}
	lanesPlots, err := report.LanesPlots(dir, rep)
	return append(plots, lanesPlots...), err
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
