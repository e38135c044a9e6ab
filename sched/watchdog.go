package sched

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-go/sluice/lanes"
)

// blockedBurst is how many "guest code blocked its worker" lines the
// scheduler logs a second; the next one logged says how many were not.
const blockedBurst = 5

// watchdog looks at every worker each BlockedAfter/2 and hands a worker
// whose guest code holds its thread off the CPU to a spare thread. Go's
// sysmon does the same for a P whose thread is stuck in a system call.
// It also ends a lease of a worker's CPU held for longer than BlockedAfter
// (lend.go). While every guest region and lease it finds is younger than
// BlockedAfter/4, it looks only each BlockedAfter:
// each look wakes threads on the workers' CPUs (the timer's, and one Go
// starts to run the watchdog), and with a 1 ms handler on one CPU, looks
// every 2 ms cost the server 3% of its throughput against net/http. When
// no worker has run guest code or been lent for dogSleepAfter, it sleeps
// until one is (guestBegins wakes it): an idle server's watchdog costs no
// wake-ups, where it ticked 500 times a second.
func (s *Scheduler) watchdog() {
	defer close(s.dogDone)
	watching, relaxed := s.cfg.BlockedAfter/2, s.cfg.BlockedAfter
	t := time.NewTimer(watching)
	defer t.Stop()
	starvedAt := s.clock()
	quietFrom := int64(0) // when the workers were last seen with nothing to watch; 0: busy
	for {
		select {
		case <-s.dogStop:
			return
		case <-t.C:
		}
		s.dogLooks.Add(1)
		now := s.clock()
		starved := now-starvedAt >= int64(starvedEvery)
		if starved {
			starvedAt = now
		}
		active, watch := false, false
		for _, w := range s.workers {
			if a, old := w.inspect(now); a {
				active, watch = true, watch || old
			}
			if lent, old := w.checkLease(now); lent {
				active, watch = true, watch || old
			}
			if starved {
				w.checkStarved(now)
			}
		}
		switch {
		case active:
			quietFrom = 0
		case quietFrom == 0:
			quietFrom = now
		case now-quietFrom >= int64(dogSleepAfter):
			quietFrom = 0
			if !s.sleepUntilGuest() {
				return
			}
			starvedAt = s.clock()
		}
		if watch {
			t.Reset(watching)
		} else {
			t.Reset(relaxed)
		}
	}
}

// dogSleepAfter is how long the watchdog goes on ticking with no guest
// code on any worker before it sleeps.
const dogSleepAfter = 100 * time.Millisecond

// sleepUntilGuest waits until a worker runs guest code, and returns false
// when the scheduler stops first. It marks the watchdog asleep before it
// looks at the workers a last time, and guestBegins marks a guest region
// before it looks at the mark (both sequentially consistent atomics), so
// a region that begins meanwhile is seen by one side or the other.
func (s *Scheduler) sleepUntilGuest() bool {
	s.dogAsleep.Store(true)
	defer func() {
		s.dogAsleep.Store(false)
		select {
		case <-s.dogWake: // a wake that came as it woke anyway
		default:
		}
	}()
	for _, w := range s.workers {
		if r := w.owner.Load(); r != nil && r.state.Load() == rGuest || w.lent() {
			return true
		}
	}
	select {
	case <-s.dogStop:
		return false
	case <-s.dogWake:
		return true
	}
}

// guestBegins wakes the watchdog if it sleeps: a runner has just marked
// guest code (rGuest).
func (s *Scheduler) guestBegins() {
	if s.dogAsleep.Load() {
		select {
		case s.dogWake <- struct{}{}:
		default:
		}
	}
}

// goBacklog reports whether Go has goroutines ready to run that wait for
// a P. A worker's thread that sleeps may then be one of them: Go preempted
// its goroutine (or took its P during a system call) and the goroutine
// waits in the run queue, its locked thread asleep until a P comes back.
// That is being kept from the CPU, not blocking, and a spare thread would
// wait for a P just the same. The queue need not be long: on a machine
// whose CPUs are shared, Go's Ps are held by threads the kernel does not
// run, and one goroutine can wait for tens of milliseconds behind them
// (a CPU-only handler, with two busy loops beside the server, was found
// "blocked" one to three times in 5 s when this asked for a queue as long
// as GOMAXPROCS). A thread that really blocks is caught at a later look,
// one without a queue.
func goBacklog() bool {
	m := [2]metrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}, {Name: "/sched/gomaxprocs:threads"}}
	metrics.Read(m[:])
	if m[0].Value.Kind() != metrics.KindUint64 || m[1].Value.Kind() != metrics.KindUint64 {
		return false
	}
	return m[0].Value.Uint64() > 0
}

