// Command sluice runs sluice's demonstrations and benchmarks.
//
//	sluice demo [flags]    sluice against net/http at 2x and 5x of capacity (a minute of load, after a first build of 1 to 2 minutes)
//	sluice bench [flags]   the whole overload benchmark: sweep, shapes, slowdown, mix, step (the others when named with -scenarios)
//	sluice soak [flags]    a minute at 5x of capacity with misbehaving clients and panics, checked
//	sluice lanes [flags]   the executor's priority lanes under load (a few seconds)
//	sluice load -url URL   the benchmark's load generator against a service of yours on this machine
//	sluice attack [flags]  the attack suite: hostile inputs against sluice and net/http, with verdicts
//	sluice simulate [flags] tenant fairness by blame, simulated on virtual time (seconds)
//	sluice report FILE     the table and plots of a saved report.json, again
//	sluice controller      the fleet's tenant controller over Redis (runs until interrupted)
//
// Each target of the benchmarks runs in a child process of this command (the
// same executable, started with bench.ChildEnv set).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/scenario"
)

func main() {
	bench.ServeChild(scenario.ChildHooks()...) // a benchmark target's child process serves and exits here
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // -h: the usage was asked for, and printed
		}
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(2)
	}
}

// command is one of sluice's commands, as its usage and -h describe it.
type command struct {
	name     string
	synopsis string // how it is called
	about    string // what it does, one paragraph
}

// commands are sluice's commands, in the order usage lists them.
var commands = []command{
	{"demo", "sluice demo [flags]",
		"sluice against net/http at 2x and 5x of each one's capacity: an open-loop load on the weather service, a table, a JSON report and a plot (embedded; about a minute of load, after a first build of 1 to 2 minutes under go run)"},
	{"bench", "sluice bench [flags]",
		"the whole overload benchmark: a 0.5x-10x sweep, CPU-bound against I/O-bound handlers, a database slowdown, kept-alive against new connections, and a step from 0.5x to 3x and back (several minutes); -scenarios names others instead (closed loops as wrk runs them, CPU quotas, long-lived connections, tenants, lanes, gRPC and more, each described under -scenarios below); -client reconnect,keep runs each sweep and shapes point with a client that reconnects after a timeout and with one that keeps its connection, side by side"},
	{"soak", "sluice soak [flags]",
		"sluice and net/http at 5x of capacity for a minute, with slowloris, clients that never read, resets, garbage and pipelined floods alongside and a handler that panics on 1% of requests: goodput per second, goroutines, fds and memory, checked (PASS/FAIL; fails the command when sluice's checks fail)"},
	{"lanes", "sluice lanes [flags]",
		"the executor's priority lanes and Await on pinned workers, under a load above capacity (a few seconds)"},
	{"load", "sluice load -url URL (-rate R | -closed N) [flags]",
		"the benchmark's load generator pointed at a service on this machine: open loop at -rate requests per second (as users arrive), or closed loop of -closed connections (as wrk), printing the 2xx answered within -deadline, the refusals and failures each second, and the latency of the answers in time (sluice load -url URL -rate 2000)"},
	{"attack", "sluice attack [flags]",
		"the attack suite: malformed, slow, huge and endless inputs against sluice and net/http in child processes, beside probes of new connections; what the probes got, each server's CPU and memory, and a verdict per attack (fails when sluice does worse; a minute or two)"},
	{"report", "sluice report [-out DIR] FILE",
		"print the table of a saved report.json again and redraw its plots"},
	{"simulate", "sluice simulate [flags]",
		"tenant fairness by blame on virtual time: servers running the real admission pipeline, tenant policy, agents and controller, a store with delay and outages, scenarios checked against their targets (PASS/FAIL; fails the command when one fails; seconds)"},
	{"controller", "sluice controller -redis HOST:PORT [flags]",
		"the fleet's tenant controller: once a second, while it holds the lease in Redis, it reads every server's tenant report and writes the drop table (sluice controller -redis HOST:PORT; runs until interrupted)"},
}

// wrap breaks text into lines of at most width columns, each after indent.
func wrap(text, indent string, width int) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(text) {
		switch {
		case i == 0:
			b.WriteString(indent)
			n = len(indent)
		case n+1+len(word) > width:
			b.WriteString("\n" + indent)
			n = len(indent)
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sluice <command> [flags]\n\ncommands:")
	for _, c := range commands {
		text := wrap(c.about, "         ", 76)
		if len(c.name) <= 6 {
			text = "  " + c.name + strings.Repeat(" ", 7-len(c.name)) + text[9:]
		} else {
			text = "  " + c.name + "\n" + text
		}
		fmt.Fprintln(w, text)
	}
	fmt.Fprintln(w, "\nRun \"sluice <command> -h\" for a command's flags.")
}

// describe makes fs's -h print the command's synopsis and what it does
// (from commands) before its flags.
func describe(fs *flag.FlagSet, w io.Writer) {
	fs.Usage = func() {
		for _, c := range commands {
			if c.name == fs.Name() {
				fmt.Fprintf(w, "usage: %s\n\n%s\n\nflags:\n", c.synopsis, wrap(c.about, "", 76))
			}
		}
		fs.PrintDefaults()
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stderr)
		return errors.New("no command given")
	}
	switch args[0] {
	case "demo":
		return demo(ctx, args[1:], stdout, stderr)
	case "bench":
		return benchCmd(ctx, args[1:], stdout, stderr)
	case "soak":
		return soakCmd(ctx, args[1:], stdout, stderr)
	case "lanes":
		return lanesDemo(ctx, args[1:], stdout, stderr)
	case "load":
		return loadCmd(ctx, args[1:], stdout, stderr)
	case "attack":
		return attackCmd(ctx, args[1:], stdout, stderr)
	case "report":
		return reportCmd(args[1:], stdout, stderr)
	case "simulate":
		return simulateCmd(args[1:], stdout, stderr)
	case "controller":
		return controllerCmd(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return nil
	default:
		usage(stderr)
		return fmt.Errorf("unknown command %q", args[0])
	}
}
