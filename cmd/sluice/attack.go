package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/attack"
)

// attackCmd runs the attack suite: each attack against sluice and
// net/http, each target in a child process of its own, beside a probe
// load; a table of what the probes got, the server's CPU and memory, and a
// verdict per attack.
func attackCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("attack", flag.ContinueOnError)
	fs.SetOutput(stderr)
	names := fs.String("attacks", "", "comma-separated attacks to run (default all: "+strings.Join(attackNames(), ", ")+")")
	targets := fs.String("targets", strings.Join(attack.Targets(), ","), "comma-separated targets")
	duration := fs.Duration("duration", 5*time.Second, "how long each attack runs against each target")
	rate := fs.Int("rate", 50, "probes per second, each on a new connection")
	conns := fs.Int("conns", 0, "connections each slow attack holds (0: each attack's own, hundreds to a thousand)")
	md := fs.String("md", "", "also write the table as Markdown to this file")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: sluice attack [flags]

Runs the attack suite: malformed, slow, huge and endless inputs (folded
heads, chunk sizes that overflow, slowloris heads and bodies, clients that
never read, pipelined floods, stalled and flooding TLS hellos, HTTP/2
Rapid Reset and CONTINUATION floods, hostile tenant names), each for
-duration against sluice and net/http serving the same handler in child
processes, beside probes of new connections. Prints, per attack and
target, the probes answered in time and their p99, the server's CPU and
peak memory, and sluice's verdict against net/http; fails when sluice does
worse than net/http under an attack. (docs/benchmarks.md, "Attacks".)

flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	var list []string
	if *names != "" {
		list = strings.Split(*names, ",")
	}
	attacks, err := attack.ByName(list...)
	if err != nil {
		return err
	}
	if *duration <= 0 || *rate <= 0 || *conns < 0 {
		return errors.New("attack: -duration and -rate must be positive, -conns not negative")
	}
	results, err := attack.Run(ctx, attack.Options{
		Attacks:   attacks,
		Targets:   strings.Split(*targets, ","),
		Duration:  *duration,
		ProbeRate: *rate,
		Conns:     *conns,
		Log:       stderr,
		Start: func(ctx context.Context, target string, https bool) (*attack.Server, error) {
			return bench.StartAttackTarget(ctx, nil, target, https)
		},
	})
	if err != nil {
		return err
	}
	if err := attack.WriteMarkdown(stdout, results); err != nil {
		return err
	}
	if *md != "" {
		f, err := os.Create(*md)
		if err != nil {
			return err
		}
		werr := attack.WriteMarkdown(f, results)
		if err := errors.Join(werr, f.Close()); err != nil {
			return err
		}
	}
	var worse []string
	for _, v := range attack.Verdicts(results) {
		if !v.OK {
			worse = append(worse, v.Attack)
		}
	}
	if len(worse) > 0 {
		return fmt.Errorf("attack: sluice did worse than net/http under %s", strings.Join(worse, ", "))
	}
	return nil
}

func attackNames() []string {
	var out []string
	for _, a := range attack.All() {
		out = append(out, a.Name)
	}
	return out
}
