package await

import (
	"net/http"
	"time"

	"github.com/sluice-go/sluice/admit"
)

// withTimeout returns req with the time left before its context's deadline
// in admit.TimeoutHeader (grpc-timeout's format), unless it has no
// deadline or already carries the field. Inside a sluice handler that
// passes its request's context on, the deadline is the one the server set
// from the handler's own caller's field, so the time forwarded is what the
// caller left minus what has been spent since: the next server can reject,
// unstarted, a request that has no time left. req itself is not modified.
func withTimeout(req *http.Request) *http.Request {
	dl, ok := req.Context().Deadline()
	if !ok {
		return req
	}
	if _, set := req.Header[admit.TimeoutHeader]; set {
		return req
	}
	r := *req
	r.Header = req.Header.Clone()
	if r.Header == nil {
		r.Header = http.Header{}
	}
	r.Header.Set(admit.TimeoutHeader, admit.FormatTimeout(time.Until(dl)))
	return &r
}
