// Package gate holds sluice's admission gates: each answers "is there room
// for a new request now?" before any of the request's work has begun, so
// that a refusal can wait a short time in the timed queue or be rejected as
// safe to retry. They are the signals of overload: busy workers,
// concurrency limits (fixed or adaptive), free memory, the OS CPU average,
// and the Go scheduler's run queues for plain net/http; and loadshed's
// proportional shedding on latency, errors, requests in flight or a value
// of your own (Shed).
//
// # Contract
//
// A gate is an admit.Policy that goes in admit.Config.Gates: the admission
// pipeline (package admit) asks it with Admit, when a request's head has
// been read and again each time the queue tries to start a waiting request,
// and calls Done exactly once for every request it admitted. Every gate
// here is safe for concurrent use, takes no lock and allocates nothing in
// Admit and Done; state that is expensive to read (memory, CPU) is sampled
// by a background goroutine and kept in an atomic. A gate refuses with a
// Refusal built once, whose reason is its name.
//
// Gates that can tell when they may have opened implement admit.Attacher
// and call the pipeline's Wake, so that a waiting request starts at once,
// without polling: Busy when a worker of the executor goes idle (for one
// request), Concurrency and Adaptive when their limit rises (for as many
// as it rose), Memory and CPU when a refresh opens them (for any number).
// A slot freed by Done needs no wake-up: the pipeline starts a waiting
// request after every Done. The pipeline detaches them when it is closed.
//
// # The busy-worker gate: what 50% means
//
// Busy reads the executor's instantaneous busy-worker count
// (sched.Scheduler.Busy: workers not parked in epoll_wait, one atomic load)
// and admits while busy <= limit, with limit = max(1, floor(Fraction ×
// workers)) and Fraction 0.5 by default, for I/O-bound handlers ("io_isolated"
// in docs/background.md).
//
// The deciding worker counts itself. The server decides while parsing the
// request, on the connection's worker, and that worker is busy, so it is in
// the count it reads. Hence, on 2 workers, 50% means a limit of 1: a new
// request is admitted while the deciding worker is the only busy one (the
// other worker is idle, free to run the I/O continuations of requests
// already started), and refused while both are busy. On 16 workers the limit
// is 8: the deciding worker and at most 7 others.
//
//	workers  Fraction  limit  a decision on a worker admits while
//	1        any       1      always
//	2        0.5       1      the other worker is idle
//	2        1.0       2      always
//	16       0.5       8      at most 7 other workers are busy
//	16       1.0       16     always
//
// A caller that the count does not include (admit.Attempt.Spare: a worker
// that went idle starting a waiting request) is admitted while busy + 1 <=
// limit, the same rule once the request has made one more worker busy.
//
// Where a decision on a worker always admits (one worker, Fraction 1), the
// busy count cannot protect the server: CPU-bound handlers run to the end
// on their worker, and the requests that wait for them wait in the
// kernel's socket buffers, where no count sees them. What protects that
// case is the pipeline's age limit (admit.Config.MaxAge), which reads when
// the kernel received each request.
//
// # Concurrency limits
//
// Concurrency is a fixed limit on requests in flight, settable live;
// lowering it below the in-flight count revokes nothing and admits nothing
// until requests ending have repaid the excess. Adaptive is a concurrency
// limit tuned from the latencies of the requests it admitted
// (admit.Outcome) by Netflix's Gradient2 controller: it grows while latency
// stays at its long-term average and shrinks when latency rises above it.
// It needs no clock (its windows are counted in samples) and no probing.
// Like every latency-driven limit it also shrinks when a downstream
// dependency slows down, although this server is then not the bottleneck.
// On the executor, prefer Busy; Adaptive is for plain net/http, which has
// no busy count. docs/design.md compares it with the other controllers.
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
// # Proportional shedding: loadshed's options
//
// Shed is the model of loadshed, the Go library people reach for today
// (docs/background.md): a signal is compared with a band [Lower, Upper],
// and a new request is refused with a probability that rises linearly
// from 0 at Lower to 1 at Upper. Each of loadshed's options is here, each
// threshold on one scale (latencies as time.Duration, shares as fractions
// in [0, 1], in-flight requests as counts; never 0 to 100), every
// threshold with a default (loadshed's README examples), and every
// constructor returning an error that names a value out of range:
//
//	loadshed option      sluice                                   default band
//	CPU                  NewCPU (CPUConfig)                       0.6 to 0.8 of the CPU, 10 readings 1 s apart
//	Concurrency          NewConcurrencyShed                       2500 to 5000 in flight
//	AverageLatency       NewLatencyShed                           200 ms to 1 s, mean over 10 s
//	PercentileLatency    NewLatencyShed, Percentile: 0.95         200 ms to 1 s, p95 over 10 s
//	ErrorRate            NewErrorRateShed                         0.2 to 1 of the outcomes failed, over 10 s
//	Aggregator           NewCustomShed                            the value is the probability
//
// The shedders learn from the outcome the pipeline passes to Done
// (admit.Outcome: latency, status, error); their windows run on an
// injectable clock and their draws on an injectable source, so that tests
// script the metrics and count the refusals exactly. Put them in
// admit.Config.Policies: a random refusal is final there, whereas a gate
// that refuses makes the request wait and asks again. Their refusals carry
// Retry-After (the pipeline's 1 s, or ShedOptions.RetryAfter) and the
// not-started marker, as every refusal of the pipeline does.
//
// Package httpgate runs them in front of plain net/http and package
// client's ShedTransport on outgoing calls. On the sluice executor prefer
// Busy: the OS CPU average lags the overload by seconds (docs/design.md,
// "Proportional shedding against the busy gate").
//
// # Composition
//
// The pipeline asks admit.Config.Gates in order and stops at the first
// refusal, whose reason names the gate; it gives back the gates before it
// (Done with a canceled outcome). Put the cheapest and most often closed
// gate first.
package gate
