package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/tenant/tenantsim"
)

func TestSimulateList(t *testing.T) {
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"simulate", "-scenario", "list"}, &out, &errOut))
	for _, sc := range tenantsim.Builtin() {
		assert.Contains(t, out.String(), sc.Name+" ")
	}
}

// TestSimulateShortForm runs every built-in scenario in a short form (10 s
// of virtual time each, a second or two of real time in all) and checks
// the outputs, and the targets that hold in the short form as in the long
// one. The long form's figures, and which targets it misses, are in
// docs/benchmarks.md. Under the race detector, two scenarios run for 2 s
// and only the outputs are checked.
func TestSimulateShortForm(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	args := []string{"simulate", "-duration", "10s", "-out", dir, "-progress", "lines"}
	builtin := tenantsim.Builtin()
	if simulateRace {
		// The flood and the outage, 3 s of 10 ms requests (a tenth of
		// the events), from a file.
		builtin = []tenantsim.Scenario{builtin[0].Scaled(3 * time.Second), builtin[6].Scaled(3 * time.Second)}
		for i := range builtin {
			builtin[i].Cost = tenantsim.Duration(10 * time.Millisecond)
		}
		data, err := json.Marshal(builtin)
		require.NoError(t, err)
		file := filepath.Join(dir, "light.json")
		require.NoError(t, os.WriteFile(file, data, 0o644))
		args = []string{"simulate", "-file", file, "-out", dir, "-progress", "lines"}
	}
	err := run(context.Background(), args, &out, &errOut)
	if err != nil {
		assert.Contains(t, err.Error(), "target(s) failed")
	}
	data, rerr := os.ReadFile(filepath.Join(dir, "simulate.json"))
	require.NoError(t, rerr)
	var results []tenantsim.Result
	require.NoError(t, json.Unmarshal(data, &results))
	require.Len(t, results, len(builtin))
	for i, r := range results {
		name := builtin[i].Name
		assert.Equal(t, name, r.Scenario.Name)
		assert.FileExists(t, filepath.Join(dir, "simulate-"+name+".png"))
		assert.Contains(t, out.String(), name+": ")
		assert.Contains(t, errOut.String(), "sluice simulate: "+name+" seed 0: ")
		if simulateRace {
			continue
		}
		mustPass := map[string][]string{
			"flood":          {"success", "blame", "drops-only-over"},
			"alice-bob":      {"success", "drops-only-over"},
			"weighted":       {"share"},
			"off-then-on":    {"hurt", "success"},
			"no-false-drops": {"no-drops", "success"},
			"store-outage":   {"throughput", "resume"},
		}[name]
		for _, tr := range r.Targets {
			if slices.Contains(mustPass, tr.Kind) {
				assert.True(t, tr.Pass, "%s: %s: %s", name, tr.Kind, tr.Text)
			}
		}
	}
	if !simulateRace {
		assert.Regexp(t, `PASS no-drops +0 requests dropped`, out.String())
	}
}

// TestSimulateFailsOnAFailedTarget runs a scenario from a file whose
// target cannot be met: the command says which and fails.
func TestSimulateFailsOnAFailedTarget(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "mine.json")
	require.NoError(t, os.WriteFile(file, []byte(`{
		"name": "mine",
		"duration": "4s",
		"cost": "10ms",
		"tenants": [{"name": "big", "rate": 3}, {"name": "small", "rate": 0.1}],
		"targets": [{"kind": "no-drops"}]
	}`), 0o644))
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"simulate", "-file", file, "-out", dir, "-runs", "2", "-seed", "5", "-progress", "off"}, &out, &errOut)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mine seed 5: no-drops")
	assert.Contains(t, err.Error(), "mine seed 6: no-drops")
	assert.Contains(t, out.String(), "across 2 seeds (5 to 6)")
	assert.Contains(t, out.String(), "FAIL no-drops")
	assert.Empty(t, errOut.String())
	assert.FileExists(t, filepath.Join(dir, "simulate-mine.png"))
}

func TestSimulateBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"simulate", "-scenario", "nope"},
		{"simulate", "-scenario", ""},
		{"simulate", "-runs", "0"},
		{"simulate", "-duration", "-1s"},
		{"simulate", "-progress", "bar"},
		{"simulate", "-file", "/does/not/exist.json"},
		{"simulate", "extra"},
	} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append(args, "-out", t.TempDir()), &out, &errOut)
		assert.Error(t, err, strings.Join(args, " "))
	}
}
