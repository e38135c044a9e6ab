package gate

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/drop"
)

// Defaults for the zero values of CPUConfig: loadshed's example (a 10 s
// rolling window polled every second, rejection from 60% to 80%).
const (
	DefaultCPULower    = 0.6
	DefaultCPUUpper    = 0.8
	DefaultCPUInterval = time.Second
	DefaultCPUWindow   = 10
)

// CPUConfig configures a CPU gate.
type CPUConfig struct {
	// Lower and Upper are utilisation thresholds in [0, 1], Lower <= Upper:
	// at or below Lower every request is admitted, else at or above Upper
	// none, and in between a request is refused with probability
	// (u − Lower)/(Upper − Lower). Both zero mean 0.6 and 0.8.
	Lower, Upper float64
	// Interval is how often /proc/stat is read; zero means 1 s, Manual
	// means never (call Refresh).
	Interval time.Duration
	// Window is how many intervals the utilisation is averaged over; zero
	// means 10.
	Window int
	// Rand returns uniformly distributed 64-bit values; it must be safe
	// for concurrent use. Nil means math/rand/v2's Uint64 (per-thread
	// state, no lock, no allocation). Tests pass a seeded source.
	Rand func() uint64
	// Root is the file system root under which /proc is read; empty means
	// "/".
	Root string
}

// CPUStats is what a CPU gate computed at its last refresh.
type CPUStats struct {
	// Utilisation is the machine's CPU utilisation over the window, in
	// [0, 1]: the share of CPU time, over all CPUs, not idle nor iowait.
	Utilisation float64
	// Reject is the probability with which Admit refuses.
	Reject float64
	// Span is how many intervals the utilisation covers (less than Window
	// until the window has filled; 0 before two readings).
	Span int
	// Err is the error of the last refresh, if /proc/stat could not be
	// read or parsed; the gate keeps its previous state.
	Err error
	// At is when the refresh happened.
	At time.Time
}

// CPU is the OS CPU gate, kept for comparison with the busy-worker gate:
// the machine's CPU utilisation from /proc/stat, averaged over a window of
// Window intervals (so delayed by nature: it reacts to overload seconds
// after it began, and keeps refusing after it ended), with loadshed's
// proportional rejection between two thresholds. It reads the whole
// machine's counters, so in a container with a CPU quota it sees the host,
// not the quota, and other processes' work closes it too.
//
// The rejection probability is computed off the hot path and kept as an
// atomic threshold: Admit is one atomic load, plus one call to Rand while
// the utilisation lies between the thresholds. Done is a no-op.
type CPU struct {
	thr     atomic.Uint64 // refuse iff Rand() < thr; MaxUint64 refuses all
	rnd     func() uint64
	wake    wakers
	refusal *admit.Refusal
	opts    CPUConfig

	mu    sync.Mutex
	buf   []byte
	ring  []cpuTimes // the last Window+1 readings
	n     int        // readings taken
	stats CPUStats
	ref   *refresher
}

// cpuTimes is the aggregate "cpu" line of /proc/stat, in ticks.
type cpuTimes struct {
	busy, total uint64
}

// NewCPU returns a CPU gate, with a first reading taken, and starts its
// refresher unless cfg.Interval is Manual; Close stops it. It fails, naming
// the field and what to use instead, on thresholds outside
// 0 <= Lower <= Upper <= 1 or a negative Window.
func NewCPU(cfg CPUConfig) (*CPU, error) {
	opts := cfg
	if opts.Lower == 0 && opts.Upper == 0 {
		opts.Lower, opts.Upper = DefaultCPULower, DefaultCPUUpper
	}
	var errs []error
	switch {
	case !(opts.Lower >= 0 && opts.Lower <= 1):
		errs = append(errs, fmt.Errorf("CPUConfig.Lower is %v: use a utilisation in [0, 1], such as 0.6", opts.Lower))
	case !(opts.Upper >= opts.Lower && opts.Upper <= 1):
		errs = append(errs, fmt.Errorf("CPUConfig.Upper is %v, outside [Lower %v, 1]: set Upper to the utilisation at which everything is refused (or both to zero for %v and %v)", opts.Upper, opts.Lower, DefaultCPULower, DefaultCPUUpper))
	}
	if opts.Window < 0 {
		errs = append(errs, fmt.Errorf("CPUConfig.Window is %d: use a count of intervals, 1 or more, or 0 for %d", opts.Window, DefaultCPUWindow))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("gate: NewCPU: %w", err)
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultCPUInterval
	}
	if opts.Window == 0 {
		opts.Window = DefaultCPUWindow
	}
	if opts.Root == "" {
		opts.Root = "/"
	}
	c := &CPU{opts: opts, rnd: opts.Rand, buf: make([]byte, 512), ring: make([]cpuTimes, opts.Window+1),
		refusal: &admit.Refusal{Reason: "cpu"}}
	if c.rnd == nil {
		c.rnd = rand.Uint64
	}
	c.Refresh()
	if opts.Interval > 0 {
		c.ref = startRefresher(opts.Interval, func() { c.Refresh() })
	}
	return c, nil
}

