package tenant

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func equalWeights(string) float64 { return 1 }

func TestWaterFill(t *testing.T) {
	// Under the capacity: nobody is dropped.
	assert.Empty(t, waterFill(map[string]float64{"a": 0.3, "b": 0.6}, equalWeights, 1))

	// a needs 0.2, under the first level (1/3): met. 0.8 is left for b
	// and c: 0.4 each; b wants 0.5 and c 1.0, both above it.
	d := waterFill(map[string]float64{"a": 0.2, "b": 0.5, "c": 1.0}, equalWeights, 1)
	require.Len(t, d, 2)
	assert.InDelta(t, 1-0.4/0.5, d["b"], 1e-12)
	assert.InDelta(t, 1-0.4/1.0, d["c"], 1e-12)

	// The flood: ten light tenants at 0.05 each, a heavy one at 5.
	flood := map[string]float64{"heavy": 5}
	for _, n := range []string{"l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7", "l8", "l9"} {
		flood[n] = 0.05
	}
	d = waterFill(flood, equalWeights, 1)
	require.Len(t, d, 1, "only the heavy tenant is dropped")
	assert.InDelta(t, 1-0.5/5, d["heavy"], 1e-12, "it gets what the light ones leave: 0.5")

	// Weights: a weighs 3, b 1, both want the whole capacity: a gets
	// 0.75, b 0.25.
	w := func(n string) float64 {
		if n == "a" {
			return 3
		}
		return 1
	}
	d = waterFill(map[string]float64{"a": 1, "b": 1}, w, 1)
	assert.InDelta(t, 0.25, d["a"], 1e-12)
	assert.InDelta(t, 0.75, d["b"], 1e-12)

	// A favoured tenant that asks little is met; the rest share what it
	// leaves by their weights.
	d = waterFill(map[string]float64{"a": 0.1, "b": 2, "c": 2}, w, 1)
	assert.NotContains(t, d, "a")
	assert.InDelta(t, 1-0.45/2, d["b"], 1e-12)
	assert.InDelta(t, 1-0.45/2, d["c"], 1e-12)
}

func TestPredictionStepAndRamp(t *testing.T) {
	c, err := NewController(ControllerConfig{})
	require.NoError(t, err)
	// A step from 1 to 2: the first prediction after it covers most of
	// the step, the trend overshoots by little, and the prediction
	// settles on the new level.
	var d Decision
	for range 5 {
		c.predict(map[string]float64{"a": 1}, &d)
	}
	assert.InDelta(t, 1, c.hist["a"].next(), 1e-9)
	var preds []float64
	for range 15 {
		c.predict(map[string]float64{"a": 2}, &d)
		preds = append(preds, c.hist["a"].next())
	}
	assert.GreaterOrEqual(t, preds[0], 1.7, "one period after the step: %v", preds)
	assert.LessOrEqual(t, slices.Max(preds), 2.3, "overshoot: %v", preds)
	assert.InDelta(t, 2, preds[9], 0.1, "ten periods after: %v", preds)
	assert.InDelta(t, 2, preds[14], 0.02, "settled: %v", preds)

	// A ramp: with a trend (Beta), the trend is learned, so the error of
	// the predictions falls to almost nothing.
	c2, err := NewController(ControllerConfig{Beta: 0.3})
	require.NoError(t, err)
	for i := range 30 {
		d = Decision{}
		c2.predict(map[string]float64{"r": 1 + 0.1*float64(i)}, &d)
	}
	assert.Less(t, d.PredictionError, 0.01, "relative error on a ramp, once learned")
	assert.InDelta(t, 1+0.1*30, c2.hist["r"].next(), 0.05)
}

// report builds one server's report: per tenant, admitted and rejected
// requests with blame per admitted request.
func report(server string, closed time.Duration, tenants ...Usage) Report {
	for i := range tenants {
		u := &tenants[i]
		u.Requests = u.Admitted + u.Rejected + u.Dropped
	}
	return Report{Server: server, Seq: 1, Period: time.Second, Closed: closed, Tenants: tenants}
}

func TestControllerNoFalseDrops(t *testing.T) {
	c, err := NewController(ControllerConfig{})
	require.NoError(t, err)
	// Heavy use, some blame, but nothing rejected: not overloaded.
	for range 5 {
		tb := c.Step([]Report{report("s1", 200*time.Millisecond,
			Usage{Tenant: "big", Admitted: 9000, Blame: 190 * time.Millisecond},
			Usage{Tenant: "small", Admitted: 100, Blame: 10 * time.Millisecond})})
		assert.Empty(t, tb.Drops)
		assert.Equal(t, "idle", c.Last().State)
	}
}