// inspect checks the guest region that w's owner runs, if any. A region
// older than BlockedAfter/2 has its thread's CPU time sampled (time run,
// and time waiting to run); half a period later, a thread that ran or
// waited to run for less than a tenth of that time sleeps: it is held off
// the CPU (parked by Go, asleep in a system call, waiting for a lock), and
// the worker goes on without it. A thread that only paused now and then
// (a garbage collector's assist, a short lock) keeps its worker. A region
// that computes is left alone: it uses the CPU the worker stands for; so
// is one the machine is too busy to run, and one whose process is
// throttled by its CPU quota (a container's CPU limit): such a thread
// neither runs nor waits in a run queue, but its state is still runnable
// (R), where a blocked one sleeps (S, D). It reports whether the owner runs
// guest code, and whether that region is BlockedAfter/4 old or more: one
// the watchdog should look at again within BlockedAfter/2.
func (w *Worker) inspect(now int64) (guest, old bool) {
	s := w.s
	r := w.owner.Load()
	if r == nil || r.state.Load() != rGuest {
		return false, false
	}
	seq := r.guestSeq.Load()
	age := now - r.guestStart.Load()
	limit := int64(s.cfg.BlockedAfter)
	if age < limit/2 {
		return true, age >= limit/4
	}
	// Time run and time waiting to run: a thread that a busy machine
	// keeps off the CPU is not blocked (a spare would wait for the same
	// CPU); only one that sleeps is.
	ran, waited, err := s.schedstat(r.tid.Load())
	if err != nil {
		return true, true
	}
	run := ran + waited
	if r.sampleSeq != seq {
		r.sampleSeq, r.sampleAt, r.sampleRun = seq, now, run
		return true, true
	}
	if age < limit {
		return true, true
	}
	if wall := now - r.sampleAt; 10*(run-r.sampleRun) >= wall || s.goBacklog() || s.runnable(r.tid.Load()) {
		r.sampleAt, r.sampleRun = now, run
		return true, true
	}
	if r.flagged.Swap(seq) != seq && r.quietG.Load() != r.curG.Load() {
		s.blocked.Add(1)
		if s.cfg.BlockedStacks {
			w.logStack(r)
		}
	}
	w.handOver(r, true)
	return true, true
}

// handOver gives the worker that runner r owns, and whose guest code
// blocks, to a spare runner. found is the watchdog's hand-over of code it
// found blocked: the spare first runs the region's Blocked method, when
// what names it with a type that has one (see Guest).
func (w *Worker) handOver(r *runner, found bool) {
	if w.s.state.Load() != stateRunning {
		// Stopping: the runners are exiting, and a spare started now could
		// be added to the wait group after Stop's Wait saw it at zero.
		return
	}
	spare := w.takeSpare()
	if spare == nil {
		return
	}
	if !r.state.CompareAndSwap(rGuest, rAway) {
		// The guest code came back meanwhile.
		spare.state.Store(rIdle)
		return
	}
	w.away.Add(1)
	w.steals.Add(1)
	w.s.handovers.Add(1)
	if found {
		if b, ok := r.what.(interface{ Blocked() }); ok {
			spare.next, spare.nextLane, spare.hasNext = task{fn: b.Blocked, enq: w.s.clock()}, lanes.Continuation, true
		}
	}
	w.handTo(nil, spare) // the blocked runner is away, not idle
}

// takeSpare reserves an idle runner of w's, or starts one when the bound on
// spare threads allows; nil when neither is possible. The runner it returns
// is in state rCore and has not been granted the worker.
func (w *Worker) takeSpare() *runner {
	w.runMu.Lock()
	defer w.runMu.Unlock()
	for _, x := range w.runners {
		if x.state.CompareAndSwap(rIdle, rCore) {
			return x
		}
	}
	return w.newSpareLocked()
}