var errProcStat = errors.New("gate: no aggregate cpu line in /proc/stat")

// readStat parses the first line of /proc/stat: "cpu  user nice system idle
// iowait irq softirq steal guest guest_nice". Guest time is already in user
// and nice, so it is not added again.
func readStat(path string, buf []byte) (cpuTimes, error) {
	b, err := readHead(path, buf)
	if err != nil {
		return cpuTimes{}, err
	}
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	f := bytes.Fields(b)
	if len(f) < 5 || string(f[0]) != "cpu" {
		return cpuTimes{}, errProcStat
	}
	var t cpuTimes
	for i := 1; i < len(f) && i <= 8; i++ {
		v, err := strconv.ParseUint(string(f[i]), 10, 64)
		if err != nil {
			return cpuTimes{}, errProcStat
		}
		t.total += v
		if i != 4 && i != 5 { // idle, iowait
			t.busy += v
		}
	}
	return t, nil
}

// Refresh reads /proc/stat now, updates the rejection probability and
// returns the state. It runs on the refresher's goroutine every Interval;
// tests call it directly. If the probability falls it wakes the attached
// pipelines.
func (c *CPU) Refresh() CPUStats {
	c.mu.Lock()
	t, err := readStat(filepath.Join(c.opts.Root, "proc/stat"), c.buf)
	st := c.stats
	st.Err, st.At = err, time.Now()
	if err == nil {
		c.ring[c.n%len(c.ring)] = t
		c.n++
		span := min(c.n-1, c.opts.Window)
		if span > 0 {
			old := c.ring[(c.n-1-span)%len(c.ring)]
			if dt := t.total - old.total; t.total > old.total && t.busy >= old.busy {
				st.Utilisation = min(float64(t.busy-old.busy)/float64(dt), 1)
				st.Span = span
			}
		}
		st.Reject = c.reject(st.Utilisation)
	}
	c.stats = st
	thr := drop.Threshold(st.Reject)
	old := c.thr.Swap(thr)
	c.mu.Unlock()
	if thr < old {
		c.wake.fire(0)
	}
	return st
}

// reject maps a utilisation to a rejection probability.
func (c *CPU) reject(u float64) float64 { return drop.Probability(u, c.opts.Lower, c.opts.Upper) }

// Admit admits all requests below Lower, none above Upper, and in between
// refuses with the probability computed at the last refresh.
func (c *CPU) Admit(*admit.Attempt) *admit.Refusal {
	t := c.thr.Load()
	if t == 0 || (t != math.MaxUint64 && c.rnd() >= t) {
		return nil
	}
	return c.refusal
}

// Done does nothing.
func (c *CPU) Done(*admit.Attempt, admit.Outcome) {}

// Name returns "cpu", the reason of its refusals.
func (c *CPU) Name() string { return c.refusal.Reason }

// Attach registers the pipeline to be told, on the refresher's goroutine
// (or the caller of Refresh), when a refresh lowers the rejection
// probability.
func (c *CPU) Attach(env admit.Env) (detach func(), err error) { return c.wake.attach(env) }

// Stats returns what the last refresh computed.
func (c *CPU) Stats() CPUStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Close stops the refresher and waits for it. The gate keeps its last state.
// Close may be called more than once.
func (c *CPU) Close() error {
	c.ref.close()
	return nil
}
