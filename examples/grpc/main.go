// Command grpc serves a gRPC server, grpc-go's *grpc.Server with its
// services registered as usual, on sluice: a *grpc.Server is an
// http.Handler (ServeHTTP), and sluice speaks HTTP/2, so only the line
// that starts the server differs from a grpc-go program.
//
//	go run ./examples/grpc -addr 127.0.0.1:50051
//	grpcurl -plaintext 127.0.0.1:50051 grpc.health.v1.Health/Check
//
// Here the service is grpc-go's health service; register your own on the
// same *grpc.Server. Plain TCP speaks h2c, as grpc-go's insecure
// credentials do; for TLS, give sluice.Config a TLS configuration (or use
// sluice.ListenAndServeTLS), and grpc-go's clients negotiate h2 by ALPN.
//
// What protects it: each call is admitted once, when its stream opens.
// An admitted call runs on its stream's goroutine, not on a sluice worker,
// for its whole life, so the busy-worker gate does not see it; a
// concurrency gate bounds the calls in flight (-max-calls), and the age
// limit refuses a call that waited too long to start. A refused call gets
// a gRPC status its client understands: UNAVAILABLE for an overload,
// RESOURCE_EXHAUSTED for a quota, DEADLINE_EXCEEDED for a caller out of
// time, with a retry pushback that grpc-go's retry policy waits out.
//
// It stops on Ctrl-C (or SIGTERM): open calls and streams are given time
// to finish, as grpc.Server's GracefulStop would.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "address to listen on")
	maxCalls := flag.Int("max-calls", 256, "calls in flight at most; those past it are refused with UNAVAILABLE")
	flag.Parse()

	cfg, err := config(*maxCalls)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	slog.Info("serving gRPC", "addr", *addr, "max_calls", *maxCalls)
	if err := sluice.ListenAndServe(ctx, *addr, newGRPCServer(), cfg); err != nil {
		log.Fatal(err)
	}
	slog.Info("stopped")
}

// newGRPCServer is the application: a grpc-go server with its services,
// nothing in it knowing about sluice.
func newGRPCServer() *grpc.Server {
	gs := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	return gs
}

// config is the server's configuration: the default age limit, and a gate
// of maxCalls calls in flight.
func config(maxCalls int) (sluice.Config, error) {
	calls, err := gate.NewConcurrency(gate.ConcurrencyConfig{Limit: maxCalls})
	if err != nil {
		return sluice.Config{}, fmt.Errorf("-max-calls: %w", err)
	}
	return sluice.Config{Admission: admit.Config{Gates: []admit.Policy{calls}}}, nil
}