// SpareFree reports whether a spare thread can be had for w now: an idle
// one of w's, or room under Config.MaxSpares for a new one. Guest code that
// blocks its thread when none can be had stalls the worker until it
// returns (see Release): a server asks before it starts a handler known to
// block, and refuses the request instead. Safe from any goroutine.
func (w *Worker) SpareFree() bool {
	s := w.s
	if int(s.threads.Load())-len(s.workers) < s.cfg.MaxSpares {
		return true
	}
	w.runMu.Lock()
	defer w.runMu.Unlock()
	for _, x := range w.runners {
		if x.state.Load() == rIdle {
			return true
		}
	}
	return false
}

// takeLone reserves, for a job to run alone on its thread (Worker.GoAlone),
// a runner with no unfinished coroutine: an idle one, or a new one when
// the bound on spare threads allows; nil when neither is possible. Like
// takeSpare's, the runner is in state rCore and not yet granted the worker.
func (w *Worker) takeLone() *runner {
	w.runMu.Lock()
	defer w.runMu.Unlock()
	for _, x := range w.runners {
		if !x.state.CompareAndSwap(rIdle, rCore) {
			continue
		}
		// Reserved: what it wrote while it last owned the worker
		// happened before this owner was granted it.
		if x.live == 0 {
			return x
		}
		x.state.Store(rIdle)
	}
	return w.newSpareLocked()
}

// newSpareLocked starts a spare runner when the bound on spare threads
// allows, or returns nil; w.runMu is held.
func (w *Worker) newSpareLocked() *runner {
	s := w.s
	if int(s.threads.Load())-len(s.workers) >= s.cfg.MaxSpares {
		return nil
	}
	x := newRunner(w)
	x.state.Store(rCore)
	w.runners = append(w.runners, x)
	spares := s.threads.Add(1) - int32(len(s.workers))
	for {
		high := s.spareHigh.Load()
		if spares <= high || s.spareHigh.CompareAndSwap(high, spares) {
			break
		}
	}
	// The blocked runner is alive, so the wait group's count is above
	// zero: adding to it cannot race with Stop's Wait.
	s.wg.Add(1)
	go x.main(false, nil)
	return x
}

// runnable reports whether thread tid of this process is running or ready
// to run, as far as its state says: a thread its cgroup's CPU quota has
// throttled is, and a blocked one is not. On error it says no.
func (s *Scheduler) runnable(tid int32) bool {
	st, err := s.threadState(tid)
	return err == nil && st == 'R'
}

// threadState returns the state of thread tid of this process, the field
// after the command's name in /proc/self/task/TID/stat: R running or
// runnable, S sleeping, D in an uninterruptible wait, and so on.
func threadState(tid int32) (byte, error) {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(int(tid)) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("sched: read thread stat: %w", err)
	}
	return parseThreadState(b)
}

// parseThreadState finds the state in a /proc/PID/stat line: the name is
// in parentheses and may hold any byte, parentheses and spaces included,
// so the state follows the last ") ".
func parseThreadState(b []byte) (byte, error) {
	i := bytes.LastIndex(b, []byte(") "))
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("sched: parse thread stat %q: no state", b)
	}
	return b[i+2], nil
}

// threadSchedstat returns how long thread tid of this process has run on a
// CPU and waited in a run queue for one, in nanoseconds: the first two
// fields of /proc/self/task/TID/schedstat.
func threadSchedstat(tid int32) (run, wait int64, err error) {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(int(tid)) + "/schedstat")
	if err != nil {
		return 0, 0, fmt.Errorf("sched: read thread schedstat: %w", err)
	}
	fields := bytes.Fields(b)
	if len(fields) < 2 {
		return 0, 0, fmt.Errorf("sched: parse thread schedstat %q: too few fields", b)
	}
	var v [2]int64
	for i, f := range fields[:2] {
		if v[i], err = strconv.ParseInt(string(f), 10, 64); err != nil {
			return 0, 0, fmt.Errorf("sched: parse thread schedstat %q: %w", b, err)
		}
	}
	return v[0], v[1], nil
}

