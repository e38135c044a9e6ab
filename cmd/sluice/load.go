package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sluice-go/sluice/bench/load"
)

// loadConfig is what sluice load sends.
type loadConfig struct {
	url      string
	method   string
	rate     float64
	closed   int
	duration time.Duration
	deadline time.Duration
	every    time.Duration
	seed     uint64
}

// loadCmd points the benchmark's load generator at a service: open loop
// (requests at -rate per second whatever the answers, as users arrive),
// printing what was answered in time each -every, or closed loop (-closed N
// connections, each sending when its last answer is in, as wrk does), for
// comparison.
func loadCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c loadConfig
	fs.StringVar(&c.url, "url", "", "the service to load: an http or https URL on this machine (loopback only, as the benchmark)")
	fs.StringVar(&c.method, "method", "GET", "the request method")
	fs.Float64Var(&c.rate, "rate", 0, "open loop: requests per second, Poisson arrivals, whatever the answers")
	fs.IntVar(&c.closed, "closed", 0, "closed loop instead: this many connections, each sending when its last answer is in (after a refusal or a failure it pauses 1 ms), counted after a warm-up of 0.5 s")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long to send")
	fs.DurationVar(&c.deadline, "deadline", load.DefaultDeadline, "a 2xx answered later than this, from the request's scheduled send, does not count as in time")
	fs.DurationVar(&c.every, "every", time.Second, "open loop: print a line per this much of the run")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the Poisson arrivals")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: sluice load -url URL (-rate R | -closed N) [flags]

Sends load to a service on this machine and prints what it answered in
time: 2xx within -deadline per second ("in time"), refusals (503 with
Sluice-Not-Started: the service turned the request away before any work),
failures (late, errors, other statuses) and the latency of the answers in
time. Open loop (-rate) is how real users arrive: the rate does not drop
when the service slows down. Closed loop (-closed) is what wrk and hey do;
its load adjusts to the service, and its req/s counts refusals
(docs/load-testing.md).

flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := c.check(); err != nil {
		return err
	}
	if c.closed > 0 {
		return loadClosed(ctx, c, stdout)
	}
	return loadOpen(ctx, c, stdout)
}

func (c loadConfig) check() error {
	switch {
	case c.url == "":
		return errors.New("load: -url is required")
	case c.rate < 0 || math.IsInf(c.rate, 0) || math.IsNaN(c.rate) || c.rate > 1e6:
		return fmt.Errorf("load: -rate must be in (0, 1e6] requests per second, got %v", c.rate)
	case c.closed < 0 || c.closed > load.MaxConns:
		return fmt.Errorf("load: -closed must be in (0, %d] connections, got %d", load.MaxConns, c.closed)
	case (c.rate > 0) == (c.closed > 0):
		return errors.New("load: give exactly one of -rate (open loop) and -closed (closed loop)")
	case c.duration <= 0 || c.duration > time.Hour:
		return fmt.Errorf("load: -duration must be in (0, 1h], got %v", c.duration)
	case c.deadline <= 0 || c.deadline > time.Minute:
		return fmt.Errorf("load: -deadline must be in (0, 1m], got %v", c.deadline)
	case c.rate > 0 && (c.every < 10*time.Millisecond || c.every > c.duration):
		return fmt.Errorf("load: -every must be in [10ms, -duration], got %v", c.every)
	}
	return nil
}

func loadOpen(ctx context.Context, c loadConfig, stdout io.Writer) error {
	res, err := load.Run(ctx, load.Config{
		URL: c.url, Method: c.method, Rate: c.rate, Duration: c.duration,
		Arrival: load.Poisson, Seed: c.seed, Deadline: c.deadline, Bucket: c.every,
	})
	if err != nil && res == nil {
		return fmt.Errorf("load: %w", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	secs := c.every.Seconds()
	fmt.Fprintf(tw, "time\toffered/s\tin time/s\trefused/s\tfailed/s\t\n")
	for _, b := range res.Series {
		fmt.Fprintf(tw, "%.1fs\t%.0f\t%.0f\t%.0f\t%.0f\t\n", (b.Start + c.every).Seconds(),
			float64(b.Offered)/secs, float64(b.OK)/secs, float64(b.Rejected)/secs, float64(b.Failed)/secs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var lat *hdrhistogram.Histogram
	if cr := res.ByClass[""]; cr != nil {
		lat = cr.Latency
	}
	fmt.Fprintf(stdout, "\nopen loop at %.0f/s for %v, deadline %v: %d sent, %d in time (%.0f/s), %d refused (%s), %d failed (%s)\n",
		c.rate, res.Duration, c.deadline, res.Sent, res.OK, float64(res.OK)/res.Duration.Seconds(),
		res.Rejected, share(res.Rejected, res.Offered), res.Failed, share(res.Failed, res.Offered))
	printLatency(stdout, lat)
	if res.Behind {
		fmt.Fprintf(stdout, "warning: the generator fell behind its schedule (%d requests started more than 10 ms late, %d dropped): it offered less than -rate; give it more CPU or a lower rate\n",
			res.Late, res.Dropped)
	}
	return err
}

func loadClosed(ctx context.Context, c loadConfig, stdout io.Writer) error {
	cal, err := load.Calibrate(ctx, load.CalibrateConfig{
		URL: c.url, Method: c.method, Conns: c.closed, Duration: c.duration, Deadline: c.deadline,
	})
	if err != nil && cal.Duration == 0 {
		return fmt.Errorf("load: %w", err)
	}
	total := cal.OK + cal.Rejected + cal.Failed
	fmt.Fprintf(stdout, "closed loop of %d connections for %v, deadline %v: %d answers, %d in time (%.0f/s), %d refused (%s), %d failed (%s)\n",
		c.closed, cal.Duration, c.deadline, total, cal.OK, cal.Goodput,
		cal.Rejected, share(cal.Rejected, total), cal.Failed, share(cal.Failed, total))
	printLatency(stdout, cal.Latency)
	return err
}

// printLatency prints the percentiles of the answers in time, in ms.
func printLatency(w io.Writer, h *hdrhistogram.Histogram) {
	if h == nil || h.TotalCount() == 0 {
		fmt.Fprintln(w, "latency of the answers in time: none")
		return
	}
	ms := func(q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1e3 }
	fmt.Fprintf(w, "latency of the answers in time (ms): p50 %.1f  p99 %.1f  p99.9 %.1f  max %.1f\n",
		ms(50), ms(99), ms(99.9), float64(h.Max())/1e3)
}

func share(n, of int64) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
}
