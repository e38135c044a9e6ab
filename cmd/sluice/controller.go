package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/tenant"
)

// controllerCmd runs the fleet's tenant controller against Redis: once a
// period, while it holds the lease, it reads every server's report and
// writes the drop table, printing one line per period.
func controllerCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	fs.SetOutput(stderr)
	describe(fs, stderr)
	addr := fs.String("redis", "", "Redis address (host:port); a comma-separated list for a Cluster or Sentinel (required)")
	master := fs.String("sentinel-master", "", "with Sentinel addresses in -redis, the master's name")
	fleet := fs.String("fleet", "", "the fleet's name in Redis (its servers' RedisConfig.Fleet; empty: the default)")
	period := fs.Duration("period", time.Second, "control period (the servers' agents use the same)")
	weights := fs.String("weights", "", "tenant weights, name=weight,... (a tenant not named weighs 1)")
	id := fs.String("id", "", "this controller's name in the lease (empty: host, process and a random suffix)")
	quiet := fs.Bool("quiet", false, "print only when it takes the lease, and errors")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *addr == "" {
		fs.Usage()
		return errors.New("controller: -redis is required (the address of the fleet's Redis, for example 127.0.0.1:6379)")
	}
	w, err := parseWeights(*weights)
	if err != nil {
		return err
	}
	client := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:                 strings.Split(*addr, ","),
		MasterName:            *master,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
	})
	defer client.Close()
	store, err := tenant.NewRedisStore(client, tenant.RedisConfig{Fleet: *fleet})
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	ctrl, err := tenant.NewController(tenant.ControllerConfig{Weights: w})
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	agent, err := tenant.NewAgent(tenant.AgentConfig{
		Store: store, Controller: ctrl, Period: *period, ID: *id,
		OnError: func(err error) { fmt.Fprintln(stderr, err) },
		OnStep: func(d tenant.Decision, took bool) {
			if took {
				fmt.Fprintln(stdout, "leading")
			}
			if !*quiet {
				fmt.Fprintln(stdout, describeDecision(d))
			}
		},
	})
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	fmt.Fprintf(stdout, "controller %s: fleet Redis %s, period %v (standing by until it holds the lease)\n", agent.ID(), *addr, *period)
	agent.Run(ctx)
	return nil
}

// describeDecision writes a Decision on one line.
func describeDecision(d tenant.Decision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "v%d %s: %d servers, rejected %.1f%%, gates closed %.0f%%", d.Version, d.State, d.Servers, 100*d.Rejected, 100*d.Closed)
	var drops []string
	for _, td := range d.Tenants {
		if td.Drop > 0 {
			drops = append(drops, fmt.Sprintf("%s=%.3f", td.Tenant, td.Drop))
		}
	}
	if len(drops) > 0 {
		fmt.Fprintf(&b, "; drops %s", strings.Join(drops, " "))
	}
	return b.String()
}

// parseWeights parses "name=weight,...".
func parseWeights(s string) (map[string]float64, error) {
	if s == "" {
		return nil, nil
	}
	w := map[string]float64{}
	for part := range strings.SplitSeq(s, ",") {
		name, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || name == "" || err != nil || !(f > 0) {
			return nil, fmt.Errorf("-weights: %q: want name=weight with a positive weight (for example gold=3)", part)
		}
		w[name] = f
	}
	return w, nil
}
