package metrics

import (
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluice-go/sluice/admit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a settable monotonic clock, in nanoseconds.
type fakeClock struct{ t atomic.Int64 }

func (c *fakeClock) now() int64            { return c.t.Load() }
func (c *fakeClock) add(d time.Duration)   { c.t.Add(int64(d)) }
func newClock(at time.Duration) *fakeClock { c := &fakeClock{}; c.t.Store(int64(at)); return c }

// switchPolicy admits while open, with its refusal otherwise.
type switchPolicy struct {
	open    atomic.Bool
	refusal *admit.Refusal
}

func newSwitch(reason string, status int, open bool) *switchPolicy {
	p := &switchPolicy{refusal: &admit.Refusal{Reason: reason, Status: status}}
	p.open.Store(open)
	return p
}

func (p *switchPolicy) Admit(*admit.Attempt) *admit.Refusal {
	if p.open.Load() {
		return nil
	}
	return p.refusal
}

func (p *switchPolicy) Done(*admit.Attempt, admit.Outcome) {}

// gather collects c through a pedantic registry (which checks every metric
// against its descriptor) and returns the families by name.
func gather(t *testing.T, c prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// metric returns the metric of family name whose labels are exactly
// labels ("k=v" pairs; the family's type is checked against want), or
// fails.
func metric(t *testing.T, mfs map[string]*dto.MetricFamily, name string, want dto.MetricType, labels ...string) *dto.Metric {
	t.Helper()
	mf := mfs[name]
	require.NotNil(t, mf, "no family %s", name)
	require.Equal(t, want, mf.GetType(), "type of %s", name)
	sort.Strings(labels)
	var seen []string
	for _, m := range mf.GetMetric() {
		var got []string
		for _, lp := range m.GetLabel() {
			got = append(got, lp.GetName()+"="+lp.GetValue())
		}
		sort.Strings(got)
		if slices.Equal(got, labels) {
			return m
		}
		seen = append(seen, strings.Join(got, ","))
	}
	require.Failf(t, "no metric", "%s{%s}; there are: %v", name, strings.Join(labels, ","), seen)
	return nil
}

// value returns the value of a counter or gauge.
func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	mf := mfs[name]
	require.NotNil(t, mf, "no family %s", name)
	m := metric(t, mfs, name, mf.GetType(), labels...)
	switch mf.GetType() {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	}
	require.Failf(t, "not a counter or gauge", "%s is a %v", name, mf.GetType())
	return 0
}

// bucket returns a histogram's cumulative count at upper bound le.
func bucket(t *testing.T, h *dto.Histogram, le float64) uint64 {
	t.Helper()
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == le {
			return b.GetCumulativeCount()
		}
	}
	require.Failf(t, "no bucket", "le=%v", le)
	return 0
}

// promtool runs `promtool check metrics` on exposition, failing the test
// with its complaints. Without promtool the test is skipped, or fails
// under CI=true.
func promtool(t *testing.T, exposition string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		const install = "promtool not found: install it with `apt-get install -y prometheus`"
		if os.Getenv("CI") == "true" {
			t.Fatal(install + " (CI=true: the lint must run)")
		}
		t.Skip(install)
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(exposition)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool check metrics:\n%s", out)
	require.Empty(t, strings.TrimSpace(string(out)), "promtool check metrics has complaints")
}
