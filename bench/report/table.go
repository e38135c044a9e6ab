package report

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-go/sluice/bench"
)

// WriteTable writes rep to w as human-readable text: a header with how the
// benchmark was run, then one aligned table of Summarize rows per scenario
// and handler shape, and after each step table the step response of that
// shape (SummarizeSteps). Rates are per second, fractions of C or of the
// offered load, latencies in milliseconds; "runs" is kept/behind, and a
// row whose runs were all behind shows what they measured with its target
// marked "*" (indicative, counted nowhere), or reads "behind" when even
// that is unknown.
func WriteTable(w io.Writer, rep *bench.Report) error {
	if rep == nil {
		return errors.New("report: nil report")
	}
	var buf bytes.Buffer
	writeHeader(&buf, rep)
	rows := Summarize(rep)
	steps := SummarizeSteps(rep)
	for start := 0; start < len(rows); {
		end := start + 1
		for end < len(rows) && rows[end].Scenario == rows[start].Scenario && rows[end].Shape == rows[start].Shape {
			end++
		}
		section := rows[start:end]
		scenario, shape := section[0].Scenario, section[0].Shape
		fmt.Fprintf(&buf, "\n%s, shape %s%s\n", scenario, orDash(shape), handlerOf(rep, scenario, shape))
		writeRows(&buf, section)
		if scenario == bench.ScenarioStep {
			writeSteps(&buf, shape, steps)
		}
		start = end
	}
	if len(rows) == 0 {
		buf.WriteString("\nno samples\n")
	}
	for _, r := range rows {
		if r.Indicative {
			buf.WriteString("\n* the generator fell behind its schedule in every run of this row: indicative only,\n  counted in no median and no ratio (the target was offered less than asked at times).\n")
			break
		}
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("report: write table: %w", err)
	}
	return nil
}

