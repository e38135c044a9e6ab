// Package httpgate puts sluice's admission pipeline (package admit) in front
// of a plain net/http handler, for servers that stay on net/http. It is the
// same pipeline as the sluice server's, with the same rejections, counters
// and policies; only how a request waits differs (its own goroutine blocks,
// where the server parks the connection).
//
//	sched, err := gate.NewGoSched(gate.GoSchedConfig{})
//	if err != nil { ... }
//	limit, err := gate.NewConcurrency(gate.ConcurrencyConfig{Limit: 256})
//	if err != nil { ... }
//	a, err := httpgate.New(admit.Config{
//		Gates: []admit.Policy{sched, limit},
//		Queue: &admit.QueueConfig{Order: queue.CoDel},
//	})
//	if err != nil { ... }
//	defer a.Close()
//	http.ListenAndServe(":8080", a.Wrap(mux))
//
// A request that the policies and gates admit is served at once. One that a
// gate refuses waits in the timed queue (if one is configured) until the
// gates admit it or it has waited admit.Config.MaxAge (100 ms by default),
// and is otherwise answered, before any of its work has begun, as the
// sluice server answers: 503 Service Unavailable (or the policy's status)
// with Retry-After, Sluice-Not-Started: 1 (safe to retry, here later or
// elsewhere), Sluice-Reject-Reason naming why, and the body
// "request not started: <reason>\n", on a connection that stays open. A
// client that goes away while its request waits takes it out of the queue
// ("queue-canceled").
//
// # Which gates
//
// Outside the sluice executor there is no busy-worker count, so gate.Busy
// does not apply (New refuses it). What does: gate.GoSched, which counts
// the Go scheduler's running and runnable goroutines, the nearest thing to
// the busy count that a goroutine-per-request server has; gate.Concurrency
// (a fixed limit, settable live); gate.Adaptive (a limit learned from the
// requests' latencies); gate.Memory (the cgroup's free memory); gate.CPU (the
// delayed OS CPU average, for comparison). The gates are asked in order; the
// reason of a refusal is the name of the gate that refused.
//
// loadshed's proportional shedding is here too, with nothing to add: the
// shedders of package shed (shed.NewLatency for the mean or a percentile,
// shed.NewErrorRate, shed.NewConcurrency, shed.NewCustom; gate.NewCPU for
// the CPU) go in admit.Config.Policies, learn from the outcomes this
// middleware records, and are answered like every refusal, with
// Retry-After and the not-started marker (see Example_shed).
//
// # The age limit
//
// net/http does not say when the kernel received a request, so the age
// limit that protects the sluice server from requests waiting in its
// sockets does not apply here: MaxAge bounds the wait in the queue only.
//
// # The rejection
//
// Before answering an HTTP/1.x request, the middleware reads and discards
// what is left of its body, up to 256 KiB, so that the connection can carry
// the next request; a larger body, one that fails to read, or one the
// client is holding back for "Expect: 100-continue" (reading it would ask
// the client to send it) gets "Connection: close" instead. HTTP/2 needs
// neither: the stream is reset. Do not modify the value slices of a
// rejection's header fields in a wrapping middleware: they are shared.
//
// # Outcomes
//
// The handler runs behind a ResponseWriter that records its status for the
// request's outcome (admit.Outcome), which latency and error policies learn
// from; it passes Flush, Hijack and io.Copy's ReadFrom through, and Unwrap
// gives http.ResponseController the writer underneath. A handler that
// panics ends its request with status 500 and the panic as its error, then
// the panic goes on to net/http.
package httpgate
