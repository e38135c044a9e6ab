package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/laneadmin"
	"github.com/sluice-go/sluice/lanes"
)

// Knob is a setting the page's controls can change while the server runs
// (with Config.Controls): a gate's limit, the age limit, anything of
// yours. BusyKnob, ConcurrencyKnob and MaxAgeKnob make the usual ones.
type Knob struct {
	// Name labels the knob on the page and in the log; it must be unique
	// among the knobs, and not empty.
	Name string
	// Unit is shown after the value ("workers", "ms").
	Unit string
	// Min and Max bound the values accepted (Max zero: no upper bound);
	// Step is the step the page's input offers (zero: any).
	Min, Max, Step float64
	// Get returns the value in force.
	Get func() float64
	// Set changes it; its error is shown on the page.
	Set func(v float64) error
}

// BusyKnob is the limit of a busy-worker gate, in workers (1 to workers):
// the largest busy count, the deciding worker included, at which a request
// is admitted. workers is the executor's worker count.
func BusyKnob(g *gate.Busy, workers int) Knob {
	w := float64(max(workers, 1))
	return Knob{
		Name: "busy gate limit", Unit: "workers", Min: 1, Max: w, Step: 1,
		Get: func() float64 { return float64(g.Limit()) },
		Set: func(v float64) error {
			return g.SetConfig(gate.BusyConfig{Fraction: v / w})
		},
	}
}

// ConcurrencyKnob is the limit of a concurrency gate, in requests, from 0
// to maxConcurrencyKnob.
func ConcurrencyKnob(c *gate.Concurrency) Knob {
	return Knob{
		Name: "concurrency limit", Unit: "requests", Min: 0, Max: maxConcurrencyKnob, Step: 1,
		Get: func() float64 { return float64(c.Limit()) },
		Set: func(v float64) error { return c.SetLimit(int(v)) },
	}
}

// maxConcurrencyKnob bounds ConcurrencyKnob: any value the int conversion
// takes exactly (a value past an int's range became a negative limit).
const maxConcurrencyKnob = math.MaxInt32

// MaxAgeKnob is a pipeline's age limit (admit.Pipeline.SetMaxAge), in
// milliseconds, from 1 ms to 10 s. The value shown is the last one set
// here, or, until then, the limit the pipeline reported at the start
// (admit.Stats.MaxAge).
func MaxAgeKnob(p *admit.Pipeline) Knob {
	var cur atomic.Int64
	cur.Store(int64(p.Stats().MaxAge))
	return Knob{
		Name: "age limit", Unit: "ms", Min: 1, Max: 10_000, Step: 1,
		Get: func() float64 { return ms(time.Duration(cur.Load())) },
		Set: func(v float64) error {
			d := time.Duration(v * float64(time.Millisecond))
			if err := p.SetMaxAge(d); err != nil {
				return err
			}
			cur.Store(int64(d))
			return nil
		},
	}
}

// KnobState is a knob as the data endpoint shows it: its value in force
// and its bounds.
type KnobState struct {
	// Name and Unit are the Knob's.
	Name string `json:"name"`
	Unit string `json:"unit,omitempty"`
	// Value is what its Get returns now.
	Value float64 `json:"value"`
	// Min, Max and Step are the Knob's (Max and Step zero: none).
	Min  float64 `json:"min"`
	Max  float64 `json:"max,omitempty"`
	Step float64 `json:"step,omitempty"`
}

// LaneState is a lane as the data endpoint shows it, for the controls.
type LaneState struct {
	// Name, Shares and Priority are the lane's lanes.Spec now.
	Name     string `json:"name"`
	Shares   uint32 `json:"shares"`
	Priority int32  `json:"priority"`
}

// change is a request of the page's controls: one of a knob's value, a
// lane's shares, or the tenant enforcement.
type change struct {
	Knob    string   `json:"knob,omitempty"`
	Value   *float64 `json:"value,omitempty"`
	Lane    string   `json:"lane,omitempty"`
	Shares  *uint32  `json:"shares,omitempty"`
	Enforce *bool    `json:"enforce,omitempty"`
}

// maxControlBody bounds a control request's body.
const maxControlBody = 4 << 10

// control applies one change from the page and logs it.
func (d *Dashboard) control(w http.ResponseWriter, r *http.Request) {
	if !d.controls {
		http.Error(w, "the dashboard's controls are off: the program enables them with dashboard.Config.Controls", http.StatusForbidden)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST a JSON change", http.StatusMethodNotAllowed)
		return
	}
	// A JSON body cannot come from a plain HTML form, and a cross-origin
	// script must ask first (CORS preflight), which nothing here answers.
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		http.Error(w, "the change must be sent as application/json", http.StatusUnsupportedMediaType)
		return
	}
	var c change
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxControlBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		http.Error(w, "bad change: "+err.Error(), http.StatusBadRequest)
		return
	}
	what, old, now, err := d.apply(c)
	if err != nil {
		d.log.Warn("dashboard: change refused", "what", what, "err", err, "remote", r.RemoteAddr)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d.log.Info("dashboard: changed from the page", "what", what, "from", old, "to", now,
		"remote", r.RemoteAddr, "user_agent", r.UserAgent())
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"what": what, "from": old, "to": now})
}

// apply makes the change c asks for, and says what it changed.
func (d *Dashboard) apply(c change) (what string, old, now any, err error) {
	set := 0
	for _, b := range []bool{c.Knob != "", c.Lane != "", c.Enforce != nil} {
		if b {
			set++
		}
	}
	if set != 1 {
		return "", nil, nil, errors.New(`dashboard: a change names one knob (with "value"), one lane (with "shares"), or "enforce"`)
	}
	switch {
	case c.Knob != "":
		what = "knob " + c.Knob
		k, ok := d.knobs[c.Knob]
		if !ok {
			return what, nil, nil, fmt.Errorf("dashboard: no knob %q", c.Knob)
		}
		if c.Value == nil {
			return what, nil, nil, errors.New(`dashboard: a knob's change needs a "value"`)
		}
		v := *c.Value
		if math.IsNaN(v) || math.IsInf(v, 0) || v < k.Min || (k.Max != 0 && v > k.Max) {
			return what, nil, nil, fmt.Errorf("dashboard: %v is out of range for %s: [%v, %v]", v, k.Name, k.Min, bound(k.Max))
		}
		if k.Step > 0 {
			v = k.Min + math.Round((v-k.Min)/k.Step)*k.Step
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		old = k.Get()
		if err := k.Set(v); err != nil {
			return what, nil, nil, err
		}
		return what, old, k.Get(), nil
	case c.Lane != "":
		set := d.lanes()
		if set == nil {
			return "lane " + c.Lane + " shares", nil, nil, errors.New("dashboard: no executor: no lanes")
		}
		if c.Shares == nil {
			return "lane " + c.Lane + " shares", nil, nil, fmt.Errorf(`dashboard: a lane's change needs "shares" in [1, %d]`, lanes.MaxShares)
		}
		// The lane admin endpoint's validation and change, so that both
		// accept the same values.
		d.mu.Lock()
		defer d.mu.Unlock()
		return laneadmin.Apply(set, laneadmin.Change{Lane: c.Lane, Shares: new(int64(*c.Shares))})
	default:
		what = "tenant enforcement"
		if d.tracker == nil {
			return what, nil, nil, errors.New("dashboard: no tenant tracker")
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		old = d.tracker.Enforcing()
		d.tracker.SetEnforce(*c.Enforce)
		return what, old, *c.Enforce, nil
	}
}

// bound prints a knob's Max, zero being none.
func bound(v float64) any {
	if v == 0 {
		return "∞"
	}
	return v
}
