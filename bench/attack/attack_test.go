package attack

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSuite is the attack suite's short form: every attack for 1.5 s
// against sluice and net/http in this process, with fewer connections
// than `sluice attack` holds; sluice's probes must do as well as
// net/http's under each, and no attack may find a fault in sluice. Under
// the race detector it runs shorter, for races and leaks alone.
func TestSuite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	opts := Options{Duration: 1500 * time.Millisecond, ProbeRate: 20, Conns: 200, Log: testWriter{t}}
	if raceEnabled {
		opts.Duration, opts.Conns = 500*time.Millisecond, 20
	}
	results, err := Run(ctx, opts)
	require.NoError(t, err)
	vs := Verdicts(results)
	require.Len(t, vs, len(All()))
	if raceEnabled {
		return
	}
	for _, v := range vs {
		assert.True(t, v.OK, "%s: sluice %d/%d probes (%s; found %q), net/http %d/%d", v.Attack,
			v.Sluice.Probe.OK, v.Sluice.Probe.Sent, v.Sluice.Probe.FirstError, v.Sluice.Found,
			v.NetHTTP.Probe.OK, v.NetHTTP.Probe.Sent)
	}
}

// testWriter logs each line written to it in the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// TestVerdicts: sluice does as well as net/http when its probe success is
// within Tolerance or one probe of net/http's, and the attack found
// nothing wrong with it; attacks not run against both get no verdict.
func TestVerdicts(t *testing.T) {
	res := func(attack, target string, sent, ok int, found string) Result {
		return Result{Attack: attack, Target: target, Probe: ProbeResult{Sent: sent, OK: ok}, Found: found}
	}
	vs := Verdicts([]Result{
		res("a", "sluice", 100, 98, ""), res("a", "nethttp", 100, 100, ""),
		res("b", "sluice", 100, 97, ""), res("b", "nethttp", 100, 100, ""),
		res("c", "sluice", 20, 19, ""), res("c", "nethttp", 20, 20, ""),
		res("d", "sluice", 20, 20, "a fault"), res("d", "nethttp", 20, 20, ""),
		res("e", "sluice", 20, 20, ""),
		res("f", "nethttp", 10, 0, ""), res("f", "sluice", 10, 10, ""),
	})
	got := map[string]bool{}
	for _, v := range vs {
		got[v.Attack] = v.OK
	}
	assert.Equal(t, map[string]bool{"a": true, "b": false, "c": true, "d": false, "f": true}, got)
}

// TestByName: names select attacks in the order named, and an unknown
// one is an error that lists the known.
func TestByName(t *testing.T) {
	all, err := ByName()
	require.NoError(t, err)
	assert.Len(t, all, len(All()))
	two, err := ByName("rapid-reset", "obs-fold")
	require.NoError(t, err)
	assert.Equal(t, "rapid-reset", two[0].Name)
	assert.Equal(t, "obs-fold", two[1].Name)
	_, err = ByName("nope")
	assert.ErrorContains(t, err, "known: obs-fold, chunk-overflow")
}
