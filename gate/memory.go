package gate

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/cgroup"
	"github.com/sluice-go/sluice/internal/monotime"
)

// Defaults for the zero values of MemoryConfig.
const (
	DefaultMemoryInterval        = 100 * time.Millisecond
	DefaultMemoryMinFreeFraction = 0.10
)

// MemoryConfig configures a Memory gate.
type MemoryConfig struct {
	// MinFree is the free memory, in bytes, below which the gate refuses.
	// Zero means MinFreeFraction of each limit instead.
	MinFree int64
	// MinFreeFraction is the free fraction of a limit below which the gate
	// refuses, used when MinFree is zero; zero means 0.10.
	MinFreeFraction float64
	// Interval is how often a background goroutine refreshes the state;
	// zero means 100 ms, Manual means never (call Refresh).
	Interval time.Duration
	// CountPageCache counts the cgroup's inactive file pages (page cache
	// that the kernel reclaims before it runs out of memory) as used.
	// By default they count as free, as the kubelet's working set does.
	CountPageCache bool
	// Root is the file system root under which /proc and /sys are read;
	// empty means "/". Tests point it at a fake tree.
	Root string
}

// MemoryStats is what a Memory gate saw at its last refresh, for the
// constraint with the least free memory above its threshold.
type MemoryStats struct {
	// Source names that constraint: "cgroup2 DIR" or "cgroup1 DIR" for a
	// cgroup with a limit, "meminfo" for the machine's MemAvailable.
	Source string
	// Limit is the constraint's limit (MemTotal for meminfo), Free what
	// is left of it and Threshold the free amount below which the gate
	// refuses, all in bytes.
	Limit, Free, Threshold int64
	// Open is the gate's state.
	Open bool
	// PerAdmission is the memory, in bytes, that each admission of the
	// last readings added (their growth over their admissions), zero
	// while no reading has seen admissions and growth; Budget is how many
	// admissions the gate makes before its next reading: what fits in
	// Free − Threshold at PerAdmission each (at least one), or -1 for
	// any number while PerAdmission is zero.
	PerAdmission, Budget int64
	// Err is the error of the last refresh, if no source could be read;
	// the gate then stays open.
	Err error
	// At is when the refresh happened.
	At time.Time
}

// Memory refuses new requests while free memory, as the process's cgroup
// sees it, is below a threshold: a server that accepts a request it has no
// memory for will crash ("How To Build Servers That Don't Crash When
// Overloaded", docs/background.md). The state is sampled off the hot path,
// by a background goroutine every Interval (or by Refresh), and kept in an
// atomic flag: Admit loads it and checks the reading's age (a clock read),
// Done is a no-op.
//
// A refresh reads, under Root:
//   - cgroup v2: the process's cgroup from /proc/self/cgroup (the "0::" line)
//     under the cgroup2 mount found in /proc/self/mountinfo (by default
//     /sys/fs/cgroup), and in that cgroup and each ancestor up to the mount,
//     memory.max and memory.current (and inactive_file from memory.stat);
//   - cgroup v1, when the process has no v2 cgroup with a memory
//     controller: the memory controller's cgroup and its ancestors,
//     memory.limit_in_bytes and memory.usage_in_bytes (and
//     total_inactive_file);
//   - always: /proc/meminfo's MemAvailable against MemTotal.
//
// The gate reads memory every Interval, and a reading cannot show the
// requests admitted since the last one. So between two readings it admits
// only what fits in the margin the last one saw (free memory above the
// threshold) at the memory that each admission of the last readings added:
// the sum of their growth over the number of admissions. When the requests
// waiting in a queue are let go at once as the gate opens, or a burst
// arrives, the first are admitted and the rest wait for the next reading;
// with memory to spare, the budget is far above any interval's arrivals.
// A burst that comes before any reading has seen admissions add memory is
// admitted whole: for handlers that each take much memory, add a
// concurrency limit (NewConcurrency) of about the free memory over the
// memory of one request. In a container, set GOMEMLIMIT below the cgroup's
// limit, so that the garbage collector works harder before the gate refuses
// (TestMemoryGateRefusesBeforeTheOOMKiller in the sluice package runs a
// server in a cgroup: behind this gate it refuses and lives, without it it
// is killed).
//
// Each level with a limit ("max", v1's near-2^63 values and any limit at or
// above MemTotal are no limit) is a constraint with
// free = limit − (usage − inactive_file), and the machine is one with
// free = MemAvailable. The gate is open iff every constraint's free memory
// is at least its threshold: MinFree if set, else MinFreeFraction of that
// constraint's limit. With no cgroup limit, only MemAvailable counts.
type Memory struct {
	open    atomic.Bool
	wake    wakers
	refusal *admit.Refusal
	// admits counts the gate's admissions; until is the count up to which
	// it admits before the next reading, and starved is set when it
	// refused for that, so that the next reading wakes the queue.
	admits, until atomic.Int64
	starved       atomic.Bool

	opts   MemoryConfig
	kind   string   // "cgroup2", "cgroup1" or ""
	levels []string // cgroup directories, leaf first

	mu    sync.Mutex
	buf   []byte
	stats MemoryStats
	ref   *refresher
	// growth holds, for the last readings that followed admissions, the
	// growth of the used memory and the admissions since the reading
	// before (m.mu); last is the reading they are measured from.
	growth [memoryWindow]memorySample
	next   int
	last   memorySample
	lastOf string

	// clock is the monotonic clock of the readings; at is its time at the
	// last one, and stale the age (two Intervals) past which Admit reads
	// itself: 0 with Manual, and once Close stopped the refresher.
	clock func() int64
	at    atomic.Int64
	stale atomic.Int64
}

