//go:build linux

package main

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
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/sluice-go/sluice"
	srt "github.com/sluice-go/sluice/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestGRPCOnSluice serves the example's gRPC server, with room for one
// call, and calls it with grpc-go's client: a check is served; while a
// Watch stream holds the one place, a check is refused UNAVAILABLE.
func TestGRPCOnSluice(t *testing.T) {
	cfg, err := config(1)
	require.NoError(t, err)
	cfg.Runtime = srt.Config{Workers: 1, Pinning: srt.PinOff, GOMAXPROCS: -1}
	gs := newGRPCServer()
	srv, err := sluice.Listen("127.0.0.1:0", gs, cfg)
	require.NoError(t, err)
	defer func() {
		gs.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, srv.Stop(ctx))
	}()
	cc, err := grpc.NewClient("passthrough:///"+srv.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer cc.Close()
	c := healthpb.NewHealthClient(cc)

	resp, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())

	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = w.Recv()
	require.NoError(t, err)
	_, err = c.Check(context.Background(), &healthpb.HealthCheckRequest{})
	assert.Equal(t, codes.Unavailable, status.Code(err), "the one place is the stream's: %v", err)
	cancel()

	_, err = config(-1)
	assert.ErrorContains(t, err, "-max-calls")
}
