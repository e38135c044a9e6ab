// Package shed is proportional load shedding, the model of loadshed
// (Atlassian's Go library, docs/background.md): a Shedder watches one
// signal of overload and refuses each new request with a probability that
// grows with it, so that a server (or a dependency, for outgoing calls)
// past its comfortable load is sent a share of the work it can bear
// rather than all of it or none.
//
// # What it measures
//
// Each constructor builds a Shedder on one signal, each on its own scale
// (latencies as time.Duration, shares as fractions in [0, 1], in-flight
// requests as counts; never 0 to 100):
//
//   - NewLatency: the latency of the requests that ended in a rolling
//     window, its mean or a percentile of it (LatencyConfig.Percentile);
//   - NewErrorRate: the share of those that failed, an error or a status
//     of 500 or more by default (ErrorRateConfig.Failed);
//   - NewConcurrency: the requests it admitted that have not ended;
//   - NewCustom: any value a function of yours returns.
//
// Latency and error rate are read from the outcomes the pipeline passes
// to Done (admit.Outcome: latency, status, error), kept in a Window of
// Length cut into Buckets: an outcome counts for Length after it ended,
// and a window holding fewer than MinSamples outcomes counts for nothing
// (nothing is shed). Outcomes of admissions that never ran are ignored.
//
// # How the drop probability moves
//
// The reading is compared with a band [Lower, Upper]: at or below Lower
// nothing is shed, at or above Upper everything, and in between a new
// request is refused with probability (reading − Lower)/(Upper − Lower).
// With Lower equal to Upper the band is a step: nothing at or below it,
// everything above.
//
// The probability of the latency, error-rate and custom shedders is
// recomputed at most once per Config.Interval (100 ms by default), by the
// first decision or outcome after it has passed; there is no background
// goroutine. A shedder that refuses everything gets no outcomes, so its
// decisions move the window on: it admits again once the outcomes that
// closed it have left the window. The concurrency shedder reads its count
// at every decision. Stats tells the probability in force and the reading
// it came from; Refresh recomputes it at once (with Interval Manual, only
// Refresh does, which is what tests that script a signal want).
//
// Every threshold has a default, loadshed's README examples, and every
// constructor returns an error naming the field out of range and what to
// use instead:
//
//	loadshed option      sluice                              default band
//	Concurrency          NewConcurrency                      2500 to 5000 in flight
//	AverageLatency       NewLatency                          200 ms to 1 s, mean over 10 s
//	PercentileLatency    NewLatency, Percentile: 0.95        200 ms to 1 s, p95 over 10 s
//	ErrorRate            NewErrorRate                        0.2 to 1 of the outcomes failed, over 10 s
//	Aggregator           NewCustom                           the value is the probability
//	CPU                  gate.NewCPU                         0.6 to 0.8 of the CPU, 10 readings 1 s apart
//
// loadshed's CPU option is the CPU gate of package gate, on the same rule.
// The clock (Config.Clock) and the random source (Config.Rand) are
// injectable, so that tests script the signal and count the refusals
// exactly.
//
// # Where to put it
//
// A Shedder is an admit.Policy. On a server, put it in
// admit.Config.Policies, not Gates: a random refusal is final among the
// policies, whereas a gate that refuses makes the request wait in the
// queue and asks again, which turns a probability into a delay. Its
// refusals are answered as every refusal of the pipeline is: 503,
// Retry-After (the pipeline's 1 s, or Config.RetryAfter) and the
// not-started marker, with the shedder's name as the reason. Package
// httpgate runs the same pipeline in front of plain net/http.
//
// For outgoing calls, put it in client.ShedConfig.Policies: the
// client.ShedTransport asks it before each call, and a call it sheds
// fails at once, before anything is sent, so that a dependency that slows
// down or fails gets fewer calls, in proportion, until it recovers.
//
// On the sluice executor prefer the busy-worker gate (gate.NewBusy) to
// these signals for the server's own overload: it sees the overload at the
// next decision, where a latency or a CPU average lags it
// (docs/design.md, "Proportional shedding against the busy gate").
package shed
