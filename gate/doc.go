// Package gate holds sluice's admission gates: each answers "may a new
// request start now?" before any of the request's work has begun, so that a
// refusal can be queued for a short time or rejected as safe to retry (seeds
// 01 and 03).
//
// # Contract
//
// A Gate's Acquire returns true to admit one request; the caller then calls
// Release exactly once when the request ends, with how long it ran. Every
// gate here is safe for concurrent use, takes no lock and allocates nothing
// in Acquire and Release; state that is expensive to read (memory, CPU) is
// sampled by a background goroutine and kept in an atomic. Release(0) frees
// the slot without a latency sample; Release(Undo) gives back an
// acquisition that never became a request (what a Chain does when a later
// member refuses) and also calls no OnOpen callback.
//
// A gate that can tell when it may have opened implements Waker, so that
// the timed queue starts its head at once instead of polling: Busy through
// the executor's idle hook, Concurrency and Adaptive when a Release frees a
// slot or the limit rises, Memory and CPU when a refresh opens them.
// Callbacks may come from any goroutine and spuriously.
//
// # The busy-worker gate: what 50% means
//
// Busy reads the executor's instantaneous busy-worker count
// (sched.Scheduler.Busy: workers not parked in epoll_wait, one atomic load)
// and admits while busy <= limit, with limit = max(1, floor(Fraction ×
// workers)) and Fraction 0.5 by default (I/O-bound work, the seeds'
// io_isolated).
//
// The deciding worker counts itself. The server decides while parsing the
// request, on the connection's worker, and that worker is busy, so it is in
// the count it reads. Hence, on 2 workers, 50% means a limit of 1: a new
// request is admitted while the deciding worker is the only busy one (the
// other worker is idle, free to run the I/O continuations of requests
// already started), and refused while both are busy. On 16 workers the limit
// is 8: the deciding worker and at most 7 others.
//
// The isolated mode (CPU-bound handlers) admits while fewer requests run
// than there are workers, the seeds' rule: limit = workers. A CPU-bound
// handler runs to completion on its worker, so the deciding worker, which is
// parsing, runs no request, and Acquire on a worker always admits; the
// overload protection of that model is the request's age at parse time
// (server.Config.MaxAge: the wait in the kernel's socket buffers counts
// against the queue timeout). Fraction 1 is the same limit.
//
//	workers  rule       limit  Acquire on a worker admits while
//	2        0.5        1      the other worker is idle
//	2        isolated   2      always (age bounds the wait)
//	2        1.0        2      always
//	16       0.5        8      at most 7 other workers are busy
//	16       isolated   16     always (age bounds the wait)
//
// A caller that the count does not include uses AcquireIdle, which admits
// while busy + 1 <= limit (the same rule, once the request has made one more
// worker busy). That is the case of an OnIdle hook, which runs after its
// worker stopped counting as busy: the timed queue, starting its head when a
// worker goes idle, must use AcquireIdle (or Chain.AdmitIdle), or it would
// admit one request too many. Release is a no-op.
//
// # Concurrency limits
//
// Concurrency is a fixed limit on requests in flight, settable live;
// lowering it below the in-flight count revokes nothing and admits nothing
// until requests ending have repaid the excess. Adaptive is a concurrency
// limit tuned by a controller from the latencies given to Release.
//
// The controller is Netflix's Gradient2, chosen after comparing it with the
// other designs: Netflix's Vegas estimates the queue as limit × (1 −
// minRTT/RTT) and so depends on an absolute minimum latency, which bursty
// request mixes drive impractically low and which has to be re-probed; AIMD
// grows additively and halves on drops or timeouts, so it learns only by
// failing requests; Envoy's gradient controller compares a percentile of each
// sampling window with a minRTT that it re-measures periodically by pinning
// the concurrency to a minimum for a while, which on a server means refusing
// healthy traffic on purpose every interval; fbthrift's CPU concurrency
// controller runs a periodic loop that cuts the limit multiplicatively while
// CPU load is over a target and raises it additively when usage nears the
// limit, which needs a clock, a background loop and a CPU signal, and the busy
// gate already reads the CPU signal directly and instantly. Gradient2 compares
// the mean latency of the last window with a long-term exponential average,
// gradient = clamp(long/short, 0.5, 1), limit = (1−s)·limit +
// s·(gradient·limit + queue), so it needs neither a minimum nor probing nor a
// clock: windows here are counted in samples, a test drives it by the
// latencies it passes, and Acquire stays one compare-and-swap while Release
// adds to one packed atomic word and takes a mutex once per window. Its known
// weakness is the seeds' objection to every latency-driven limit: when a
// downstream dependency slows down, it shrinks (until its long average has
// caught up with the new latency) although this server is not the
// bottleneck. On the executor, the busy gate is the default; Adaptive is for
// plain net/http, which has no busy count.
//
// # Memory and CPU
//
// Memory refuses while free memory, as the process's cgroup sees it (v2
// memory.max and memory.current, else v1 memory.limit_in_bytes and
// memory.usage_in_bytes, in the cgroup and its ancestors, inactive page cache
// counted as free), or as the machine sees it (MemAvailable), is below a
// threshold: 10% of the limit by default. CPU is the OS CPU utilisation from
// /proc/stat averaged over a window, with loadshed's proportional rejection
// between two thresholds; it is delayed by nature and kept for comparison.
// Both refresh in a background goroutine (Close stops it) or, with Interval
// Manual, when Refresh is called; their file system root is injectable.
//
// # Composition
//
// All(gates...) makes a Chain: Admit asks the members in order and returns
// the first that refuses, after giving back the ones it had acquired. Put
// the cheapest and most often closed gate first.
//
// # Cost
//
// Measured with go test -run '^$' -bench . ./gate (Go 1.26, 2-vCPU VM,
// medians of 3 runs of 1 s): Acquire and Release of an admitted request, on
// one goroutine, take about 4 ns for Busy over a fake source and 6 ns over a
// real sched.Scheduler, 15 ns for Concurrency, 22 ns for Adaptive, 3 ns for
// Memory, 4 ns for CPU and 22 ns for All(Busy, Concurrency); a refusal takes
// 2 to 3 ns for Busy and Concurrency, 12 ns for CPU in its proportional band
// and 20 ns for a chain whose second member refuses. Nothing allocates. With
// both CPUs deciding at once (BenchmarkAcquireReleaseParallel) the gates that
// count requests share a cache line: Concurrency takes about 38 ns and
// Adaptive about 60 ns per decision, the others stay under 3 ns.
//
// # GoSched against the executor's busy count
//
// Plain net/http has no executor, so no busy-worker count; GoSched is the
// nearest substitute, and the two count different things. Busy reads
// sched.Scheduler.Busy: the executor's workers that are not parked in
// epoll_wait, one per OS thread the executor owns. It is instantaneous and
// exact because the executor itself maintains it, with one atomic add when a
// worker parks or wakes, and because a worker is exactly the unit of
// capacity: a busy worker is one that cannot pick up a new connection's
// events now, whatever it is doing (running a handler, or blocked in a
// system call on the worker's thread, which still holds the worker).
// GoSched counts goroutines, from the Go scheduler's gauges
// /sched/goroutines/running (goroutines on a P, executing Go code) and
// /sched/goroutines/runnable (ready, waiting in a run queue for a P), new in
// Go 1.26. A goroutine blocked in a system call or cgo call is not running
// (the runtime hands its P to another goroutine, and it shows up under
// /sched/goroutines/not-in-go instead), nor is one waiting on the network,
// a channel or a lock: those are not using a CPU and do not close the
// gate. running is at most GOMAXPROCS, so on its own it can only say "every
// P is busy"; runnable says by how much demand exceeds the Ps, and a
// runnable backlog is the sign of CPU overload that GoSched adds to the
// count (a Fraction above 1 tolerates a bounded backlog). What it counts is
// every goroutine of the process, not requests: GC mark workers (a quarter
// of the Ps during a cycle), background work and the handlers of other
// servers all count. And it is not maintained by anyone for GoSched: each
// reading takes the runtime's metrics semaphore and the global scheduler
// lock and walks every P (75 ns on 2 Ps, more with more Ps), which is why
// GoSched caches a reading for MaxAge (50 µs) and refreshes it on the first
// decision after that, rather than reading on every decision (one
// sched.lock acquisition per request from every P) or from a background
// sampler (which on the 2-vCPU VM cost 2.6% to 3.8% of one CPU in an
// otherwise idle process at intervals from 1 ms to 50 µs, and is stale by
// its interval however busy the server is). The deciding goroutine counts
// itself in a reading it takes, as the deciding worker does in Busy; a
// decision on a cached reading is up to MaxAge late, and GoSched has no
// Waker. Measured as above with go test -run '^$' -bench GoSched ./gate
// (medians of 3 runs): an admitted decision and its release take about
// 3 ns for Busy over a real sched.Scheduler against about 32 ns for
// GoSched on its cached reading, nearly all of it the monotonic clock read
// that checks the reading's age (29 ns on this VM); reading
// runtime/metrics on every decision would take about 74 ns with a reused
// sample array, 86 ns with a sync.Pool'd one from two goroutines at once,
// and one reading as GoSched takes it (metrics, GOMAXPROCS, the clock and
// its mutex) about 160 ns. Nothing allocates.
package gate