func TestControllerFloodThenDecay(t *testing.T) {
	c, err := NewController(ControllerConfig{})
	require.NoError(t, err)
	// The fleet admits 1000/s, rejects 5000/s. Heavy: 90% of the
	// blame, 900 admitted of 5400; each light: 1%, 10 admitted of 60.
	flood := func() []Report {
		us := []Usage{{Tenant: "heavy", Admitted: 900, Rejected: 4500, Blame: 900 * time.Millisecond}}
		for _, n := range []string{"l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7", "l8", "l9"} {
			us = append(us, Usage{Tenant: n, Admitted: 10, Rejected: 50, Blame: 10 * time.Millisecond})
		}
		return []Report{report("s1", time.Second, us...)}
	}
	tb := c.Step(flood())
	assert.Equal(t, "overloaded", c.Last().State)
	require.Len(t, tb.Drops, 1, "only the heavy tenant: %v", tb.Drops)
	// Its demand is 5.4 (0.9 of the blame × 6 offered per admitted), the
	// light ones' 0.06 each: it gets Utilisation (0.97) - 0.6 = 0.37.
	assert.InDelta(t, 1-0.37/5.4, tb.Drops["heavy"], 1e-9)
	var blameShare float64
	for _, td := range c.Last().Tenants {
		if td.Tenant == "heavy" {
			blameShare = td.BlameShare
		}
	}
	assert.InDelta(t, 0.9, blameShare, 1e-9)
	assert.Equal(t, uint64(1), tb.Version)

	// The load goes: nothing rejected, gates rarely closed: the drops
	// decay to nothing.
	quiet := []Report{report("s1", 10*time.Millisecond,
		Usage{Tenant: "heavy", Admitted: 100, Blame: 5 * time.Millisecond},
		Usage{Tenant: "l0", Admitted: 10, Blame: time.Millisecond})}
	prev := tb.Drops["heavy"]
	for i := 0; ; i++ {
		require.Less(t, i, 10, "drops must decay to zero")
		tb = c.Step(quiet)
		if len(tb.Drops) == 0 {
			break
		}
		assert.Equal(t, "decaying", c.Last().State)
		assert.Less(t, tb.Drops["heavy"], prev)
		prev = tb.Drops["heavy"]
	}
}

func TestControllerHoldsWhileFull(t *testing.T) {
	c, err := NewController(ControllerConfig{})
	require.NoError(t, err)
	tb := c.Step([]Report{report("s1", time.Second,
		Usage{Tenant: "heavy", Admitted: 500, Rejected: 1500, Blame: 500 * time.Millisecond},
		Usage{Tenant: "light", Admitted: 500, Rejected: 0, Blame: 500 * time.Millisecond})})
	want := tb.Drops["heavy"]
	require.Positive(t, want)
	// The drops work: nothing rejected, but the gates are closed half of
	// the time: the drops are kept.
	for range 3 {
		tb = c.Step([]Report{report("s1", 500*time.Millisecond,
			Usage{Tenant: "heavy", Admitted: 500, Dropped: 1500, Blame: 250 * time.Millisecond},
			Usage{Tenant: "light", Admitted: 500, Blame: 250 * time.Millisecond})})
		assert.Equal(t, "full", c.Last().State)
		assert.InDelta(t, want, tb.Drops["heavy"], 0.05)
	}
}

// The drops work so well that the fleet is neither overloaded nor full
// (no rejection, gates closed a tenth of the time): while the heavy tenant
// still offers its flood, its drop stays what its demand, at the cost
// measured while saturated, asks; it decays once the flood ends. Halving
// it instead brought the overload back every third period (live, with the
// age limit alone).
func TestControllerKeepsTheDropsTheDemandStillAsks(t *testing.T) {
	c, err := NewController(ControllerConfig{})
	require.NoError(t, err)
	lights := []string{"l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7", "l8", "l9"}
	us := []Usage{{Tenant: "heavy", Admitted: 900, Rejected: 4500, Blame: 900 * time.Millisecond}}
	for _, n := range lights {
		us = append(us, Usage{Tenant: n, Admitted: 10, Rejected: 50, Blame: 10 * time.Millisecond})
	}
	tb := c.Step([]Report{report("s1", time.Second, us...)})
	want := tb.Drops["heavy"]
	require.Positive(t, want)

	// The drops in force: heavy offers 5400 a second as before, 5016
	// dropped; the light tenants are served in full.
	calm := func(heavy, dropped int64) []Report {
		us := []Usage{{Tenant: "heavy", Admitted: heavy - dropped, Dropped: dropped, Blame: 10 * time.Millisecond}}
		for _, n := range lights {
			us = append(us, Usage{Tenant: n, Admitted: 60, Blame: time.Millisecond})
		}
		return []Report{report("s1", 100*time.Millisecond, us...)}
	}
	for range 3 {
		tb = c.Step(calm(5400, 5400-int64(float64(5400)*(1-want))))
		assert.Equal(t, "decaying", c.Last().State)
		assert.InDelta(t, want, tb.Drops["heavy"], 0.01, "the flood goes on: its drop stays")
	}
	// The flood ends: heavy offers 100 a second; its drop decays away.
	for i := 0; len(tb.Drops) > 0; i++ {
		require.Less(t, i, 10, "drops must decay to zero")
		prev := tb.Drops["heavy"]
		tb = c.Step(calm(100, int64(100*prev)))
		assert.Less(t, tb.Drops["heavy"], prev)
	}
}