// writeHeader writes how the benchmark was run.
func writeHeader(buf *bytes.Buffer, rep *bench.Report) {
	fmt.Fprintf(buf, "Command:  %s\n", orDash(rep.Command))
	fmt.Fprintf(buf, "Machine:  %s\n", orDash(rep.Machine))
	if len(rep.TargetCPUs) > 0 {
		fmt.Fprintf(buf, "CPUs:     targets on %s, generator on %s\n", bench.FormatCPUList(rep.TargetCPUs), bench.FormatCPUList(rep.GeneratorCPUs))
	} else {
		buf.WriteString("CPUs:     targets and generator share all\n")
	}
	started := "-"
	if !rep.Started.IsZero() {
		started = rep.Started.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(buf, "Started:  %s  Deadline: %s  Repeats: %d\n", started, rep.Deadline, rep.Repeats)
	buf.WriteString("Medians over the runs not behind schedule; runs = kept/behind; rates per second.\n")
}

// handlerOf describes the handler of the first sample of scenario and
// shape, as " (cpu 1ms, db 2ms, blocking)", or "" when it has none.
func handlerOf(rep *bench.Report, scenario, shape string) string {
	for _, s := range rep.Samples {
		if s.Scenario != scenario || s.Shape != shape {
			continue
		}
		h := s.Handler
		if h == (bench.HandlerSpec{}) {
			return ""
		}
		desc := fmt.Sprintf(" (cpu %s, db %s", h.CPU, h.DB)
		if h.Blocking {
			desc += ", blocking"
		}
		return desc + ")"
	}
	return ""
}

// newTab returns a tabwriter aligning cells to the right into buf.
func newTab(buf *bytes.Buffer) *tabwriter.Writer {
	return tabwriter.NewWriter(buf, 0, 0, 2, ' ', tabwriter.AlignRight)
}

// line writes cells as one tab-terminated line.
func line(tw *tabwriter.Writer, cells ...string) {
	// Writes into a bytes.Buffer through a tabwriter cannot fail.
	_, _ = io.WriteString(tw, strings.Join(cells, "\t")+"\t\n")
}

// writeRows writes the table of one scenario and shape.
func writeRows(buf *bytes.Buffer, rows []Row) {
	classes := false
	for _, r := range rows {
		classes = classes || r.Class != ""
	}
	tw := newTab(buf)
	head := []string{"target"}
	if classes {
		head = append(head, "class")
	}
	head = append(head, "x", "C/s", "offered/s", "goodput/s", "goodput/C", "vs "+BaselineTarget,
		"rejected %", "failed %", "p50 ms", "p99 ms", "p99.9 ms", "CPU tgt/gen", "eff", "runs")
	line(tw, head...)
	for _, r := range rows {
		name := r.Target
		if r.Indicative {
			name += "*"
		}
		cells := []string{name}
		if classes {
			cells = append(cells, orDash(r.Class))
		}
		cells = append(cells, formatMultiple(r.Multiple))
		if r.Runs == 0 && !r.Indicative {
			cells = append(cells, behindCells(12)...)
		} else {
			ratio := "-"
			if r.BaselineGoodput > 0 {
				ratio = fmt.Sprintf("%.2f", r.Ratio)
			}
			cells = append(cells,
				fmt.Sprintf("%.0f", r.Capacity),
				fmt.Sprintf("%.0f", r.Offered),
				fmt.Sprintf("%.0f", r.Goodput),
				fmt.Sprintf("%.2f", r.GoodputFrac),
				ratio,
				fmt.Sprintf("%.1f", 100*r.RejectedFrac),
				fmt.Sprintf("%.1f", 100*r.FailedFrac),
				formatMS(r.P50),
				formatMS(r.P99),
				formatMS(r.P999),
				formatCPU(r.TargetCPU, r.GeneratorCPU),
				formatEff(r.Efficiency),
			)
		}
		cells = append(cells, fmt.Sprintf("%d/%d", r.Runs, r.Behind))
		line(tw, cells...)
	}
	// Flushing into a bytes.Buffer cannot fail.
	_ = tw.Flush()
}

// formatCPU shows the target's and the generator's CPU-seconds per second.
func formatCPU(t, g float64) string {
	if t <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f/%.2f", t, g)
}

func formatEff(e float64) string {
	if e <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", e)
}

// writeSteps writes the step response table of one shape.
func writeSteps(buf *bytes.Buffer, shape string, steps []StepRow) {
	var rows []StepRow
	for _, r := range steps {
		if r.Shape == shape {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(buf, "\nstep response, shape %s (react: until goodput is within %.0f%% of its level; stable: share of the later\nhigh buckets within that band; both by the requests' scheduled time, and as \"done\" by the time the answers\nended; recover: until the last rejection or failure after the step down)\n",
		orDash(shape), 100*SettleBand)
	tw := newTab(buf)
	line(tw, "target", "x low->high", "offered/s", "steady/s", "react ms", "stable %", "done react ms", "done stable %", "recover ms", "recovered", "runs")
	for _, r := range rows {
		cells := []string{r.Target, formatMultiple(r.Low) + "->" + formatMultiple(r.High)}
		if r.Measured == 0 {
			first := "no series"
			if r.Runs == 0 {
				first = "behind"
			}
			cells = append(cells, first, "-", "-", "-", "-", "-", "-", "-")
		} else {
			doneReact, doneStable := "-", "-"
			if r.OutputMeasured > 0 {
				doneReact, doneStable = formatDurationMS(r.OutputReact), fmt.Sprintf("%.0f", 100*r.OutputStable)
			}
			cells = append(cells,
				fmt.Sprintf("%.0f", r.HighOffered),
				fmt.Sprintf("%.0f", r.Steady),
				formatDurationMS(r.ReactTime),
				fmt.Sprintf("%.0f", 100*r.Stable),
				doneReact, doneStable,
				formatDurationMS(r.RecoverTime),
				fmt.Sprintf("%d/%d", r.Recovered, r.Measured),
			)
		}
		cells = append(cells, fmt.Sprintf("%d/%d", r.Runs, r.Behind))
		line(tw, cells...)
	}
	_ = tw.Flush()
}

// behindCells returns n cells for a row without a kept run: "behind", then
// dashes.
func behindCells(n int) []string {
	cells := make([]string, n)
	cells[0] = "behind"
	for i := 1; i < n; i++ {
		cells[i] = "-"
	}
	return cells
}

// formatMultiple prints a multiple in its shortest form.
func formatMultiple(m float64) string {
	return strconv.FormatFloat(m, 'g', -1, 64)
}

// formatMS prints a latency in milliseconds with about three significant
// digits, or "-" for none.
func formatMS(ms float64) string {
	switch {
	case ms <= 0:
		return "-"
	case ms < 10:
		return fmt.Sprintf("%.2f", ms)
	case ms < 100:
		return fmt.Sprintf("%.1f", ms)
	default:
		return fmt.Sprintf("%.0f", ms)
	}
}

// formatDurationMS prints a duration in whole milliseconds.
func formatDurationMS(d time.Duration) string {
	return strconv.FormatInt(d.Round(time.Millisecond).Milliseconds(), 10)
}

// orDash returns s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
