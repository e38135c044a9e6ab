package bench

import (
	"context"
	"errors"
	"fmt"
)

// The scenarios whose run still lives in this package, with their
// settings in SuiteConfig (Tenants, Lanes), until each
// moves to a file of its own in package bench/scenario. Package scenario
// lists them through BuiltIn.

// BuiltIn returns the scenario of this package with that name: tenants
// or lanes.
func BuiltIn(name string) (Scenario, bool) {
	switch name {
	case ScenarioTenants, ScenarioLanes:
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
	case ScenarioTenants:
		if err := c.Tenants.defaults(); err != nil {
			return err
		}
		for _, t := range c.Targets {
			if !tenantCapable(t) {
				return fmt.Errorf("bench: the tenants scenario runs on sluice targets only (its tracker is an admission policy), not %q: name them with -targets", t)
			}
		}
		return nil
	case ScenarioLanes:
		return c.Lanes.defaults()
	}
	return errors.New("bench: unknown scenario " + string(b))
}

func (b builtIn) Points(c *SuiteConfig) []Point {
	var ps []Point
	switch b {
	case ScenarioTenants:
		sh := c.Tenants.shape()
		for _, part := range TenantsParts {
			ps = append(ps, Point{Shape: sh, Spec: sh.Spec, Multiple: c.Tenants.multiple(), Part: part, Window: c.Tenants.Duration})
		}
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
	case ScenarioTenants:
		return cfg.tenants(ctx, t.Target, p, t.Capacity, t.Repeat, t.Index)
	case ScenarioLanes:
		return cfg.lanes(ctx, t.Target, p, t.Capacity, t.Repeat, t.Index)
	}
	return nil, errors.New("bench: unknown scenario " + string(b))
}

// Calibrate measures the capacity of the tenant fleet's shape its own way,
// and any other shape as the suite does.
func (b builtIn) Calibrate(ctx context.Context, c *SuiteConfig, target string, sh Shape) (float64, float64, error) {
	switch {
	case b == ScenarioTenants && sh.Name == TenantsShape:
		return c.calibrateTenants(ctx, target)
	}
	return c.calibrate(ctx, target, sh.Spec)
}

// RunsOn leaves the lanes scenario's parts that need lanes off the
// targets without them.
func (b builtIn) RunsOn(p Point, target string) bool {
	return b != ScenarioLanes || lanesRunsOn(p, target)
}
