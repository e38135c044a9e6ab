package sched

import (
	"github.com/sluice-go/sluice/internal/cgroup"
	"github.com/sluice-go/sluice/lanes"
)

// LaneStats are the counters of one lane, on one worker or summed.
type LaneStats struct {
	// Name is the lane's name.
	Name string
	// Queued is the number of tasks waiting in the lane's run queue (work
	// still in a worker's inbox is counted in WorkerStats.Inbox).
	Queued int64
	// Run is the number of tasks that have run.
	Run int64
	// WaitedNs is the total time tasks waited in the queue before running.
	WaitedNs int64
	// RanNs is the total time tasks of the lane ran.
	RanNs int64
}

// WorkerStats are one worker's counters.
type WorkerStats struct {
	// ID and CPU identify the worker (CPU is -1 when unpinned).
	ID, CPU int
	// Busy reports whether the worker is counted busy now.
	Busy bool
	// BusyNs is the cumulative time the worker was busy (not parked),
	// including the current busy period.
	BusyNs int64
	// Parks counts the times the worker slept in epoll_wait.
	Parks int64
	// Polls counts non-blocking polls made while busy.
	Polls int64
	// Inbox is the number of tasks submitted from other goroutines that
	// the worker has not yet moved to its lanes.
	Inbox int
	// Pending is the number of Await and Offload operations in flight.
	Pending int64
	// Dropped counts tasks discarded when Stop cancelled them.
	Dropped int64
	// Lends counts the leases of the worker's CPU (Worker.Lend), and
	// LendsTaken those the watchdog ended because they lasted longer than
	// Config.BlockedAfter.
	Lends, LendsTaken int64
	// RunQueueWaitNs is how long the worker's thread was ready to run but
	// waited for a CPU, as the kernel counts it (read about once a second,
	// while the watchdog runs): another process, or another thread, held
	// the worker's CPU. A pinned worker cannot leave that CPU.
	RunQueueWaitNs int64
	// Lanes holds the counters of each lane, indexed by lanes.ID.
	Lanes []LaneStats
}

// Snapshot is a consistent-enough view of the scheduler's counters: each
// counter is read atomically, but not all at the same instant.
type Snapshot struct {
	// Busy is the busy-worker count at the time of the snapshot.
	Busy int
	// Workers holds each worker's counters.
	Workers []WorkerStats
	// Lanes sums the lane counters over all workers.
	Lanes []LaneStats
	// Dropped counts tasks discarded when Stop cancelled them.
	Dropped int64
	// Blocked counts guest regions (see Worker.Guest) found holding their
	// worker's thread off the CPU for longer than Config.BlockedAfter.
	Blocked int64
	// Handovers counts the times a worker went on without its blocked
	// thread, on a spare one.
	Handovers int64
	// Spares is the number of spare threads alive now: threads beyond one
	// per worker, which run a worker while another of its threads blocks,
	// and exit after Config.SpareIdle without work. SparesPeak is the most
	// there were at once.
	Spares, SparesPeak int
	// Starved counts the readings (about one a second per worker) in which
	// a worker's thread waited for its CPU more than a quarter of the time.
	Starved int64
	// Throttled is what the CPU quota of the process's cgroup (a
	// container's CPU limit) did since the cgroup was made: the periods in
	// which it was throttled, and the time its tasks, this process's and
	// any other's in the cgroup, were held off the CPU for it. Zero
	// without a quota, or where the cgroup cannot be read. The watchdog
	// counts no throttled thread as blocked.
	Throttled cgroup.Throttling
}

// Snapshot reads every counter. It is safe from any goroutine and does not
// stop the workers.
func (s *Scheduler) Snapshot() Snapshot {
	n := s.set.Len()
	snap := Snapshot{Busy: s.Busy(), Lanes: make([]LaneStats, n),
		Blocked: s.blocked.Load(), Handovers: s.handovers.Load(),
		Spares:     max(0, int(s.threads.Load())-len(s.workers)),
		SparesPeak: int(s.spareHigh.Load()),
		Starved:    s.starved.Load(),
	}
	if s.cpuDir != "" {
		if t, err := cgroup.ReadThrottling(s.cpuDir); err == nil {
			snap.Throttled = t
		}
	}
	for i := 0; i < n; i++ {
		snap.Lanes[i].Name = s.set.Name(lanes.ID(i))
	}
	now := s.clock()
	for _, w := range s.workers {
		ws := WorkerStats{
			ID: w.id, CPU: w.cpu,
			Busy:    w.isBusy.Load(),
			BusyNs:  w.busyNs.Load(),
			Parks:   w.parks.Load(),
			Polls:   w.polls.Load(),
			Pending: w.pending.Load(),
			Dropped: w.dropped.Load(),
			Lanes:   make([]LaneStats, n),

			Lends:          w.lends.Load(),
			LendsTaken:     w.lendsTaken.Load(),
			RunQueueWaitNs: w.runWait.Load(),
		}
		if ws.Busy {
			if d := now - w.busySince.Load(); d > 0 {
				ws.BusyNs += d
			}
		}
		ws.Inbox = int(w.inbox.n.Load())
		for i := 0; i < n; i++ {
			c := &w.stats[i]
			ls := LaneStats{
				Name:     snap.Lanes[i].Name,
				Queued:   c.queued.Load(),
				Run:      c.run.Load(),
				WaitedNs: c.waited.Load(),
				RanNs:    c.ran.Load(),
			}
			ws.Lanes[i] = ls
			t := &snap.Lanes[i]
			t.Queued += ls.Queued
			t.Run += ls.Run
			t.WaitedNs += ls.WaitedNs
			t.RanNs += ls.RanNs
		}
		snap.Dropped += ws.Dropped
		snap.Workers = append(snap.Workers, ws)
	}
	return snap
}
