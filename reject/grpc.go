package reject

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// gRPC status codes a refusal maps to (google.golang.org/grpc/codes).
const (
	GRPCDeadlineExceeded  = 4
	GRPCResourceExhausted = 8
	GRPCUnavailable       = 14
)

// IsGRPC reports whether r is a gRPC call: HTTP/2 with a Content-Type of
// application/grpc, or application/grpc+FORMAT (the gRPC over HTTP/2
// protocol's request headers).
func IsGRPC(r *http.Request) bool {
	if r.ProtoMajor != 2 {
		return false
	}
	ct := r.Header.Get("Content-Type")
	return ct == "application/grpc" || strings.HasPrefix(ct, "application/grpc+") || strings.HasPrefix(ct, "application/grpc;")
}

// GRPCCode is the gRPC status code of an answer: RESOURCE_EXHAUSTED for a
// quota or a share (429), DEADLINE_EXCEEDED for a caller whose time had run
// out (the reason "deadline"), UNAVAILABLE for an overload, which a client
// may retry elsewhere.
func (a *Answer) GRPCCode() int {
	switch {
	case a.Status == http.StatusTooManyRequests:
		return GRPCResourceExhausted
	case a.Reason == "deadline":
		return GRPCDeadlineExceeded
	}
	return GRPCUnavailable
}

// SetGRPCHeader fills h with the answer as a gRPC client reads it, for a
// response of status 200 with no body, which an HTTP/2 server sends as one
// HEADERS frame that ends the stream (gRPC's Trailers-Only response):
// Content-Type application/grpc, grpc-status (GRPCCode), grpc-message
// ("request not started: " and the reason, percent-encoded as the protocol
// asks), grpc-retry-pushback-ms from Retry-After (grpc-go's retries
// honour it), and the answer's own fields (NotStartedHeader, ReasonHeader,
// Retry-After), which the client reads as metadata; then extra, the fields
// of one refusal.
func (a *Answer) SetGRPCHeader(h http.Header, extra http.Header) {
	for k, vv := range a.header {
		switch k {
		case "Content-Type", "Content-Length":
			continue
		}
		h[k] = vv
	}
	for k, vv := range extra {
		h[http.CanonicalHeaderKey(k)] = vv
	}
	h["Content-Type"] = []string{"application/grpc"}
	h["Grpc-Status"] = []string{strconv.Itoa(a.GRPCCode())}
	h["Grpc-Message"] = []string{grpcMessage("request not started: " + a.Reason)}
	if a.RetryAfter >= 0 {
		h["Grpc-Retry-Pushback-Ms"] = []string{strconv.FormatInt(a.RetryAfter*1000, 10)}
	}
}

// grpcMessage percent-encodes s for grpc-message: every byte outside
// printable ASCII, and '%', as %XX.
func grpcMessage(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
