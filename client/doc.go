// Package client is the client side of overload handling: an
// http.RoundTripper that spreads requests over a set of backends, retries
// what is safe to retry without turning an overload into a retry storm,
// and cuts off backends that keep failing. It reads what sluice servers
// send: the not-started marker of an early rejection (package reject), the
// load hint (admit.LoadHeader), and it sends the time its caller has left
// (admit.TimeoutHeader), which their admission honours.
//
// # Composition
//
// The policies apply in this order, outermost first (as failsafe-go
// composes its policies, each wrapping the next):
//
//		retry(budget) → balancer → breaker(per backend) → deadline header → Base
//
//	  - retry sees the whole request: all its attempts, its context and its
//	    deadline, and the retry budget, shared by all requests.
//	  - the balancer picks each attempt's backend by the power of two
//	    choices: of two backends drawn at random, the one with the lower
//	    cost, latency average × (this client's requests in flight there + 1)
//	    × (1 + the server's load hint). Backends whose breaker is open, and
//	    backends that refused this request unstarted, are not drawn.
//	  - each backend's breaker counts the outcomes of the attempts sent
//	    there, and opens on a failure rate over a window or on errors in a
//	    row (a backend that is down); an open breaker removes the backend
//	    from the draw, so a request fails fast (ErrNoBackend) only when
//	    every backend is open.
//	  - each attempt carries the time left before the context's deadline.
//	  - Base sends it; by default an await.Transport, so that inside a
//	    sluice handler the wait releases the worker.
//
// # What is retried
//
// An early rejection (Sluice-Not-Started: 1) or a connection refused
// means the request never started: it is retried at once on another
// backend, never on the one that refused it, while the deadline leaves
// time. A request that may have started (an error after it was sent, a
// 429, 502, 503 or 504 without the marker) is retried only when
// RetryConfig.RetryStarted is set and the request is idempotent, after an
// exponential backoff with full jitter, and at least the Retry-After of a
// 429 or 503. Every retry is taken from the budget (BudgetConfig): by
// default at most 10% of the requests, or 10 a second when that is more.
//
// # Retry at one level
//
// In a chain of services, retries at every level multiply: three levels of
// three attempts make 27 requests to the last one. Retry at one level only
// (usually the one nearest the user, or the load balancer) and fail fast at
// the others: there, set RetryConfig.MaxAttempts to 1, which keeps the
// balancer and the breakers, or, to keep the cheap retry of not-started
// rejections only, leave RetryStarted unset and keep the budget.
//
// # In a sluice handler
//
// Create the Transport once, and use it through an http.Client in
// handlers, with the request's context: its waits (the round trip, reading
// the body, backoffs) release the worker, since Base defaults to an
// await.Transport and the real clock sleeps with await.Sleep, and the time
// the handler's own caller has left (which the sluice server turns into
// the context's deadline) is forwarded.
//
// # Shedding outgoing calls
//
// ShedTransport sheds calls before they are sent, as loadshed's transport
// wrapper does: the shedders of package shed (latency, a percentile, error
// rate, calls in flight, a value of your own) decide each call and learn
// from its outcome, and a shed call fails at once with an error matching
// ErrShed (or gets ShedResponse's synthetic 503). Put it outside a
// Transport (the Transport as its Base), so that a shed call is neither
// retried nor taken from the retry budget.
package client
