// Package admit is sluice's admission pipeline: the one place that decides,
// before any of a request's work has begun, whether it starts now, waits a
// short time, or is rejected unstarted (and so is safe to retry here later
// or on another server). The sluice server and the net/http middleware
// (package httpgate) are thin adapters over it.
//
// # What decides
//
// A Pipeline is built from a Config, in this order:
//
//  1. The age limit (Config.MaxAge, 100 ms by default). A request that
//     arrived longer ago than that is rejected with the reason
//     "queue-timeout". On the sluice server the age counts from when the
//     kernel received the bytes that completed the request's head, so it
//     includes the time the request waited in the socket buffers while
//     every worker was busy (the wait that no gate sees), but not the time
//     a slow client took to send it. A line that fits in the limit is
//     served, however long it stands (a closed loop of clients always has
//     one). Once requests at the limit have kept coming for 10 ms
//     (Config.Interval / 10: the line reached the limit and stays there,
//     an overload), the line is standing and the limit is 5 ms
//     (Config.Target), or the time the server takes to start two requests
//     per worker when a slow handler makes that longer (up to half of
//     MaxAge), so the old are rejected at once and the fresh are served;
//     see queue.Detector. When a policy knows the clients' shares
//     (ShareKeeper: package tenant's drops in force), only the requests
//     not within their share get the lower limit; the others keep MaxAge.
//     A pipeline with no gates, or with the queue, also refuses a request
//     beyond its share once it has waited half of MaxAge, line or no
//     line, and queues it behind every other (Env.TrimsShares).
//     Unless that is futile: clients that
//     resend the moment they are refused keep their line whatever the
//     server answers, and when the lower limit refuses more than
//     FutileRatio requests per admission over a window, the limit is
//     MaxAge again for the rest of the standing period.
//  2. The policies (Config.Policies), in order: per-request rules whose
//     refusal is final (quotas, tenant shares, shedding). The first refusal
//     rejects the request, with the policy's reason and status.
//  3. The gates (Config.Gates), in order: signals of overload (busy
//     workers, concurrency, memory; package gate). The first refusal makes
//     the request wait in the queue, if there is one, or rejects it. A
//     request that finds others waiting joins them without asking, so as
//     not to overtake them.
//  4. The queue (Config.Queue): a waiting request starts as soon as the
//     gates admit it (a request ends, a worker goes idle, a limit rises: no
//     polling), or is rejected when it has waited MaxAge since its arrival.
//
// A rejection is answered 503 (or the policy's status, 429 for a quota),
// with Retry-After, Sluice-Not-Started: 1 and Sluice-Reject-Reason (package
// reject has the wire format), on a connection that stays open. A client
// refused because its request waited MaxAge, when more clients are open
// than the server serves within the limit (Servable), may be left unread
// until its Retry-After has passed (Hold; the sluice server parks its
// connection).
//
// # Using it
//
// Users configure a Config and give it to the server (server.Config's
// Admission field) or to the middleware (httpgate.New); the adapter builds
// the Pipeline. A Config that cannot work is an error there, at
// construction: a queue without a gate, a queue without a wait limit, a
// gate that needs the sluice executor outside it.
//
// A new rule is one type that implements Policy (Admit and Done), plus
// Attacher if it needs the executor or can tell when it may have opened. It
// goes in Config.Policies or Config.Gates; neither adapter changes for it.
// A rule that counts or shares per caller (a quota, a tenant's share) says
// who the caller is with a Key: the client's address (ClientIP,
// ClientPrefix), a header field (HeaderKey), or a function (KeyFunc).
//
// # Writing an adapter
//
// An adapter owns a Ticket per request, fills its Attempt, and calls
// Decide on the request's own goroutine or worker; it runs the request when
// Decide says Admitted (or when OnStart is called for a request that
// waited), and calls Done when the request ends. It answers Rejected
// requests with Ticket.Answer, without running anything. Everything else,
// including the counters (Stats), is the pipeline's.
package admit
