package scenario

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/await"
	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/examples/weather"
	"github.com/sluice-go/sluice/gate"
)

// The grpc scenario's service, as its targets serve it (GRPC.ChildHook):
// a service described by hand (a grpc.ServiceDesc, no generated code)
// whose messages are protobuf's well-known wrappers.
const (
	// GRPCService is the service's full name.
	GRPCService = "sluice.bench.Weather"
	// GRPCForecast is the unary method: a StringValue (the city) in, a
	// StringValue (its forecast) out, after the weather handler's work
	// (the shape's CPU spin, then its database wait).
	GRPCForecast = "/" + GRPCService + "/Forecast"
	// GRPCStream is the server-streaming method: a UInt32Value (n) in,
	// n UInt64Values (0 to n-1) out, with no work between them.
	GRPCStream = "/" + GRPCService + "/Stream"
)

// TargetGRPCGo is the target the grpc scenario's hook serves itself
// (bench.ChildPart.Targets): grpc-go's own server, grpc.Server.Serve on a
// listener, with no admission of its own.
const TargetGRPCGo = "grpcgo"

// grpcChildConfig is what the grpc scenario's parent tells its hook
// (bench.ChildSpec.SetHook).
type grpcChildConfig struct {
	// MaxCalls is the concurrency gate a sluice target adds, calls in
	// flight; 0 for none.
	MaxCalls int `json:"max_calls,omitempty"`
	// NoPushback makes a sluice target refuse without Retry-After, and
	// so without grpc-retry-pushback-ms.
	NoPushback bool `json:"no_pushback,omitempty"`
}

// grpcWeatherServer is what the service's handlers call; the
// ServiceDesc's HandlerType, which grpc.Server.RegisterService checks the
// implementation against.
type grpcWeatherServer interface {
	forecast(ctx context.Context, city string) (string, error)
}

// grpcWeather is the service: the weather handler's work per unary call.
type grpcWeather struct {
	spec bench.HandlerSpec
	spin *weather.Spinner // nil without CPU work
}

// newGRPCWeather returns the service doing cs's work per call.
func newGRPCWeather(cs bench.ChildSpec) *grpcWeather {
	w := &grpcWeather{spec: cs.Handler}
	if cs.Handler.CPU > 0 {
		w.spin = cs.Spinner()
	}
	return w
}

// forecast does what the weather handler does for a request: spin for
// the shape's CPU time, then wait on the database, through await.Sleep
// (which blocks a goroutine off sluice's workers, as grpc-go's are) or
// time.Sleep for a blocking shape.
func (w *grpcWeather) forecast(ctx context.Context, city string) (string, error) {
	if w.spin != nil {
		w.spin.Spin(w.spec.CPU)
	}
	if db := w.spec.DB; db > 0 {
		if w.spec.Blocking {
			time.Sleep(db)
		} else if err := await.Sleep(ctx, db); err != nil {
			return "", status.FromContextError(err).Err()
		}
	}
	return "sunny in " + city, nil
}

// grpcWeatherDesc describes the service as protoc-gen-go-grpc's generated
// code would: each method a handler that decodes its request and calls
// the implementation (through the server's interceptor, if any).
var grpcWeatherDesc = grpc.ServiceDesc{
	ServiceName: GRPCService,
	HandlerType: (*grpcWeatherServer)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Forecast", Handler: grpcForecastHandler}},
	Streams:     []grpc.StreamDesc{{StreamName: "Stream", Handler: grpcStreamHandler, ServerStreams: true}},
}

// grpcForecastHandler is GRPCForecast's handler.
func grpcForecastHandler(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrapperspb.StringValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	call := func(ctx context.Context, req any) (any, error) {
		out, err := srv.(grpcWeatherServer).forecast(ctx, req.(*wrapperspb.StringValue).GetValue())
		if err != nil {
			return nil, err
		}
		return wrapperspb.String(out), nil
	}
	if icpt == nil {
		return call(ctx, in)
	}
	return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: GRPCForecast}, call)
}

// grpcStreamHandler is GRPCStream's handler: it sends the numbers below
// the request's n, one message each.
func grpcStreamHandler(_ any, st grpc.ServerStream) error {
	in := new(wrapperspb.UInt32Value)
	if err := st.RecvMsg(in); err != nil {
		return err
	}
	msg := new(wrapperspb.UInt64Value)
	for i := range in.GetValue() {
		msg.Value = uint64(i)
		if err := st.SendMsg(msg); err != nil {
			return err
		}
	}
	return nil
}

// ChildHook returns the grpc scenario's part in its targets' child
// processes: a *grpc.Server with the service, served as the handler of
// the sluice and net/http targets (a *grpc.Server is an http.Handler), and
// by itself on TargetGRPCGo.
//
//   - A sluice target speaks h2c already; it gets the concurrency gate of
//     MaxCalls that examples/grpc configures, and with NoPushback refuses
//     without Retry-After.
//   - A net/http target is made to speak h2c too (http.Protocols with
//     unencrypted HTTP/2), which grpc-go's ServeHTTP needs and net/http
//     does not do by default.
//   - TargetGRPCGo listens where the spec says and hands the listener to
//     grpc.Server.Serve.
func (g *GRPC) ChildHook() bench.ChildHook {
	return bench.ChildHook{Name: g.Name(), Open: openGRPCChild}
}

// openGRPCChild is the grpc hook's Open.
func openGRPCChild(cs bench.ChildSpec, _ http.Handler) (*bench.ChildPart, error) {
	cfg, err := bench.DecodeHookConfig[grpcChildConfig](cs)
	if err != nil {
		return nil, err
	}
	gs := grpc.NewServer()
	gs.RegisterService(&grpcWeatherDesc, newGRPCWeather(cs))
	addr := cs.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	return &bench.ChildPart{
		Handler: gs,
		Configure: func(c *sluice.Config) error {
			if cfg.MaxCalls > 0 {
				calls, err := gate.NewConcurrency(gate.ConcurrencyConfig{Limit: cfg.MaxCalls})
				if err != nil {
					return fmt.Errorf("grpc hook: %w", err)
				}
				c.Admission.Gates = append(c.Admission.Gates, calls)
			}
			if cfg.NoPushback {
				c.Admission.Rejection.RetryAfter = -1 // no Retry-After, no grpc-retry-pushback-ms
			}
			return nil
		},
		NetHTTP: func(hs *http.Server) {
			var p http.Protocols
			p.SetHTTP1(true)
			p.SetUnencryptedHTTP2(true)
			hs.Protocols = &p
		},
		Targets: []bench.Target{{Name: TargetGRPCGo, Serve: func(http.Handler) (*bench.Running, error) {
			return serveGRPCGo(gs, addr)
		}}},
		// The target has stopped by now (a sluice or net/http server
		// closes its connections, grpc.Server.Serve returns once
		// stopped); Stop ends what grpc-go still holds, twice harmless.
		Close: func() error { gs.Stop(); return nil },
	}, nil
}

// serveGRPCGo serves gs by itself on a listener at addr: grpc-go's own
// HTTP/2 transport, plain TCP.
func serveGRPCGo(gs *grpc.Server, addr string) (*bench.Running, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("grpcgo: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- gs.Serve(l) }()
	return &bench.Running{
		URL: "http://" + l.Addr().String(),
		Stop: func() error {
			gs.Stop()
			if err := <-done; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				return fmt.Errorf("grpcgo: %w", err)
			}
			return nil
		},
	}, nil
}
