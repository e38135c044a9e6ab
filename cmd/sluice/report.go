package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sluice-go/sluice/bench/report"
)

// reportCmd prints the table of a saved report.json again and redraws its
// plots, without running anything.
func reportCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "report.json written by demo or bench (required)")
	out := fs.String("out", "", "directory for the plots (default: the directory of -in)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || fs.NArg() > 0 {
		return errors.New("report: -in FILE is required, and nothing else")
	}
	b, err := os.ReadFile(*in)
	if err != nil {
		return err
	}
	var doc report.Document
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("report: %s: %w", *in, err)
	}
	if doc.Report == nil {
		return fmt.Errorf("report: %s holds no report", *in)
	}
	if err := report.WriteTable(stdout, doc.Report); err != nil {
		return err
	}
	dir := *out
	if dir == "" {
		dir = filepath.Dir(*in)
	}
	plots, err := report.Plots(dir, doc.Report)
	if err != nil {
		return err
	}
	for _, p := range plots {
		fmt.Fprintf(stdout, "plot:  %s\n", p)
	}
	return nil
}
