package bench

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluice-go/sluice/bench/load"
)

// Percentiles are latencies of the OK answers, in milliseconds.
type Percentiles struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

// Rates are a run's outcomes per second of its sending window.
type Rates struct {
	Offered  float64 `json:"offered"`
	Goodput  float64 `json:"goodput"`  // 2xx within the deadline
	Rejected float64 `json:"rejected"` // 503 marked not started
	Failed   float64 `json:"failed"`   // anything else, deadline included
}

// StepInfo describes the profile of a load that steps up and back down,
// in multiples of the target's capacity and offsets from the start of the
// run.
type StepInfo struct {
	Low  float64       `json:"low"`
	High float64       `json:"high"`
	Up   time.Duration `json:"up"`   // when the load steps up
	Down time.Duration `json:"down"` // when it steps back down
	End  time.Duration `json:"end"`  // the end of the sending window
}

// Sample is one run of one target at one offered load: the unit a report
// aggregates (medians over repeats) and plots.
type Sample struct {
	Scenario string `json:"scenario"`
	// Shape names the handler's shape (for example "cpu", "io",
	// "blocking"); Handler gives its parameters.
	Shape   string      `json:"shape"`
	Handler HandlerSpec `json:"handler"`
	Target  string      `json:"target"`
	Repeat  int         `json:"repeat"`
	// Capacity is C, the target's goodput when saturated, measured in
	// the same repeat just before (requests per second).
	Capacity float64 `json:"capacity"`
	// CapacityCPU is the CPU time the target used per second while its
	// capacity was measured: Capacity/CapacityCPU is its goodput per
	// CPU-second at capacity, to compare with Rates.Goodput/TargetCPU.
	CapacityCPU float64 `json:"capacity_cpu"`
	// Multiple is the offered load as a multiple of Capacity (for a step,
	// the high one).
	Multiple float64 `json:"multiple"`
	Rates    Rates   `json:"rates"`
	// Requests is the number of requests scheduled.
	Requests int64 `json:"requests"`
	// Client is the generator's client mode (load.ClientMode's name) when the
	// suite named modes (SuiteConfig.ClientModes); empty otherwise, which
	// is "reconnect".
	Client string `json:"client,omitempty"`
	// NewConns is the TCP connections the generator opened per second of
	// the sending window (load.Result.Dials).
	NewConns float64 `json:"new_conns"`
	// Clients is the number of clients with a connection each
	// (SuiteConfig.Clients), 0 for the pooled generator; Jain and Starved
	// are then load.Result.Fairness's: Jain's index over the clients' OK
	// answers, and the share of clients that got none.
	Clients int     `json:"clients,omitempty"`
	Jain    float64 `json:"jain,omitempty"`
	Starved float64 `json:"starved,omitempty"`
	// Latency summarises the OK answers of all classes.
	Latency Percentiles `json:"latency_ms"`
	// Classes holds the rates and latencies per request class, when the
	// scenario has more than one (mix: "kept", "new").
	Classes map[string]ClassSample `json:"classes,omitempty"`
	// Behind reports a run whose generator could not keep its schedule;
	// it does not count (reports show it and leave it out of medians).
	Behind bool          `json:"behind"`
	MaxLag time.Duration `json:"max_lag"`
	// Late is the number of requests the generator started more than its
	// lag limit after their schedule.
	Late int64 `json:"late"`
	// TargetCPU and GeneratorCPU are the CPU time the target's process
	// and the load generator's (this process) used during the run, in
	// CPU-seconds per second of the run (the sending window and the wait
	// for the last answers): on a machine where both share the CPUs, what
	// the generator takes is not available to the target.
	TargetCPU    float64 `json:"target_cpu"`
	GeneratorCPU float64 `json:"generator_cpu"`
	// Server holds the target's own counters at the end of the run, as
	// it reported them (the sluice server's admission Stats: rejections
	// by reason, queue waits); absent for targets without any.
	Server json.RawMessage `json:"server,omitempty"`
	// Step is the profile of a load that steps up and back down (the
	// step and shed scenarios), which the step response reads from
	// Series (report.StepMetrics); Series is the outcome per bucket, for
	// a scenario that counts one.
	Step   *StepInfo     `json:"step,omitempty"`
	Series []load.Bucket `json:"series,omitempty"`
	// Placement is where a sluice target's workers ran (pinned or
	// floating, and why), as its process reported it; nil for the others.
	Placement *Placement `json:"placement,omitempty"`
	// Quota is the CPU quota the target ran in (ChildSpec.Quota), and
	// Throttled what it did to the target; nil without one.
	Quota     *Quota     `json:"quota,omitempty"`
	Throttled *Throttled `json:"throttled,omitempty"`
	// Detail is what the scenario recorded beyond these fields, as JSON
	// of a type of its own (SetDetail, DetailOf); its report reads it.
	Detail json.RawMessage `json:"detail,omitempty"`
}

