// Command sluice runs sluice's demonstrations and tools.
//
//	sluice demo [flags]   run the executor demonstration (embedded, no services)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "sluice:", err)
		}
		os.Exit(2)
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, `usage: sluice <command> [flags]

commands:
  demo   run the executor demonstration: priority lanes and Await on pinned
         workers, under a load above capacity (embedded, a few seconds)

Run "sluice <command> -h" for a command's flags.`)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stderr)
		return errors.New("no command given")
	}
	switch args[0] {
	case "demo":
		return demo(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return nil
	default:
		usage(stderr)
		return fmt.Errorf("unknown command %q", args[0])
	}
}
