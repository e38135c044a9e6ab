package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sluice-go/sluice/bench"
)

// Document is the JSON form of a rendered report: the raw report with every
// sample, the rows of the sweep, shapes, slowdown, mix and step scenarios
// (Summary, Steps) and, by scenario name, those of every scenario with a
// report of its own (Scenarios, which scenario.WriteJSON fills in).
// WriteJSON writes one without Scenarios; it decodes back into the same
// values.
type Document struct {
	Report  *bench.Report `json:"report"`
	Summary []Row         `json:"summary"`
	Steps   []StepRow     `json:"steps"`
	// Scenarios holds the rows of the scenarios with reports of their
	// own (package bench/scenario), by scenario name; absent when none
	// has any.
	Scenarios map[string]any `json:"scenarios,omitempty"`
}

// NewDocument builds the Document of rep.
func NewDocument(rep *bench.Report) Document {
	d := Document{Report: rep, Summary: Summarize(rep), Steps: SummarizeSteps(rep)}
	if d.Summary == nil {
		d.Summary = []Row{}
	}
	if d.Steps == nil {
		d.Steps = []StepRow{}
	}
	return d
}

// WriteJSON writes the Document of rep to w as indented JSON: the suite's
// rows only (see Document).
func WriteJSON(w io.Writer, rep *bench.Report) error {
	if rep == nil {
		return errors.New("report: nil report")
	}
	return WriteDocument(w, NewDocument(rep))
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