// UnmarshalJSON decodes a sample. Reports written before a scenario kept
// its own figures in Detail hold them in a field named after the scenario
// ("noisy", "stray", "cluster", "shed", "soak", "tenants", "lanes"): that
// field becomes the sample's Detail, so that the scenario's report reads
// such a sample as one written now.
func (s *Sample) UnmarshalJSON(b []byte) error {
	type sample Sample // the fields, without this method
	if err := json.Unmarshal(b, (*sample)(s)); err != nil {
		return err
	}
	if len(s.Detail) > 0 || !detailOnceNamed(s.Scenario) {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return err
	}
	if d := fields[s.Scenario]; len(d) > 0 && string(d) != "null" {
		s.Detail = d
	}
	return nil
}

// detailOnceNamed reports whether reports written before Sample.Detail
// hold the scenario's figures in a field named after it.
func detailOnceNamed(scenario string) bool {
	switch scenario {
	case "noisy", "stray", "cluster", "shed", "soak", "tenants", "lanes":
		return true
	}
	return false
}

// SetDetail stores v, as JSON, as the sample's Detail.
func (s *Sample) SetDetail(v any) error {
	js, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("bench: %s sample's detail: %w", s.Scenario, err)
	}
	s.Detail = js
	return nil
}

// DetailOf decodes s's Detail as a T; nil, with no error, when s has none.
func DetailOf[T any](s *Sample) (*T, error) {
	if len(s.Detail) == 0 {
		return nil, nil
	}
	v := new(T)
	if err := json.Unmarshal(s.Detail, v); err != nil {
		return nil, fmt.Errorf("bench: %s sample's detail: %w", s.Scenario, err)
	}
	return v, nil
}

// ClassSample is one class's part of a Sample.
type ClassSample struct {
	Rates   Rates       `json:"rates"`
	Latency Percentiles `json:"latency_ms"`
	// Series is the class's outcomes per bucket, for a scenario that
	// counts them (tenants).
	Series []load.Bucket `json:"series,omitempty"`
}

// HandlerSpec is the weather handler's shape, as the targets serve it.
type HandlerSpec struct {
	CPU      time.Duration `json:"cpu"`
	DB       time.Duration `json:"db"`
	Blocking bool          `json:"blocking"`
}

// Report is a whole benchmark run: how it was run and every sample.
type Report struct {
	// Command is the command line that reproduces the run.
	Command string    `json:"command"`
	Started time.Time `json:"started"`
	// Machine describes where it ran (CPUs, GOMAXPROCS, Go version).
	Machine  string        `json:"machine"`
	Deadline time.Duration `json:"deadline"`
	Repeats  int           `json:"repeats"`
	// SpinRate is the rate of the Spinner every target computed with
	// (SuiteConfig.SpinRate); zero when each measured its own.
	SpinRate float64 `json:"spin_rate,omitempty"`
	// TargetCPUs and GeneratorCPUs are the CPUs the targets and the load
	// generator were restricted to (SuiteConfig); empty when they shared
	// the machine.
	TargetCPUs    []int    `json:"target_cpus,omitempty"`
	GeneratorCPUs []int    `json:"generator_cpus,omitempty"`
	Samples       []Sample `json:"samples"`
}
