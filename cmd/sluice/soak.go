package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-go/sluice/bench/chaos"
	"github.com/sluice-go/sluice/bench/scenario"
)

// soakCmd runs the soak scenario: each target at 5x of its own capacity
// for a minute (by default), with chaos clients alongside and a handler
// that panics on 1% of its requests, and prints the table and the
// pass/fail lines of its report (scenario.Soak); it fails when a check
// that is enforced fails (the goodput rule is enforced on the sluice
// targets only).
func soakCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	so := &scenario.Soak{
		Multiple:   scenario.DefaultSoakMultiple,
		Duration:   scenario.DefaultSoakDuration,
		PanicEvery: scenario.DefaultPanicEvery,
	}
	f := newSuiteFlags(3*time.Second, 1, "sluice,nethttp", so.Name(), nil)
	f.soak = so
	for i, s := range f.all {
		if s.Name() == so.Name() {
			f.all[i] = so // the scenario the command's flags set
		}
	}
	return runSuiteCommand(ctx, "soak", f, args, stdout, stderr)
}

// formatMix writes a chaos mix as the -chaos flag takes it.
func formatMix(m chaos.Mix) string {
	if m.Total() == 0 {
		return "none"
	}
	var parts []string
	for _, k := range chaos.Kinds() {
		if n := m.Of(k); n > 0 {
			parts = append(parts, k.String()+"="+strconv.Itoa(n))
		}
	}
	return strings.Join(parts, ",")
}

// parseMix reads the -chaos flag: "none", or comma-separated kind=count
// pairs, the kinds left out running no client.
func parseMix(s string) (chaos.Mix, error) {
	var m chaos.Mix
	if strings.TrimSpace(s) == "none" {
		return m, nil
	}
	for _, item := range splitList(s) {
		name, count, ok := strings.Cut(item, "=")
		n, err := strconv.Atoi(strings.TrimSpace(count))
		if !ok || err != nil || n < 0 || n > 1000 {
			return m, fmt.Errorf("%q is not kind=count with a count in [0, 1000]", item)
		}
		var field *int
		switch strings.TrimSpace(name) {
		case "slowloris":
			field = &m.Slowloris
		case "noread":
			field = &m.NoRead
		case "reset":
			field = &m.Reset
		case "garbage":
			field = &m.Garbage
		case "flood":
			field = &m.Flood
		default:
			return m, fmt.Errorf("unknown chaos kind %q (have slowloris, noread, reset, garbage, flood)", name)
		}
		*field = n
	}
	return m, nil
}