// starvedEvery is how often the watchdog reads how long each worker's
// thread waited for its CPU, and starvedShare the share of that time past
// which it says so in the log.
const (
	starvedEvery = time.Second
	starvedShare = 0.25
)

// checkStarved adds to w's run-queue wait what its thread waited for a CPU
// since the last reading, and logs (rate-limited) a worker that waited for
// more than starvedShare of the time: another process, or another of this
// process's threads, holds its CPU. Pinned, it cannot leave that CPU.
func (w *Worker) checkStarved(now int64) {
	r := w.owner.Load()
	if r == nil {
		return
	}
	tid := r.tid.Load()
	_, wait, err := w.s.schedstat(tid)
	if err != nil {
		return
	}
	if tid != w.waitTID || w.waitAt == 0 {
		w.waitTID, w.waitAt, w.waitLast = tid, now, wait
		return
	}
	d, wall := wait-w.waitLast, now-w.waitAt
	w.waitTID, w.waitAt, w.waitLast = tid, now, wait
	if d <= 0 || wall <= 0 {
		return
	}
	w.runWait.Add(d)
	if share := float64(d) / float64(wall); share > starvedShare {
		w.s.starved.Add(1)
		if ok, dropped := w.s.blockLog.Allow(time.Now()); ok {
			w.s.logger.Warn("sched: a worker's thread waited for its CPU; another process (or thread) holds that CPU",
				"worker", w.id, "cpu", w.cpu, "waited", fmt.Sprintf("%.0f%%", 100*share),
				"over", time.Duration(wall).Round(time.Millisecond), "unlogged_before", dropped)
		}
	}
}

// reportBlocked logs, rate-limited, that guest code held its worker's
// thread off the CPU. It runs on the guest's runner as the region ends.
func (w *Worker) reportBlocked(what fmt.Stringer, held time.Duration) {
	s := w.s
	ok, dropped := s.blockLog.Allow(time.Now())
	if !ok {
		return
	}
	name := "guest code"
	if what != nil {
		name = what.String()
	}
	s.logger.Warn("sched: a handler blocked its worker's thread without releasing it; wrap the blocking call in sched.Await (or an await wrapper)",
		"what", name, "held", held.Round(time.Microsecond), "worker", w.id,
		"blocked_before_unlogged", dropped)
}

// logStack logs the stack of r's blocked guest goroutine once per call
// site (Config.BlockedStacks). It runs on the watchdog.
func (w *Worker) logStack(r *runner) {
	id := r.goid.Load()
	if id == 0 {
		return
	}
	stack := goroutineStack(id)
	if stack == "" {
		return
	}
	if _, seen := w.s.stacks.LoadOrStore(callSite(stack), true); seen {
		return
	}
	w.s.logger.Warn("sched: stack of a handler blocking its worker's thread (logged once per call site)",
		"worker", w.id, "stack", stack)
}

// goroutineStack returns the stack of goroutine id from a dump of all of
// them, or "" if it has ended.
func goroutineStack(id int64) string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	head := []byte("goroutine " + strconv.FormatInt(id, 10) + " [")
	i := bytes.Index(buf, head)
	if i < 0 {
		return ""
	}
	rest := buf[i:]
	if j := bytes.Index(rest, []byte("\n\n")); j >= 0 {
		rest = rest[:j]
	}
	return string(rest)
}

// callSite is a stack without its header line, argument values and
// program counter offsets: the same for every goroutine blocked at the
// same place.
func callSite(stack string) string {
	lines := strings.Split(strings.TrimSpace(stack), "\n")
	if len(lines) > 0 {
		lines = lines[1:]
	}
	for i, l := range lines {
		if strings.HasPrefix(l, "\t") {
			if j := strings.LastIndex(l, " +0x"); j >= 0 {
				lines[i] = l[:j]
			}
			continue
		}
		if j := strings.LastIndex(l, "("); j >= 0 {
			lines[i] = l[:j]
		}
	}
	return strings.Join(lines, "\n")
}

// goid returns the calling goroutine's ID, read from its stack header.
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i >= 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseInt(string(b), 10, 64)
	return id
}
