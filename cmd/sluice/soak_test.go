package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/chaos"
	"github.com/sluice-go/sluice/bench/report"
	"github.com/sluice-go/sluice/bench/scenario"
)

func TestSoakBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"soak", "-duration", "0s"},
		{"soak", "-duration", "1500ms"},
		{"soak", "-duration", "2h"},
		{"soak", "-x", "0"},
		{"soak", "-settle", "2m"},
		{"soak", "-settle", "-1s"},
		{"soak", "-chaos", "nope=1"},
		{"soak", "-chaos", "flood"},
		{"soak", "-chaos", "flood=-1"},
		{"soak", "-scenarios", "sweep"},
		{"soak", "-targets", "apache"},
		{"bench", "-scenarios", "soak", "-soak-duration", "0s"},
	} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append(args, "-out", t.TempDir()), &out, &errOut)
		assert.Error(t, err, strings.Join(args, " "))
	}
}

func TestParseMix(t *testing.T) {
	m, err := parseMix(formatMix(scenario.DefaultChaosMix()))
	require.NoError(t, err)
	assert.Equal(t, scenario.DefaultChaosMix(), m)
	m, err = parseMix("none")
	require.NoError(t, err)
	assert.Zero(t, m.Total())
	assert.Equal(t, "none", formatMix(m))
	m, err = parseMix(" reset=2, flood=0 ,garbage=1")
	require.NoError(t, err)
	assert.Equal(t, chaos.Mix{Reset: 2, Garbage: 1}, m)
	assert.Equal(t, "reset=2,garbage=1", formatMix(m))
}

// TestSoakCommandFailsOnItsChecks runs a one-second soak of sluice at a
// fifth of its capacity: everything passes but the goodput rule (0.2 of C
// is short of 0.7), which fails the command.
func TestSoakCommandFailsOnItsChecks(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"soak",
		"-duration", "1s", "-x", "0.2", "-targets", "sluice", "-chaos", "reset=1,flood=1,noread=1", "-panic-every", "10",
		"-calibrate", "200ms", "-warmup", "50ms", "-cpu", "100us", "-db", "1ms", "-out", dir, "-progress", "off"}, &out, &errOut)
	require.Error(t, err)
	assert.Regexp(t, `^soak: 1 check\(s\) failed:\n  sluice: goodput: every 1s at least 0\.70 of C`, err.Error())
	s := out.String()
	assert.Contains(t, s, "soak, shape io (cpu 100µs, db 1ms): 0.2x of C for 1s")
	assert.Contains(t, s, "with 3 chaos clients (1 noread, 1 reset, 1 flood), and a handler that panics on every 10th request (10%)")
	assert.Contains(t, s, "FAIL: goodput\n")
	assert.Contains(t, s, "  PASS clean exit: status 0")
	assert.Contains(t, s, "  PASS up: read at all 2 points")
	assert.Contains(t, s, "  chaos: noread ")

	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	require.NoError(t, err)
	var doc report.Document
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Len(t, doc.Report.Samples, 1)
	smp := doc.Report.Samples[0]
	d, err := bench.DetailOf[scenario.SoakDetail](&smp)
	require.NoError(t, err)
	require.NotNil(t, d)
	assert.Len(t, d.Checks, 7)
	assert.Equal(t, "go run ./cmd/sluice soak -duration 1s -x 0.2 -targets sluice -chaos reset=1,flood=1,noread=1 -panic-every 10 "+
		"-calibrate 200ms -warmup 50ms -cpu 100us -db 1ms -out "+dir+" -progress off", doc.Report.Command)

	// The report command shows the soak again, without failing.
	out.Reset()
	require.NoError(t, run(context.Background(), []string{"report", filepath.Join(dir, "report.json")}, &out, &errOut))
	assert.Contains(t, out.String(), "FAIL goodput: every 1s")
}
