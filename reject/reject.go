// Package reject holds the wire format of an early rejection, shared by the
// sluice server and the net/http middleware (package httpgate), so that a
// client or a load balancer recognises both the same way, and so that plain
// net/http programs need not import the server to name it.
//
// A rejected request was refused before any of its work began: the answer
// (503 Service Unavailable for an overload, 429 Too Many Requests for a
// quota) carries Retry-After, the NotStartedHeader field with the value
// "1", meaning the request is safe to retry here later or on another
// server, and the ReasonHeader field naming why (a gate's name, or one of
// the reasons below). The admission pipeline (package admit) decides and
// counts rejections; this package only says how they look.
package reject

// Header fields of a rejection.
const (
	// NotStartedHeader marks a response to a request the server refused
	// before any work on it began: it is safe to retry.
	NotStartedHeader = "Sluice-Not-Started"
	// ReasonHeader says why: the name of the gate that refused, or one of
	// the queue reasons.
	ReasonHeader = "Sluice-Reject-Reason"
)

// Reasons given by the admission pipeline itself.
const (
	// QueueTimeout: the request waited its whole time, in the kernel's
	// socket buffers or in the queue, counted from its arrival.
	QueueTimeout = "queue-timeout"
	// QueueFull: the queue was full.
	QueueFull = "queue-full"
	// QueueEvicted: pushed out of the queue by a more important request.
	QueueEvicted = "queue-evicted"
	// QueueClosed: the server or middleware was stopping.
	QueueClosed = "queue-closed"
	// QueueCanceled: the client went away while the request waited. It
	// is the reason of the answer a client still there would read, and is
	// counted as a cancellation, not as a rejection (admit.Stats.Canceled).
	QueueCanceled = "queue-canceled"
)

// Deadline is the reason of a request whose caller's time (the
// Sluice-Timeout field, see admit.TimeoutHeader) had run out, or was too
// short to start it, when it was decided. It is answered without
// Retry-After.
const Deadline = "deadline"

// RateLimit is the reason of a request over its quota (package ratelimit),
// answered 429 Too Many Requests with Retry-After and the RateLimit and
// RateLimit-Policy fields saying which quota and when it has room again.
const RateLimit = "rate-limit"
