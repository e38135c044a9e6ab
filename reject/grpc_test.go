package reject

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestIsGRPC(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/grpc": true, "application/grpc+proto": true, "application/grpc;charset=utf-8": true,
		"application/grpcx": false, "application/json": false, "": false,
	} {
		r := &http.Request{ProtoMajor: 2, Header: http.Header{"Content-Type": {ct}}}
		assert.Equal(t, want, IsGRPC(r), ct)
	}
	r := &http.Request{ProtoMajor: 1, Header: http.Header{"Content-Type": {"application/grpc"}}}
	assert.False(t, IsGRPC(r), "gRPC is HTTP/2")
}

func TestGRPCCode(t *testing.T) {
	assert.Equal(t, GRPCUnavailable, NewAnswer("busy", 503, time.Second, nil).GRPCCode())
	assert.Equal(t, GRPCResourceExhausted, NewAnswer("rate-limit", 429, time.Second, nil).GRPCCode())
	assert.Equal(t, GRPCDeadlineExceeded, NewAnswer("deadline", 503, -1, nil).GRPCCode())
}

func TestGRPCMessage(t *testing.T) {
	assert.Equal(t, "request not started: busy", grpcMessage("request not started: busy"))
	assert.Equal(t, "100%25 caf%C3%A9%0A", grpcMessage("100% café\n"))
}
