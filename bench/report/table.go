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
// benchmark was run, then one aligned table of Summarize rows per named
// scenario and handler shape, each followed by notes on what its blanks
// and marks mean, and, for a scenario whose load is a step (samples with a
// bench.StepInfo), the step response of that shape (SummarizeSteps). A legend under the last table says in plain words what
// every column means (see legend).
//
// Rates are per second, fractions of C or of the offered load, latencies
// in milliseconds; "runs" is kept/behind. A row whose runs were all behind
// shows what they measured with its target marked "*" (indicative, counted
// nowhere), or reads "behind" when even that is unknown. The "vs nethttp"
// column is left out of a table without both net/http and another target;
// where net/http's runs at a load were all behind, it compares with what
// they measured, marked "*", and a note under the table says so, as it
// says why a cell of the column is blank.
//
// Other scenarios' samples are left to their own reports (package
// bench/scenario).
func WriteTable(w io.Writer, rep *bench.Report, scenarios []string) error {
	if rep == nil {
		return errors.New("report: nil report")
	}
	var buf bytes.Buffer
	writeHeader(&buf, rep)
	rows := Summarize(rep, scenarios)
	var shown columns
	for start := 0; start < len(rows); {
		end := start + 1
		for end < len(rows) && rows[end].Scenario == rows[start].Scenario && rows[end].Shape == rows[start].Shape {
			end++
		}
		section := rows[start:end]
		scenario, shape := section[0].Scenario, section[0].Shape
		fmt.Fprintf(&buf, "\n%s, shape %s%s\n", scenario, orDash(shape), HandlerOf(rep, scenario, shape))
		cols := writeRows(&buf, section)
		shown.classes = shown.classes || cols.classes
		shown.ratio = shown.ratio || cols.ratio
		shown.client = shown.client || cols.client
		shown.fair = shown.fair || cols.fair
		writeSteps(&buf, shape, SummarizeSteps(rep, scenario))
		start = end
	}
	switch {
	case len(rows) > 0:
		buf.WriteString("\n")
		writeLegend(&buf, legend(rep.Deadline, shown))
	case len(rep.Samples) == 0:
		buf.WriteString("\nno samples\n")
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("report: write table: %w", err)
	}
	return nil
}

// columns says which optional columns a table has.
type columns struct {
	classes bool // the class column
	ratio   bool // the "vs nethttp" column
	client  bool // the client and conns/s columns
	fair    bool // the Jain and starved columns (a connection per client)
}

// legendEntry explains one column of the tables WriteTable prints.
type legendEntry struct {
	// column is the column's heading, or several headings explained
	// together.
	column string
	// text says what the column means in plain words.
	text string
}

