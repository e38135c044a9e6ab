package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sluice-go/sluice/lanes"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/sched"
)

// demoConfig is the shape of the demonstration's load.
type demoConfig struct {
	duration time.Duration
	cpu      time.Duration
	wait     time.Duration
	load     float64
	workers  int
	pin      bool
}

// demoResult is what one policy achieved.
type demoResult struct {
	name               string
	offered, completed int64
	latency            *hdrhistogram.Histogram
	contWait, upWait   time.Duration
	meanBusy           float64
	workers            int
}

func lanesDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lanes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	describe(fs, stderr)
	var c demoConfig
	fs.DurationVar(&c.duration, "duration", 2*time.Second, "how long each policy runs")
	fs.DurationVar(&c.cpu, "cpu", 300*time.Microsecond, "CPU work per request, half before and half after its wait")
	fs.DurationVar(&c.wait, "wait", 2*time.Millisecond, "simulated database wait per request, awaited off the worker")
	fs.Float64Var(&c.load, "load", 1.3, "offered load as a multiple of the workers' CPU capacity")
	fs.IntVar(&c.workers, "workers", 0, "workers (0: one per usable CPU)")
	fs.BoolVar(&c.pin, "pin", true, "pin each worker to its own CPU")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case c.duration <= 0 || c.duration > 10*time.Minute:
		return fmt.Errorf("-duration must be in (0, 10m], got %v", c.duration)
	case c.cpu <= 0 || c.cpu > time.Second:
		return fmt.Errorf("-cpu must be in (0, 1s], got %v", c.cpu)
	case c.wait < 0 || c.wait > 10*time.Second:
		return fmt.Errorf("-wait must be in [0, 10s], got %v", c.wait)
	case c.load <= 0 || c.load > 20:
		return fmt.Errorf("-load must be in (0, 20], got %v", c.load)
	case c.workers < 0:
		return fmt.Errorf("-workers must not be negative, got %d", c.workers)
	}
	fmt.Fprintf(stdout, "sluice executor demo: each request runs %v of CPU, awaits a %v database call off its worker,\n", c.cpu/2, c.wait)
	fmt.Fprintf(stdout, "then runs %v more as a continuation. Offered load: %.1fx the workers' CPU capacity, %v per policy.\n\n", c.cpu/2, c.load, c.duration)

	policies := []struct {
		name  string
		apply func(*lanes.Set)
	}{
		{"strict (default)", func(*lanes.Set) {}},
		{"shares 1:1", func(s *lanes.Set) {
			_ = s.SetPolicy(lanes.Shares)
			_ = s.SetShares(lanes.Continuation, lanes.DefaultShares)
		}},
	}
	var results []demoResult
	for _, p := range policies {
		r, err := demoRun(ctx, c, p.name, p.apply, stderr)
		if err != nil {
			return err
		}
		results = append(results, r)
		if ctx.Err() != nil {
			break
		}
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lane policy\toffered/s\tcompleted/s\tp50 in service\tp99 in service\tcontinuation wait\tupstream wait\tmean busy workers\t")
	for _, r := range results {
		secs := c.duration.Seconds()
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%v\t%v\t%v\t%v\t%.2f of %d\t\n", r.name,
			float64(r.offered)/secs, float64(r.completed)/secs,
			us(r.latency.ValueAtQuantile(50)), us(r.latency.ValueAtQuantile(99)),
			r.contWait, r.upWait, r.meanBusy, r.workers)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, `
"In service" is the time from a request's start on a worker to its end, the
database wait included; the waits are the mean time a task sat in its lane's
queue. Under the strict policy the continuations of started requests run
before new (upstream) work, so a started request finishes close to its own
cost while new work queues; with equal shares the two compete and started
requests are slowed by new ones. While requests wait on the database their
worker serves others: Await releases it (try -load 0.5 and watch the busy
count fall). This demo runs the executor alone, without admission, so the
upstream queue grows without bound above capacity: a sluice server refuses
what cannot start in time instead (sluice demo shows it).`)
	return nil
}

func us(v int64) time.Duration {
	return (time.Duration(v) * time.Microsecond).Round(10 * time.Microsecond)
}

// spin burns CPU for d, as handler work would.
func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

func demoRun(ctx context.Context, c demoConfig, name string, apply func(*lanes.Set), stderr io.Writer) (demoResult, error) {
	rc := srt.Config{Workers: max(c.workers, 0), Pinning: srt.PinOff}
	if c.pin {
		rc.Pinning = srt.PinOn
	}
	rt, err := srt.New(rc)
	if err != nil {
		return demoResult{}, err
	}
	apply(rt.Lanes())
	if err := rt.Start(); err != nil {
		return demoResult{}, err
	}
	res := demoResult{name: name, workers: rt.NumWorkers(), latency: hdrhistogram.New(1, 60_000_000, 3)}
	var mu sync.Mutex
	var completed atomic.Int64
	runCtx, cancel := context.WithTimeout(ctx, c.duration)
	defer cancel()

	request := func() func(context.Context) {
		return func(ctx context.Context) {
			started := time.Now()
			spin(c.cpu / 2)
			_, _ = sched.Await(ctx, func(context.Context) (struct{}, error) {
				time.Sleep(c.wait)
				return struct{}{}, nil
			})
			spin(c.cpu / 2)
			if runCtx.Err() == nil {
				completed.Add(1)
				mu.Lock()
				_ = res.latency.RecordValue(time.Since(started).Microseconds())
				mu.Unlock()
			}
		}
	}
	// Offer requests at load x capacity, in 1 ms batches.
	rate := c.load * float64(rt.NumWorkers()) / c.cpu.Seconds()
	var busySum, busySamples int64
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	sent := int64(0)
loop:
	for {
		select {
		case <-runCtx.Done():
			break loop
		case now := <-tick.C:
			// Offer what is due by now, at the planned rate.
			due := int64(rate * now.Sub(start).Seconds())
			for ; sent < due; sent++ {
				if err := rt.Go(runCtx, lanes.Upstream, request()); err != nil {
					break loop
				}
			}
			b := rt.Busy()
			busySum += int64(b)
			busySamples++
		}
	}
	res.offered = sent
	res.completed = completed.Load()
	if busySamples > 0 {
		res.meanBusy = float64(busySum) / float64(busySamples)
	}
	snap := rt.Snapshot()
	if l := snap.Lanes[lanes.Continuation]; l.Run > 0 {
		res.contWait = (time.Duration(l.WaitedNs / l.Run)).Round(10 * time.Microsecond)
	}
	if l := snap.Lanes[lanes.Upstream]; l.Run > 0 {
		res.upWait = (time.Duration(l.WaitedNs / l.Run)).Round(10 * time.Microsecond)
	}
	// Stop without draining the backlog: queued requests are dropped,
	// suspended ones end with sched.ErrStopped.
	stopCtx, cancelStop := context.WithCancel(context.Background())
	cancelStop()
	if err := rt.Stop(stopCtx); err != nil && !errors.Is(err, context.Canceled) {
		return res, err
	}
	return res, nil
}