// NewMemory returns a memory gate, refreshed once before it returns, and
// starts its refresher unless cfg.Interval is Manual; Close stops it. If no
// source can be read the gate stays open and Stats reports the error. It
// fails, naming the field and what to use instead, on a negative MinFree or
// a MinFreeFraction outside [0, 1].
func NewMemory(cfg MemoryConfig) (*Memory, error) {
	opts := cfg
	var errs []error
	if opts.MinFree < 0 {
		errs = append(errs, fmt.Errorf("MemoryConfig.MinFree is %d: use a number of bytes, or 0 for MinFreeFraction of each limit", opts.MinFree))
	}
	if !(opts.MinFreeFraction >= 0 && opts.MinFreeFraction <= 1) {
		errs = append(errs, fmt.Errorf("MemoryConfig.MinFreeFraction is %v: use a fraction in (0, 1], or 0 for %v", opts.MinFreeFraction, DefaultMemoryMinFreeFraction))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("gate: NewMemory: %w", err)
	}
	if opts.MinFreeFraction == 0 {
		opts.MinFreeFraction = DefaultMemoryMinFreeFraction
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultMemoryInterval
	}
	if opts.Root == "" {
		opts.Root = "/"
	}
	m := &Memory{opts: opts, buf: make([]byte, 8<<10), refusal: &admit.Refusal{Reason: "memory"}, clock: monotime.Clock()}
	m.open.Store(true)
	m.locate()
	m.Refresh()
	if opts.Interval > 0 {
		m.stale.Store(int64(2 * opts.Interval))
		m.ref = startRefresher(opts.Interval, func() { m.Refresh() })
	}
	return m, nil
}

// memoryWindow is how many readings that followed admissions the memory
// per admission is measured over.
const memoryWindow = 16

// memorySample is one reading's growth in used bytes and the admissions
// made since the reading before it; for Memory.last, the used bytes and the
// admission count at that reading.
type memorySample struct{ used, admits int64 }

// locate finds the process's cgroup directories.
func (m *Memory) locate() {
	root := m.opts.Root
	cg, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return
	}
	paths := cgroup.ParsePaths(cg)
	p2, p1 := paths.V2, paths.V1["memory"]
	mi, _ := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	m2, ok2 := cgroup.FirstMount(mi, "cgroup2", "")
	m1, ok1 := cgroup.FirstMount(mi, "cgroup", "memory")
	if p2 != "" {
		if !ok2 {
			m2 = cgroup.Mount{Root: "/", Point: "/sys/fs/cgroup"}
		}
		levels := cgroupLevels(root, m2, p2)
		if _, err := os.Stat(filepath.Join(levels[0], "memory.current")); err == nil {
			m.kind, m.levels = "cgroup2", levels
			return
		}
	}
	if p1 != "" {
		if !ok1 {
			m1 = cgroup.Mount{Root: "/", Point: "/sys/fs/cgroup/memory"}
		}
		levels := cgroupLevels(root, m1, p1)
		if _, err := os.Stat(filepath.Join(levels[0], "memory.usage_in_bytes")); err == nil {
			m.kind, m.levels = "cgroup1", levels
		}
	}
}

// Refresh reads the memory state now, updates the gate and returns what it
// saw. It runs on the refresher's goroutine every Interval; tests call it
// directly. If it opens the gate it wakes the attached pipelines.
func (m *Memory) Refresh() MemoryStats {
	m.mu.Lock()
	st, opened := m.refreshLocked()
	m.mu.Unlock()
	if opened {
		m.wake.fire(0)
	}
	return st
}

// refreshLocked reads the state into the gate, m.mu held, and reports
// whether it opened the gate.
func (m *Memory) refreshLocked() (MemoryStats, bool) {
	st := m.read()
	st.At = time.Now()
	m.budget(&st)
	m.stats = st
	m.at.Store(m.clock())
	was := m.open.Swap(st.Open)
	starved := m.starved.Swap(false)
	return st, st.Open && (!was || starved)
}