// legend returns the explanation of every column of the sweep-like tables
// WriteTable prints, in their order: deadline is the report's client
// deadline (0 when unknown), classes and ratio whether the class and
// "vs nethttp" columns are shown.
func legend(deadline time.Duration, cols columns) []legendEntry {
	classes, ratio := cols.classes, cols.ratio
	inTime := "within the client's deadline"
	if deadline > 0 {
		inTime = "within the " + deadline.String() + " deadline"
	}
	entries := []legendEntry{
		{"target", "the server measured; a * after its name marks a row whose runs all fell behind " +
			"(see the note under its table)"},
	}
	if classes {
		entries = append(entries, legendEntry{"class", `the requests the row counts (in the mix: "kept" ` +
			`on kept-alive connections, "new" each on a connection of its own); - = all of them`})
	}
	if cols.client {
		entries = append(entries, legendEntry{"client", "the load generator's client: reconnect = a request " +
			"that passes its deadline closes its connection and the next request opens a new one (as net/http's " +
			"Transport, browsers and most SDKs do); keep = it stays on its connection, whose late answer is read " +
			"to its end before the connection carries another request (a client that never abandons work the " +
			"server started)"})
	}
	entries = append(entries,
		legendEntry{"x", "offered load, as a multiple of this target's own capacity C (step: the high level)"},
		legendEntry{"C/s", "capacity: requests per second the target completed " + inTime + " in a short " +
			"closed-loop run just before (each connection sends its next request when the last is answered; " +
			"C is the best of 16 to 128 connections in demo and bench)"},
		legendEntry{"offered/s", "requests per second the load generator sent: x times C, each at its own " +
			"scheduled time whatever the answers (open loop)"},
		legendEntry{"goodput/s", "requests per second answered with a 2xx " + inTime + ", counted from the " +
			"scheduled send"},
		legendEntry{"goodput/C", "goodput over C, per run, then the median: 1.00 = the whole capacity did useful " +
			"work. It can exceed 1: C comes from short closed-loop runs, another kind of load than the open-loop " +
			"one measured here, which keeps as many requests in flight as arrive; the test handler's CPU work is " +
			"a busy-wait of wall time, which the kernel's network work, the garbage collector and other threads " +
			"shorten when they interrupt it, the more so the more requests are in flight (net/http under " +
			"overload; eff above 1 shows it); and both figures are noisy by a few percent"},
	)
	if ratio {
		entries = append(entries, legendEntry{"vs " + BaselineTarget, "goodput over net/http's at the same x " +
			"(each target offered x times its own C); for - and * see the notes under the table"})
	}
	entries = append(entries,
		legendEntry{"rejected %", "share of the offered requests refused at once with a 503 that says the " +
			"request was not started (safe to retry elsewhere)"},
		legendEntry{"failed %", "share of the offered requests that failed: answered after the deadline, with " +
			"an error or another status, or never sent because the generator had too many in flight"},
		legendEntry{"p50/p99/p99.9", "latency in ms of the answers counted in goodput, from the scheduled send " +
			"to the end of the answer: the median, and the time 99% and 99.9% of them stayed within"},
		legendEntry{"CPU tgt/gen", "CPU-seconds per second used during the run by the target's process / by " +
			"the load generator (1.00 = one CPU busy all the time); - = not measured"},
		legendEntry{"eff", "goodput per CPU-second the target used, over the same while C was measured: " +
			"1.00 = every CPU-second served as much as at capacity; lower = CPU went to work that gave no " +
			"timely answer (rejections, late answers); higher = requests cost less CPU than at capacity (see " +
			"goodput/C). Unlike goodput/C it does not fall when the generator takes CPU from the target"},
	)
	if cols.client {
		entries = append(entries, legendEntry{"conns/s", "TCP connections the load generator opened per second " +
			"of the run: the pool's first ones and those that replaced a connection closed"})
	}
	if cols.fair {
		entries = append(entries,
			legendEntry{"Jain", "with a connection per client (-clients): Jain's index over the clients' " +
				"answers in time, 1.00 when every client got as many, 1/n when one got them all"},
			legendEntry{"starved %", "share of the clients that got no answer in time in the run"})
	}
	entries = append(entries,
		legendEntry{"runs", "kept/behind: runs counted in the medians / runs left out because the load " +
			"generator fell behind its schedule (it could not send on time, so the target was offered less " +
			"than asked)"},
	)
	return entries
}

// legendWidth is the width the legend's lines are wrapped to.
const legendWidth = 100

// writeLegend writes entries under a heading, the explanations aligned and
// wrapped to legendWidth.
func writeLegend(buf *bytes.Buffer, entries []legendEntry) {
	width := 0
	for _, e := range entries {
		width = max(width, len(e.column))
	}
	buf.WriteString("Columns (medians over the kept runs):\n")
	for _, e := range entries {
		for i, l := range wrap(e.text, legendWidth-width-4) {
			name := ""
			if i == 0 {
				name = e.column
			}
			fmt.Fprintf(buf, "  %-*s  %s\n", width, name, l)
		}
	}
}

