// Package reject holds the wire format of an early rejection, shared by the
// sluice server and the net/http middleware (package httpgate), so that a
// client or a load balancer recognises both the same way, and so that plain
// net/http programs need not import the server to name it.
//
// A rejected request was refused before any of its work began: the answer
// (503 Service Unavailable by default) carries Retry-After, the
// NotStartedHeader field with the value "1", meaning the request is safe to
// retry here later or on another server, and the ReasonHeader field naming
// why (a gate's name, or one of the queue reasons below).
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

// Reasons given by the timed queue.
const (
	QueueTimeout = "queue-timeout" // waited its whole timeout
	QueueFull    = "queue-full"    // the queue was full
	QueueEvicted = "queue-evicted" // pushed out by a more important request
	QueueClosed  = "queue-closed"  // the server or middleware stopped
)
