package report

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
)

func TestPlainSummaryOneLinePerLoad(t *testing.T) {
	lines := PlainSummary(behindBaselineReport(), tabled)
	require.Len(t, lines, 4, "a heading of two lines, then 2x and 5x")
	assert.Equal(t, "In plain words (sweep, shape cpu): each server was offered a multiple of its own capacity C;", lines[0])
	assert.Equal(t, `"in time" = a 2xx answer within the 1s deadline, "refused" = an immediate 503, "failed" = late or in error.`, lines[1])
	// sluice at 2x: 990/s, per run 0.98 and 1.00 of C, 50% rejected, 1% and
	// 0% failed; net/http: 650/s, per run 70% and 65% failed.
	assert.Equal(t, "  At 2x: sluice completed 990 requests a second in time (0.99 of its capacity), with 50% refused "+
		"and 0.5% failed; net/http completed 650 in time (0.65 of its capacity), with 68% failed.", lines[2])
	// sluice at 5x: 81% and 81.2% rejected, 1% and 0.4% failed.
	assert.Equal(t, "  At 5x: sluice completed 910 requests a second in time (0.91 of its capacity), with 81% refused "+
		"and 0.7% failed; net/http completed about 450 in time (indicative only: the load generator fell behind "+
		"its schedule in every run).", lines[3])
}

func TestPlainSummaryOtherTargetsAndGaps(t *testing.T) {
	sw := "sweep"
	rep := &bench.Report{Samples: []bench.Sample{
		run(sw, "semaphore", 0, 100, 1, 50, 0, 5),   // 50% failed
		run(sw, "sluice", 0, 1000, 1, 1000, 0, 2),   // nothing lost
		run(sw, "sluice", 0, 1000, 3, 950, 2050, 2), // 68.3% rejected
	}}
	lines := PlainSummary(rep, tabled)
	require.Len(t, lines, 4)
	assert.Contains(t, lines[0], "(sweep, shape cpu)")
	assert.Contains(t, lines[1], "within the client's deadline", "the report has no deadline")
	assert.Equal(t, "  At 1x: semaphore completed 50 requests a second in time (0.50 of its capacity), with 50% failed; "+
		"sluice completed 1000 in time (1.00 of its capacity), none refused or failed.", lines[2],
		"the targets in the order they first appear")
	assert.Equal(t, "  At 3x: semaphore was not run at this load; "+
		"sluice completed 950 in time (0.95 of its capacity), with 68% refused.", lines[3])
}

func TestPlainSummaryPicksTheMainScenario(t *testing.T) {
	// No sweep: the mix, its whole sample only (not its classes); the
	// step is never summarised.
	rep := &bench.Report{Samples: []bench.Sample{
		stepSample("sluice", 0, 1, 0),
		mixRun("sluice", 0, 600, 300),
	}}
	lines := PlainSummary(rep, tabled)
	require.Len(t, lines, 3)
	assert.Contains(t, lines[0], "(mix, shape cpu)")
	assert.Contains(t, lines[2], "At 2x: sluice completed 900 requests a second in time")

	// Shapes: one line per shape and load, the shape named.
	io := run("shapes", "sluice", 0, 1000, 2, 990, 1010, 11)
	io.Shape = "io"
	rep = &bench.Report{Samples: []bench.Sample{run("shapes", "sluice", 0, 1000, 2, 990, 1010, 1), io}}
	lines = PlainSummary(rep, tabled)
	require.Len(t, lines, 4)
	assert.Equal(t, "In plain words (shapes): each server was offered a multiple of its own capacity C;", lines[0])
	assert.Contains(t, lines[2], "At 2x (shape cpu): sluice")
	assert.Contains(t, lines[3], "At 2x (shape io): sluice")

	assert.Nil(t, PlainSummary(nil, tabled))
	assert.Nil(t, PlainSummary(&bench.Report{}, tabled))
	assert.Nil(t, PlainSummary(stepReport(), tabled), "a step alone has no load to speak of")
}

func TestPlainSummaryBehindWithoutFigures(t *testing.T) {
	// A row with no kept run and no indicative figures is not something
	// Summarize makes; the wording still covers it.
	load := []Row{{Target: "nethttp", Multiple: 5, Behind: 2}}
	assert.Equal(t, "net/http has no figures (the load generator fell behind its schedule in every run)",
		plainTarget(load, "nethttp", true))
}
