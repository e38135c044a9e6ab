package bench

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"time"
)

// SoakProbe is how often a child monitored every second (Process.Monitor)
// should report its goroutines (ChildSpec.Probe): often enough that the
// count read at each bucket's end is at most this old.
const SoakProbe = 200 * time.Millisecond

// Resources are a reading of a target's process.
type Resources struct {
	// At is when the reading was taken: from the start of the load (0:
	// just before it), or, for a reading after the load (Process.Drain),
	// from its end.
	At time.Duration `json:"at"`
	// Up reports that the process was there to read; the other fields
	// are zero when it was not.
	Up bool `json:"up"`
	// RSS is the resident set size in bytes (VmRSS), Threads the OS
	// threads and FDs the open descriptors (/proc/PID/fd).
	RSS     int64 `json:"rss"`
	Threads int   `json:"threads"`
	FDs     int   `json:"fds"`
	// Conns counts the target's connections open at both ends
	// (ESTABLISHED in /proc/net/tcp, on its port), CloseWait those its
	// client has closed and it has not (CLOSE_WAIT); -1 when unknown.
	// Both are read just before and just after FDs: Conns is the larger
	// reading (at most FDs: connections opened after the descriptors were
	// read are not among them), CloseWait the smaller.
	Conns     int `json:"conns"`
	CloseWait int `json:"close_wait"`
	// Goroutines and HeapBytes are the child's latest report on itself
	// (runtime.NumGoroutine, the heap's live and unswept objects),
	// ProbeAge how old that report was; Goroutines is -1 without one.
	Goroutines int           `json:"goroutines"`
	HeapBytes  uint64        `json:"heap_bytes"`
	ProbeAge   time.Duration `json:"probe_age"`
}

// AwaitProbe waits, up to the time a child has to start listening, for a
// probe line (ChildSpec.Probe) read after since: the zero time for the
// child's first.
func (p *Process) AwaitProbe(ctx context.Context, since time.Time) error {
	limit := processStartTimeout
	deadline := time.Now().Add(limit)
	for {
		if r := p.probe.Load(); r != nil && r.at.After(since) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: the target's child did not report its goroutines within %v", limit)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ReadResources reads the child's process now, as of at: its memory,
// threads, descriptors and connections, and the goroutines of its latest
// probe line.
func (p *Process) ReadResources(at time.Duration) Resources {
	r := Resources{At: at, Goroutines: -1, Conns: -1, CloseWait: -1}
	rss, threads, err := procStatus(p.pid())
	if err != nil {
		return r
	}
	// The connections are read on both sides of the descriptors, and the
	// larger count kept: when the clients close many at once (the load's
	// end), the server closes their descriptors between the two readings,
	// and connections read after the descriptors would leave those read
	// as held beyond the connections.
	est1, cw1, err1 := tcpConns(p.addr())
	fds := countFDs(strconv.Itoa(p.pid()))
	if fds < 0 {
		return r
	}
	r.Up, r.RSS, r.Threads, r.FDs = true, rss, threads, fds
	if est2, cw2, err2 := tcpConns(p.addr()); err1 == nil && err2 == nil {
		r.Conns, r.CloseWait = min(max(est1, est2), fds), min(cw1, cw2)
	}
	if pr := p.probe.Load(); pr != nil {
		r.Goroutines, r.HeapBytes, r.ProbeAge = pr.Goroutines, pr.HeapBytes, time.Since(pr.at)
	}
	return r
}

// addr returns the address of the child's URL (the zero AddrPort if it has
// no IP address and port).
func (p *Process) addr() netip.AddrPort {
	u, err := url.Parse(p.URL)
	if err != nil {
		return netip.AddrPort{}
	}
	a, _ := netip.ParseAddrPort(u.Host)
	return a
}

// Monitor reads the child's process (ReadResources) at start + k*bucket
// for k = 1..n and returns the readings, fewer if ctx ends first.
func (p *Process) Monitor(ctx context.Context, start time.Time, bucket time.Duration, n int) []Resources {
	out := make([]Resources, 0, n)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for k := 1; k <= n; k++ {
		at := time.Duration(k) * bucket
		if d := time.Until(start.Add(at)); d > 0 {
			t.Reset(d)
			select {
			case <-ctx.Done():
				return out
			case <-t.C:
			}
		}
		out = append(out, p.ReadResources(at))
	}
	return out
}

// Drain reads the child's process every 100 ms, up to limit, until its
// descriptors are back within slack of base, and returns the last reading
// (with the goroutines the child reported after the drain began, when it
// has), its At counted from the drain's start.
func (p *Process) Drain(ctx context.Context, base Resources, slack int, limit time.Duration) Resources {
	start := time.Now()
	for {
		r := p.ReadResources(time.Since(start))
		fresh := false
		if pr := p.probe.Load(); pr != nil {
			fresh = pr.at.After(start)
		}
		back := fresh && r.FDs <= base.FDs+slack
		if back || !r.Up || r.At >= limit || ctx.Err() != nil {
			return r
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Status returns the child's resident set size in bytes and its thread
// count, from /proc/PID/status (Linux only).
func (p *Process) Status() (rss int64, threads int, err error) {
	rss, threads, err = procStatus(p.pid())
	if err != nil {
		return 0, 0, fmt.Errorf("bench: target's status: %w", err)
	}
	return rss, threads, nil
}