// budget records the reading st in the growth window and sets the number
// of admissions until the next one; m.mu is held.
func (m *Memory) budget(st *MemoryStats) {
	// A reading with no admissions since the last sample is not one: the
	// growth it sees (requests admitted before, allocating late) counts
	// with the next admissions, and a closed spell forgets nothing.
	admits := m.admits.Load()
	used := st.Limit - st.Free
	switch {
	case st.Source == "" || st.Source != m.lastOf:
		m.last, m.lastOf = memorySample{used: used, admits: admits}, st.Source
	case admits > m.last.admits:
		m.growth[m.next] = memorySample{used: used - m.last.used, admits: admits - m.last.admits}
		m.next = (m.next + 1) % memoryWindow
		m.last = memorySample{used: used, admits: admits}
	}
	var grew, admitted int64
	for _, g := range m.growth {
		grew += max(g.used, 0)
		admitted += g.admits
	}
	st.Budget = -1
	if grew > 0 && admitted > 0 {
		st.PerAdmission = max(grew/admitted, 1)
		st.Budget = max((st.Free-st.Threshold)/st.PerAdmission, 1)
		m.until.Store(admits + st.Budget)
		return
	}
	m.until.Store(math.MaxInt64)
}

// read computes the state; m.mu is held.
func (m *Memory) read() MemoryStats {
	best := MemoryStats{Open: true}
	found := false
	margin := int64(math.MaxInt64)
	consider := func(src string, limit, free int64) {
		free = max(free, 0)
		th := m.opts.MinFree
		if th == 0 {
			th = int64(m.opts.MinFreeFraction * float64(limit))
		}
		open := free >= th
		if !found || free-th < margin {
			margin = free - th
			best = MemoryStats{Source: src, Limit: limit, Free: free, Threshold: th, Open: best.Open && open}
		} else {
			best.Open = best.Open && open
		}
		found = true
	}

	total, avail := int64(-1), int64(-1)
	if b, err := readHead(filepath.Join(m.opts.Root, "proc/meminfo"), m.buf); err == nil {
		t, ok1 := field(b, "MemTotal")
		a, ok2 := field(b, "MemAvailable")
		if ok1 && ok2 {
			total, avail = t, a
		}
	}

	limitFile, usageFile, inactiveKey := "memory.max", "memory.current", "inactive_file"
	if m.kind == "cgroup1" {
		limitFile, usageFile, inactiveKey = "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"
	}
	for _, dir := range m.levels {
		limit, err := readInt(filepath.Join(dir, limitFile), m.buf)
		if err != nil || limit < 0 || limit >= 1<<62 || (total > 0 && limit >= total) {
			continue
		}
		usage, err := readInt(filepath.Join(dir, usageFile), m.buf)
		if err != nil {
			continue
		}
		if !m.opts.CountPageCache {
			if b, err := readHead(filepath.Join(dir, "memory.stat"), m.buf); err == nil {
				if v, ok := field(b, inactiveKey); ok {
					usage -= min(v, usage)
				}
			}
		}
		consider(m.kind+" "+dir, limit, limit-usage)
	}
	if total > 0 {
		consider("meminfo", total, avail)
	}
	if !found {
		return MemoryStats{Open: true, Err: errNoSource}
	}
	return best
}

// Admit admits a request iff the last refresh found enough free memory and
// the budget of admissions until the next refresh is not spent.
// When that refresh is older than two Intervals (its goroutine kept from
// the CPU: an overloaded machine, workers that hold every CPU), Admit
// reads the memory itself first, as if it were the refresher: a burst of
// admissions must not ride on a reading the refresher could not renew.
func (m *Memory) Admit(*admit.Attempt) *admit.Refusal {
	if stale := m.stale.Load(); stale > 0 && m.clock()-m.at.Load() > stale && m.mu.TryLock() {
		_, opened := m.refreshLocked()
		m.mu.Unlock()
		if opened {
			go m.wake.fire(0) // not from inside a decision of the pipeline
		}
	}
	if !m.open.Load() {
		return m.refusal
	}
	if m.admits.Add(1) > m.until.Load() {
		m.admits.Add(-1)
		m.starved.Store(true)
		return m.refusal
	}
	return nil
}

// Done does nothing.
func (m *Memory) Done(*admit.Attempt, admit.Outcome) {}

// Name returns "memory", the reason of its refusals.
func (m *Memory) Name() string { return m.refusal.Reason }

// Attach registers the pipeline to be told, on the refresher's goroutine
// (or the caller of Refresh), when a refresh opens the gate.
func (m *Memory) Attach(env admit.Env) (detach func(), err error) { return m.wake.attach(env) }

// Stats returns what the last refresh saw.
func (m *Memory) Stats() MemoryStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// Close stops the refresher and waits for it. The gate keeps its last state,
// without a budget of admissions: no reading would renew it. Close may be
// called more than once.
func (m *Memory) Close() error {
	m.stale.Store(0)
	m.ref.close()
	m.until.Store(math.MaxInt64)
	return nil
}
