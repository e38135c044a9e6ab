//go:build linux

package grpc_test

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/internal/syncbuf"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/server"
)

// openStreamsEnv sets how many streams TestManyOpenStreamsBesideUnaryCalls
// opens: 10000 for the target of 10,000, 1,000 by default.
const openStreamsEnv = "SLUICE_E2E_OPEN_STREAMS"

// unaryRateEnv sets the unary calls' rate, a second: 500 by default.
const unaryRateEnv = "SLUICE_E2E_UNARY_RATE"

// streamsPerConn is how many streams the test opens on one connection,
// under x/net's default limit of 250 concurrent streams.
const streamsPerConn = 200

// Open server streams cost goroutines, never the server: with N health
// Watch streams open and idle on a two-worker sluice server (1,000 by
// default, 10,000 with SLUICE_E2E_OPEN_STREAMS=10000), 1,000 unary Check
// calls sent beside them at 500 a second (SLUICE_E2E_UNARY_RATE) are all
// answered, and nothing is logged as blocking. The calls' latency is
// logged, not asserted:
//
//	SLUICE_E2E_OPEN_STREAMS=10000 SLUICE_E2E_UNARY_RATE=4000 go test ./e2e/grpc -run ManyOpenStreams -v
func TestManyOpenStreamsBesideUnaryCalls(t *testing.T) {
	n, rate := 1000, 500
	for _, e := range []struct {
		name string
		v    *int
	}{{openStreamsEnv, &n}, {unaryRateEnv, &rate}} {
		if v := os.Getenv(e.name); v != "" {
			x, err := strconv.Atoi(v)
			require.NoError(t, err, "%s must be a number", e.name)
			require.Positive(t, x, "%s must be positive", e.name)
			*e.v = x
		}
	}
	if testing.Short() {
		n = min(n, 200)
	}
	var logs syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	rt := schedtest.RuntimeWith(t, srt.Config{Workers: 2, Logger: logger})
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	srv, err := server.Listen(rt, "127.0.0.1:0", server.HTTPHandler(gs), server.Config{Logger: logger})
	require.NoError(t, err)
	t.Cleanup(func() {
		gs.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, srv.Close(ctx))
	})
	dial := func() healthpb.HealthClient {
		cc, err := grpc.NewClient("passthrough:///"+srv.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		t.Cleanup(func() { cc.Close() })
		return healthpb.NewHealthClient(cc)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var clients []healthpb.HealthClient
	for range (n + streamsPerConn - 1) / streamsPerConn {
		clients = append(clients, dial())
	}
	opened := time.Now()
	var g errgroup.Group
	g.SetLimit(64)
	var open atomic.Int64
	for i := range n {
		g.Go(func() error {
			w, err := clients[i/streamsPerConn].Watch(ctx, &healthpb.HealthCheckRequest{})
			if err != nil {
				return err
			}
			if _, err := w.Recv(); err != nil {
				return err
			}
			open.Add(1)
			return nil
		})
	}
	require.NoError(t, g.Wait())
	require.Equal(t, int64(n), open.Load(), "every stream open")
	t.Logf("%d streams open in %v", n, time.Since(opened).Round(time.Millisecond))

	// Unary calls beside them, on a connection of their own, at rate a
	// second, each with a second to answer.
	unary := dial()
	const calls = 1000
	var (
		mu   sync.Mutex
		took []time.Duration
		wg   sync.WaitGroup
	)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for range calls {
		<-tick.C
		wg.Go(func() {
			cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
			defer ccancel()
			start := time.Now()
			_, err := unary.Check(cctx, &healthpb.HealthCheckRequest{})
			d := time.Since(start)
			if assert.NoError(t, err) {
				mu.Lock()
				took = append(took, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, took, calls, "every unary call answered")
	slices.Sort(took)
	t.Logf("unary at %d/s beside %d open streams: p50 %v, p99 %v, max %v",
		rate, n, took[calls/2].Round(time.Microsecond), took[calls*99/100].Round(time.Microsecond), took[calls-1].Round(time.Microsecond))
	assert.NotContains(t, logs.String(), "level=WARN", "nothing logged as blocking")
	assert.NotContains(t, logs.String(), "level=ERROR")
	cancel()
}
