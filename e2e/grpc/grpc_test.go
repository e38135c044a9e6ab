//go:build linux

// Package grpc_test serves grpc-go's own services (the health service) on
// sluice's HTTP/2 through grpc.Server's ServeHTTP, and calls them with
// grpc-go's client: a call that sluice's admission refuses reaches the
// client as a gRPC status with the code a client acts on, the reason in
// its message, the not-started marker as metadata, and a retry pushback
// that grpc-go's retry policy honours.
package grpc_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/ratelimit"
	"github.com/sluice-go/sluice/reject"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serveHealth serves grpc-go's health service, every service SERVING, on a
// sluice server with adm as its admission, and returns a client connection
// to it (h2c, as grpc-go's insecure credentials speak it).
func serveHealth(t *testing.T, adm admit.Config, opts ...grpc.DialOption) healthpb.HealthClient {
	t.Helper()
	return serveHealthOn(t, schedtest.Runtime(t, 1), server.Config{Admission: adm}, opts...)
}

// serveHealthOn is serveHealth on the runtime rt, with the server
// configuration cfg.
func serveHealthOn(t *testing.T, rt *srt.Runtime, cfg server.Config, opts ...grpc.DialOption) healthpb.HealthClient {
	t.Helper()
	gs := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	srv, err := server.Listen(rt, "127.0.0.1:0", server.HTTPHandler(gs), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		gs.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, srv.Close(ctx))
	})
	cc, err := grpc.NewClient("passthrough:///"+srv.Addr().String(),
		append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return healthpb.NewHealthClient(cc)
}

// concurrencyOfOne is an admission that runs one call at a time and
// refuses the others at once.
func concurrencyOfOne(t *testing.T) admit.Config {
	t.Helper()
	g, err := gate.NewConcurrency(gate.ConcurrencyConfig{Limit: 1})
	require.NoError(t, err)
	return admit.Config{Gates: []admit.Policy{g}}
}

// holdOneCall opens a Watch stream, which holds the only place of a
// concurrencyOfOne admission for its life, and returns the function that
// ends it.
func holdOneCall(t *testing.T, c healthpb.HealthClient) (end func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	first, err := w.Recv()
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, first.GetStatus())
	return cancel
}

// An overload's refusal is UNAVAILABLE, with the reason in its message and
// sluice's fields as metadata; the call is served once the place is free.
func TestOverloadIsUnavailable(t *testing.T) {
	c := serveHealth(t, concurrencyOfOne(t))
	end := holdOneCall(t, c)
	var header, trailer metadata.MD
	_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&header), grpc.Trailer(&trailer))
	require.Error(t, err)
	st := status.Convert(err)
	assert.Equal(t, codes.Unavailable, st.Code(), "%v", err)
	assert.Equal(t, "request not started: concurrency", st.Message())
	md := metadata.Join(header, trailer)
	assert.Equal(t, []string{"1"}, md.Get(reject.NotStartedHeader), "the not-started marker, for a client that retries elsewhere")
	assert.Equal(t, []string{"concurrency"}, md.Get(reject.ReasonHeader))

	end()
	require.EventuallyWithT(t, func(c2 *assert.CollectT) {
		resp, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if assert.NoError(c2, err) {
			assert.Equal(c2, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
		}
	}, 10*time.Second, 20*time.Millisecond, "served once the stream has ended")
}

// A quota's refusal (429 over HTTP) is RESOURCE_EXHAUSTED.
func TestQuotaIsResourceExhausted(t *testing.T) {
	lim, err := ratelimit.New(ratelimit.Config{Window: time.Minute, Quota: 1})
	require.NoError(t, err)
	pol, err := ratelimit.NewPolicy(lim, ratelimit.PolicyConfig{Key: admit.HeaderKey("X-Tenant")})
	require.NoError(t, err)
	c := serveHealth(t, admit.Config{Policies: []admit.Policy{pol}})
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "acme")
	_, err = c.Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err, "within the quota")
	_, err = c.Check(ctx, &healthpb.HealthCheckRequest{})
	require.Error(t, err)
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
}

