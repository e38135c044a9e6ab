// Package queue is sluice's timed admission queue: a request that the gate
// refuses waits here for a short, fixed time and is then rejected, before any
// of its work has started.
//
// # Why a timed queue
//
// An overloaded server has two bad answers to a request it cannot start now.
// Rejecting at once throws the request away just before a worker would have
// been free for it; the client retries, which takes 1 to 10 ms to a nearby
// machine and 50 to 200 ms across a continent, and routing state is always a
// little stale, so a quick retry often lands on this same server again.
// Queueing without bound keeps every request until its client has given up,
// so the server spends its capacity on answers nobody reads. The timed queue
// sits in between: wait a fixed time, then reject. A short spike is smoothed
// out; a request that would wait longer than the timeout goes back to its
// client early, untouched, and is safe to retry elsewhere. Every request
// carries the same timeout, 100 ms by default ([DefaultTimeout]), as the
// article "Rejecting requests" recommends (see docs/background.md).
//
// # Bufferbloat, and why CoDel
//
// The queue absorbs spikes; it is not a tool for constant overload. Under
// constant overload a plain timed queue stays full, and every request that
// gets through has waited almost the whole timeout: 100 ms of latency added
// for nothing, the bufferbloat of network routers. The fix that networks use
// is CoDel (Nichols and Jacobson, "Controlling Queue Delay", 2012): tell a
// good queue, which fills and drains, from a bad, standing one, whose
// requests have all waited long for a while ([Detector]), and in a standing
// queue keep only a short delay.
// Facebook applied this to server request queues ("Fail at Scale", Ben
// Maurer, ACM Queue, 2015) together with adaptive LIFO: normally serve in
// arrival order, but while a queue is standing serve the newest request
// first, since the oldest has most likely been abandoned already ("How To
// Build Servers That Don't Crash When Overloaded" asks whether a stack would
// serve better than a queue for the same reason). The order [CoDel] implements that combination; see its
// documentation for the exact rule.
//
// # Priority classes
//
// Every entry has a [Class]. Classes are strict priorities: an entry of a
// lower class value always starts before any entry of a higher one, whatever
// their arrival times; [Order] applies within a class. A queue that is full
// makes room for a more important entry by evicting the least important one
// (see [Config.MaxLen]). Sheddable work can therefore starve while more
// important work waits, which is the point: it times out and is rejected,
// safe to retry.
//
// # Using it
//
// Servers do not use the queue directly: the admission pipeline (package
// admit) owns one, with its timer and its gates, for the sluice server and
// the net/http middleware alike. This section is for other owners.
//
// The core is callback based, so that the sluice server can run each entry's
// callbacks on the worker that owns its connection (it wraps them with the
// worker's Submit): the queue calls them from whichever goroutine calls
// [Queue.Push], [Queue.Pump], [Queue.Expire] or [Queue.Close], and never while
// holding its lock. The owner:
//
//   - calls Push when the gate refuses a request, then calls Pump once itself
//     (the gate may have opened between its refusal and the push). A request
//     that finds entries waiting ([Queue.Len] > 0) is pushed even if the gate
//     is open, so that it does not overtake them;
//   - calls Pump whenever the gate may have opened: a request ended, a worker
//     went idle. Pump starts the head at once; nothing polls;
//   - calls Expire when the earliest deadline arrives, from a timer that
//     [Config.Arm] keeps set (or from a periodic tick);
//   - calls Remove when the client of a waiting entry goes away.
//
// Goroutine-per-request servers (net/http) use [Queue.Wait], which pushes an
// entry and blocks on a channel until it is started or rejected or its
// context ends. With [Config.Admit] set, Wait pumps after its own push.
//
// Every operation takes the queue's one mutex for a short critical section
// and costs O(1) in the queue's length plus O(1) per entry it starts or
// rejects (at most 2 x MaxClasses list heads are looked at); Push allocates
// nothing when the caller embeds the [Entry] in its own
// per-request struct. Memory is bounded by [Config.MaxLen].
package queue