// floodNotSaturated steps a new controller through one overloaded period
// in which the gates were closed 60% of the time, so not saturated: heavy
// offers 1000 requests, 90 admitted, with 0.9 of the blame (a demand of
// 10), and each of ten light tenants 11, with 0.01 (a demand of 0.011).
// It returns the controller, the light tenants' names and the table:
// heavy's drop is 1 - (0.97 - 0.11) / 10.
func floodNotSaturated(t *testing.T) (*Controller, []string, Table) {
	t.Helper()
	c, err := NewController(ControllerConfig{})
	require.NoError(t, err)
	lights := []string{"l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7", "l8", "l9"}
	us := []Usage{{Tenant: "heavy", Admitted: 90, Rejected: 450, Dropped: 460, Blame: 540 * time.Millisecond}}
	for _, n := range lights {
		us = append(us, Usage{Tenant: n, Admitted: 10, Rejected: 1, Blame: 6 * time.Millisecond})
	}
	tb := c.Step([]Report{report("s1", 600*time.Millisecond, us...)})
	require.Equal(t, "overloaded", c.Last().State)
	require.InDelta(t, 1-0.86/10, tb.Drops["heavy"], 1e-9)
	return c, lights, tb
}

// A server protected by its age limit alone is seldom saturated (its gates
// closed most of the period), so the cost of a request is never measured
// so: the heavy tenant is priced by its share of the blame. When the
// drops then keep the server under its capacity so well that a period
// counts no blame at all, the heavy tenant, still offering its flood,
// keeps the drop its requests ask at that price; halving it (as for a
// tenant never priced) let the flood back in the next period (live, one
// server: a drop of 0.92 fell to 0.46). Once the flood ends, the drop
// decays away.
func TestControllerKeepsTheDropsOfATenantNeverSaturated(t *testing.T) {
	c, lights, tb := floodNotSaturated(t)
	want := tb.Drops["heavy"]

	// Nothing rejected, no gate closed: no blame in the period.
	calm := func(heavy int64, drop float64) []Report {
		dropped := int64(float64(heavy) * drop)
		us := []Usage{{Tenant: "heavy", Admitted: heavy - dropped, Dropped: dropped}}
		for _, n := range lights {
			us = append(us, Usage{Tenant: n, Admitted: 10})
		}
		return []Report{report("s1", 0, us...)}
	}
	for range 3 {
		tb = c.Step(calm(1000, want))
		require.Equal(t, "decaying", c.Last().State)
		assert.InDelta(t, want, tb.Drops["heavy"], 0.02, "the flood goes on: its drop stays")
	}
	// The flood ends: its drop decays away.
	for i := 0; len(tb.Drops) > 0; i++ {
		require.Less(t, i, 10, "drops must decay to zero")
		prev := tb.Drops["heavy"]
		tb = c.Step(calm(20, prev))
		assert.Less(t, tb.Drops["heavy"], prev)
	}
}

// A fleet under its capacity serves less work than its capacity, so its
// blame, shared out as the whole capacity, prices every request too high.
// A decaying period therefore prices a tenant never measured while
// saturated at what its share of the blame gave it when the fleet was
// last overloaded: a flood that shrinks to 0.6 of its size gets the drop
// the smaller flood asks (0.855), where the period's own share priced it
// almost twice as high and kept the drop of the whole flood (0.914).
func TestControllerDecayPricesAtTheOverloadedShare(t *testing.T) {
	c, lights, tb := floodNotSaturated(t)

	// The flood shrinks to 600 a second; the fleet, under its capacity,
	// has its gates closed a fifth of the time, nearly all of it blamed
	// on heavy (whose share would price it at 10.96).
	us := []Usage{{Tenant: "heavy", Admitted: 52, Dropped: 548, Blame: 190 * time.Millisecond}}
	for _, n := range lights {
		us = append(us, Usage{Tenant: n, Admitted: 10, Blame: time.Millisecond})
	}
	tb = c.Step([]Report{report("s1", 200*time.Millisecond, us...)})
	require.Equal(t, "decaying", c.Last().State)
	// At the overloaded period's prices: heavy 6, the lights 0.1 in all;
	// heavy's share is 0.97 - 0.1.
	assert.InDelta(t, 1-0.87/6, tb.Drops["heavy"], 1e-9)
}

func TestControllerConfigErrors(t *testing.T) {
	_, err := NewController(ControllerConfig{Hold: 2})
	require.ErrorContains(t, err, "ControllerConfig.Hold 2")
	_, err = NewController(ControllerConfig{Weights: map[string]float64{"a": -1}})
	require.ErrorContains(t, err, `Weights["a"]`)
}