// grpc-go's retry policy waits out the refusal's pushback (from its
// Retry-After, 1 s) before it tries again: its own backoff here is 10 ms,
// and the place is freed 300 ms after the first attempt, so a retry that
// ignored the pushback would be refused too, and the call would fail
// after its two attempts.
func TestRetryHonoursThePushback(t *testing.T) {
	const serviceConfig = `{"methodConfig": [{"name": [{"service": "grpc.health.v1.Health"}],
		"retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.01s", "maxBackoff": "0.01s",
		"backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`
	c := serveHealth(t, concurrencyOfOne(t), grpc.WithDefaultServiceConfig(serviceConfig))
	end := holdOneCall(t, c)
	timer := time.AfterFunc(300*time.Millisecond, end)
	defer timer.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err, "retried after the pushback, once the place was free")
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
}

// A call whose deadline (grpc-timeout) leaves less than the admission's
// MinLeft is refused at once, unstarted, as DEADLINE_EXCEEDED: the message
// is the server's, so the client's own deadline had not passed. A call
// with time enough is served.
func TestShortDeadlineIsDeadlineExceeded(t *testing.T) {
	c := serveHealth(t, admit.Config{Deadline: admit.DeadlineConfig{MinLeft: time.Second}})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var header, trailer metadata.MD
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header), grpc.Trailer(&trailer))
	require.Error(t, err)
	st := status.Convert(err)
	assert.Equal(t, codes.DeadlineExceeded, st.Code(), "%v", err)
	assert.Equal(t, "request not started: deadline", st.Message(), "refused by the server, not timed out by the client")
	assert.NoError(t, ctx.Err(), "the client's deadline had not passed")
	md := metadata.Join(header, trailer)
	assert.Equal(t, []string{"deadline"}, md.Get(reject.ReasonHeader))
	assert.Empty(t, md.Get("grpc-retry-pushback-ms"), "no time is left to retry in")

	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err, "time enough")
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
}

// A method has a limit of its own: its path (/package.Service/Method) is a
// route, which sends its calls to a lane, and a gate given to that lane
// alone (gate.ForLanes) caps them. Here the health service's Watch streams
// are capped at two open at once, refused past that as UNAVAILABLE, while
// the unary Check calls beside them are all served.
func TestAMethodHasALimitOfItsOwn(t *testing.T) {
	streams, err := gate.NewConcurrency(gate.ConcurrencyConfig{Limit: 2})
	require.NoError(t, err)
	rt := schedtest.RuntimeWith(t, srt.Config{Workers: 1, Lanes: []lanes.Spec{{Name: "streams", Priority: 1}}})
	c := serveHealthOn(t, rt, server.Config{
		Lanes: server.Lanes{Routes: map[string]string{"/grpc.health.v1.Health/Watch": "streams"}},
		// In Policies, a refusal is answered at once (as a gate's would
		// be without a queue).
		Admission: admit.Config{Policies: []admit.Policy{gate.ForLanes(streams, "streams")}},
	})
	end1 := holdOneCall(t, c)
	end2 := holdOneCall(t, c)
	defer end2()

	w, err := c.Watch(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = w.Recv()
	require.Error(t, err, "a third stream of the method")
	st := status.Convert(err)
	assert.Equal(t, codes.Unavailable, st.Code(), "%v", err)
	assert.Equal(t, "request not started: concurrency", st.Message())

	for range 20 {
		resp, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{})
		require.NoError(t, err, "another method, not capped")
		assert.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
	}

	end1()
	require.EventuallyWithT(t, func(c2 *assert.CollectT) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
		if assert.NoError(c2, err) {
			_, err = w.Recv()
			assert.NoError(c2, err)
		}
	}, 10*time.Second, 20*time.Millisecond, "a stream ended: its place is free")
}
