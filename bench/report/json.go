package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sluice-go/sluice/bench"
)

// Document is the JSON form of a rendered report: the raw report with every
// sample, the rows of the table of rates by offered load (Summary, and
// Steps for its scenarios whose load is a step) and, by scenario name,
// those of every scenario with a report of its own (Scenarios, which
// scenario.WriteJSON fills in). WriteJSON writes one without Scenarios; it
// decodes back into the same values.
type Document struct {
	Report  *bench.Report `json:"report"`
	Summary []Row         `json:"summary"`
	Steps   []StepRow     `json:"steps"`
	// Scenarios holds the rows of the scenarios with reports of their
	// own (package bench/scenario), by scenario name; absent when none
	// has any.
	Scenarios map[string]any `json:"scenarios,omitempty"`
}

// NewDocument builds the Document of rep, its table of rates by offered
// load showing the named scenarios (Summarize).
func NewDocument(rep *bench.Report, scenarios []string) Document {
	d := Document{Report: rep, Summary: Summarize(rep, scenarios), Steps: []StepRow{}}
	if d.Summary == nil {
		d.Summary = []Row{}
	}
	for _, sc := range scenarios {
		d.Steps = append(d.Steps, SummarizeSteps(rep, sc)...)
	}
	return d
}

// WriteJSON writes the Document of rep to w as indented JSON, its table
// showing the named scenarios, without the rows of scenarios with reports
// of their own (see Document).
func WriteJSON(w io.Writer, rep *bench.Report, scenarios []string) error {
	if rep == nil {
		return errors.New("report: nil report")
	}
	return WriteDocument(w, NewDocument(rep, scenarios))
}

// WriteDocument writes d to w as indented JSON.
func WriteDocument(w io.Writer, d Document) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return fmt.Errorf("report: write JSON: %w", err)
	}
	return nil
}
