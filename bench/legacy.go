package bench

import (
	"context"
	"errors"
	"fmt"
)

// The scenarios whose run still lives in this package, with their
// settings in SuiteConfig (Lanes), until it
// moves to a file of its own in package bench/scenario. Package scenario
// lists them through BuiltIn.

// BuiltIn returns the scenario of this package with that name: lanes.
func BuiltIn(name string) (Scenario, bool) {
	switch name {
	case ScenarioLanes:
		return builtIn(name), true
	}
	return nil, false
}

// builtIn is a scenario of this package, by name.
type builtIn string

func (b builtIn) Name() string { return string(b) }

func (b builtIn) Check(c *SuiteConfig) error {
	if c.TLS || c.NewConns {
		return fmt.Errorf("bench: TLS and NewConns do not apply to the %s scenario, which starts its servers its own way", b)
	}
	if c.Clients != 0 {
		return fmt.Errorf("bench: Clients does not apply to the %s scenario", b)
	}
	switch b {
	case ScenarioLanes:
		return c.Lanes.defaults()
	}
	return errors.New("bench: unknown scenario " + string(b))
}

func (b builtIn) Points(c *SuiteConfig) []Point {
	var ps []Point
	switch b {
	case ScenarioLanes:
		sh := c.Lanes.shape()
		for _, part := range LanesParts {
			ps = append(ps, Point{Shape: sh, Spec: sh.Spec, Multiple: c.Lanes.Multiple, Part: part})
		}
	}
	return ps
}

func (b builtIn) Run(ctx context.Context, t *Trial) (*Sample, error) {
	cfg, p := t.Suite, t.Point
	switch b {
	case ScenarioLanes:
		return cfg.lanes(ctx, t.Target, p, t.Capacity, t.Repeat, t.Index)
	}
	return nil, errors.New("bench: unknown scenario " + string(b))
}

// RunsOn leaves the lanes scenario's parts that need lanes off the
// targets without them.
func (b builtIn) RunsOn(p Point, target string) bool {
	return b != ScenarioLanes || lanesRunsOn(p, target)
}