// wrap splits text into lines of at most width bytes at spaces (a longer
// word gets a line of its own).
func wrap(text string, width int) []string {
	var lines []string
	cur := ""
	for _, w := range strings.Fields(text) {
		switch {
		case cur == "":
			cur = w
		case len(cur)+1+len(w) <= width:
			cur += " " + w
		default:
			lines = append(lines, cur)
			cur = w
		}
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
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

// HandlerOf describes the handler of the first sample of scenario and
// shape, as " (cpu 1ms, db 2ms, blocking)", or "" when it has none.
func HandlerOf(rep *bench.Report, scenario, shape string) string {
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

// NewTab returns a tabwriter aligning cells to the right into buf, for
// a scenario's table.
func NewTab(buf io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(buf, 0, 0, 2, ' ', tabwriter.AlignRight)
}

// Line writes cells as one tab-terminated line of a NewTab table.
func Line(tw *tabwriter.Writer, cells ...string) {
	// Writes into a bytes.Buffer through a tabwriter cannot fail.
	_, _ = io.WriteString(tw, strings.Join(cells, "\t")+"\t\n")
}

// ratioNote is a reason a "vs nethttp" cell is blank or marked.
type ratioNote int

const (
	// noteNone: the cell is a plain ratio.
	noteNone ratioNote = iota - 1
	// noteIndicative: the baseline's runs at that load were all behind,
	// and the ratio is against what they measured.
	noteIndicative
	// noteNoRow: the baseline was not run at that load.
	noteNoRow
	// noteNoFigures: the baseline's runs were all behind and left nothing
	// to compare with.
	noteNoFigures
	// noteNothing: the baseline completed no request in time.
	noteNothing
	nRatioNotes
)

// baselineOf returns the baseline's row of r's load and class among rows.
func baselineOf(rows []Row, r Row) (Row, bool) {
	for _, b := range rows {
		if b.Target == BaselineTarget && b.Scenario == r.Scenario && b.Shape == r.Shape && b.Multiple == r.Multiple && b.Class == r.Class && b.Client == r.Client {
			return b, true
		}
	}
	return Row{}, false
}

// ratioCell returns the "vs nethttp" cell of r, and why it is blank or
// marked (noteNone when it is neither).
func ratioCell(rows []Row, r Row) (string, ratioNote) {
	b, ok := baselineOf(rows, r)
	switch {
	case !ok:
		return "-", noteNoRow
	case b.Runs == 0 && !b.Indicative:
		return "-", noteNoFigures
	case b.Goodput <= 0:
		return "-", noteNothing
	case b.Indicative:
		return fmt.Sprintf("%.2f*", r.Goodput/b.Goodput), noteIndicative
	case r.Indicative:
		// The row's own * says why.
		return fmt.Sprintf("%.2f*", r.Goodput/b.Goodput), noteNone
	default:
		return fmt.Sprintf("%.2f", r.Goodput/b.Goodput), noteNone
	}
}

// tableHead returns the headings of a table with cols.
func tableHead(cols columns) []string {
	head := []string{"target"}
	if cols.classes {
		head = append(head, "class")
	}
	if cols.client {
		head = append(head, "client")
	}
	head = append(head, "x", "C/s", "offered/s", "goodput/s", "goodput/C")
	if cols.ratio {
		head = append(head, "vs "+BaselineTarget)
	}
	head = append(head, "rejected %", "failed %", "p50 ms", "p99 ms", "p99.9 ms", "CPU tgt/gen", "eff")
	if cols.client {
		head = append(head, "conns/s")
	}
	if cols.fair {
		head = append(head, "Jain", "starved %")
	}
	return append(head, "runs")
}

// writeRows writes the table of one scenario and shape, then the notes on
// its marks and blanks, and returns which optional columns it has.
func writeRows(buf *bytes.Buffer, rows []Row) columns {
	var cols columns
	hasBase, hasOther, indicative := false, false, false
	for _, r := range rows {
		cols.classes = cols.classes || r.Class != ""
		cols.client = cols.client || r.Client != ""
		cols.fair = cols.fair || r.Jain > 0
		hasBase = hasBase || r.Target == BaselineTarget
		hasOther = hasOther || r.Target != BaselineTarget
		indicative = indicative || r.Indicative
	}
	cols.ratio = hasBase && hasOther
	var notes [nRatioNotes]bool
	tw := NewTab(buf)
	Line(tw, tableHead(cols)...)
	for _, r := range rows {
		name := r.Target
		if r.Indicative {
			name += "*"
		}
		cells := []string{name}
		if cols.classes {
			cells = append(cells, orDash(r.Class))
		}
		if cols.client {
			cells = append(cells, orDash(r.Client))
		}
		cells = append(cells, formatMultiple(r.Multiple))
		if r.Runs == 0 && !r.Indicative {
			n := 11
			if cols.ratio {
				n++
			}
			if cols.client {
				n++
			}
			if cols.fair {
				n += 2
			}
			cells = append(cells, behindCells(n)...)
		} else {
			cells = append(cells,
				fmt.Sprintf("%.0f", r.Capacity),
				fmt.Sprintf("%.0f", r.Offered),
				fmt.Sprintf("%.0f", r.Goodput),
				fmt.Sprintf("%.2f", r.GoodputFrac),
			)
			if cols.ratio {
				cell, note := ratioCell(rows, r)
				if note != noteNone {
					notes[note] = true
				}
				cells = append(cells, cell)
			}
			cells = append(cells,
				fmt.Sprintf("%.1f", 100*r.RejectedFrac),
				fmt.Sprintf("%.1f", 100*r.FailedFrac),
				FormatMS(r.P50),
				FormatMS(r.P99),
				FormatMS(r.P999),
				formatCPU(r.TargetCPU, r.GeneratorCPU),
				formatEff(r.Efficiency),
			)
			if cols.client {
				cells = append(cells, fmt.Sprintf("%.0f", r.NewConns))
			}
			if cols.fair {
				if r.Class == "" {
					cells = append(cells, fmt.Sprintf("%.2f", r.Jain), fmt.Sprintf("%.1f", 100*r.Starved))
				} else {
					cells = append(cells, "-", "-")
				}
			}
		}
		cells = append(cells, fmt.Sprintf("%d/%d", r.Runs, r.Behind))
		Line(tw, cells...)
	}
	// Flushing into a bytes.Buffer cannot fail.
	_ = tw.Flush()
	if indicative {
		buf.WriteString("* after a target: the generator fell behind its schedule in every run of this row (it could not\n" +
			"  send on time, so the target was offered less than asked at times): the figures are what those runs\n" +
			"  measured, indicative only and counted in no median.\n")
	}
	vs := "vs " + BaselineTarget
	if notes[noteIndicative] {
		fmt.Fprintf(buf, "* after a %s figure: %s's runs at that load all fell behind the generator's schedule, so\n"+
			"  %s has no counted figure there; the ratio is against what those runs measured, indicative only\n"+
			"  (it may be off either way).\n", vs, BaselineTarget, BaselineTarget)
	}
	if notes[noteNoRow] {
		fmt.Fprintf(buf, "- under %s: %s was not run at that load.\n", vs, BaselineTarget)
	}
	if notes[noteNoFigures] {
		fmt.Fprintf(buf, "- under %s: %s's runs at that load all fell behind the generator's schedule and left no figures.\n", vs, BaselineTarget)
	}
	if notes[noteNothing] {
		fmt.Fprintf(buf, "- under %s: %s completed no request in time at that load, so there is no ratio.\n", vs, BaselineTarget)
	}
	return cols
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
	tw := NewTab(buf)
	Line(tw, "target", "x low->high", "offered/s", "steady/s", "react ms", "stable %", "done react ms", "done stable %", "recover ms", "recovered", "runs")
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
		Line(tw, cells...)
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

// FormatMS prints a latency in milliseconds with about three significant
// digits, or "-" for none.
func FormatMS(ms float64) string {
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
