//go:build linux

package grpc_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/sluice-go/sluice"
)

// streamServer is grpc's interop TestService, the two streaming methods
// the benchmarks call: StreamingOutputCall sends one message per response
// parameter, FullDuplexCall answers each message with one of the size it
// asks.
type streamServer struct {
	testgrpc.UnimplementedTestServiceServer
}

func (streamServer) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, stream testgrpc.TestService_StreamingOutputCallServer) error {
	for _, p := range req.GetResponseParameters() {
		out := &testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: make([]byte, p.GetSize())}}
		if err := stream.Send(out); err != nil {
			return err
		}
	}
	return nil
}

func (streamServer) FullDuplexCall(stream testgrpc.TestService_FullDuplexCallServer) error {
	for {
		in, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, p := range in.GetResponseParameters() {
			out := &testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: make([]byte, p.GetSize())}}
			if err := stream.Send(out); err != nil {
				return err
			}
		}
	}
}

// streamServers are the servers the streaming benchmarks compare, each
// serving the same *grpc.Server on 127.0.0.1 and returning its address and
// the function that stops it: sluice with its default configuration,
// net/http (h2c), x/net's HTTP/2 behind net/http, and grpc-go's own
// server.
var streamServers = []struct {
	name  string
	serve func(tb testing.TB, gs *grpc.Server) (addr string, stop func())
}{
	{"sluice", func(tb testing.TB, gs *grpc.Server) (string, func()) {
		srv, err := sluice.Listen("127.0.0.1:0", gs, sluice.Config{})
		require.NoError(tb, err)
		return srv.Addr().String(), func() {
			gs.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(tb, srv.Stop(ctx))
		}
	}},
	{"nethttp", func(tb testing.TB, gs *grpc.Server) (string, func()) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(tb, err)
		hs := &http.Server{Handler: gs, Protocols: new(http.Protocols)}
		hs.Protocols.SetHTTP1(true)
		hs.Protocols.SetUnencryptedHTTP2(true)
		done := make(chan struct{})
		go func() { defer close(done); _ = hs.Serve(ln) }()
		return ln.Addr().String(), func() {
			gs.Stop()
			require.NoError(tb, hs.Close())
			<-done
		}
	}},
	// x/net's HTTP/2 server, which sluice's HTTP/2 is built on, behind
	// net/http through x/net's h2c handler: what sluice's streams cost
	// that is x/net's rather than sluice's own.
	{"xnet", func(tb testing.TB, gs *grpc.Server) (string, func()) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(tb, err)
		hs := &http.Server{Handler: h2c.NewHandler(gs, &http2.Server{})}
		done := make(chan struct{})
		go func() { defer close(done); _ = hs.Serve(ln) }()
		return ln.Addr().String(), func() {
			gs.Stop()
			require.NoError(tb, hs.Close())
			<-done
		}
	}},
	{"grpcgo", func(tb testing.TB, gs *grpc.Server) (string, func()) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(tb, err)
		done := make(chan struct{})
		go func() { defer close(done); _ = gs.Serve(ln) }()
		return ln.Addr().String(), func() { gs.Stop(); <-done }
	}},
}

// streamClient serves streamServer on serve and returns a client of it.
func streamClient(tb testing.TB, serve func(testing.TB, *grpc.Server) (string, func())) testgrpc.TestServiceClient {
	tb.Helper()
	gs := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(gs, streamServer{})
	addr, stop := serve(tb, gs)
	tb.Cleanup(stop)
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(tb, err)
	tb.Cleanup(func() { cc.Close() })
	return testgrpc.NewTestServiceClient(cc)
}

// streamedMessages is how many messages one server-streamed call carries.
const streamedMessages = 2000

// readStream calls StreamingOutputCall for n messages of size bytes and
// reads them all.
func readStream(ctx context.Context, c testgrpc.TestServiceClient, n int, size int32) (int, error) {
	params := make([]*testpb.ResponseParameters, n)
	for i := range params {
		params[i] = &testpb.ResponseParameters{Size: size}
	}
	s, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{ResponseParameters: params})
	if err != nil {
		return 0, err
	}
	got := 0
	for {
		_, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got++
	}
}

// Every server streams every message of a call and echoes on a bidi
// stream: the benchmarks below measure the same exchanges.
func TestStreamsOnEveryServer(t *testing.T) {
	for _, s := range streamServers {
		t.Run(s.name, func(t *testing.T) {
			c := streamClient(t, s.serve)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := readStream(ctx, c, streamedMessages, 16)
			require.NoError(t, err)
			require.Equal(t, streamedMessages, got)

			d, err := c.FullDuplexCall(ctx)
			require.NoError(t, err)
			for range 10 {
				require.NoError(t, d.Send(&testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 16}}}))
				out, err := d.Recv()
				require.NoError(t, err)
				require.Len(t, out.GetPayload().GetBody(), 16)
			}
			require.NoError(t, d.CloseSend())
			_, err = d.Recv()
			require.ErrorIs(t, err, io.EOF)
		})
	}
}

// BenchmarkServerStream: one op is a server-streamed call of 2,000 messages
// of 16 bytes, read whole; msgs/s is the rate.
//
//	go test ./e2e/grpc -run '^$' -bench ServerStream -count 5
func BenchmarkServerStream(b *testing.B) {
	for _, s := range streamServers {
		b.Run(s.name, func(b *testing.B) {
			c := streamClient(b, s.serve)
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				if _, err := readStream(ctx, c, streamedMessages, 16); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*streamedMessages)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkBidiRoundTrip: one op is a message of 16 bytes sent on an open
// bidi stream and its answer received.
//
//	go test ./e2e/grpc -run '^$' -bench BidiRoundTrip -count 5
func BenchmarkBidiRoundTrip(b *testing.B) {
	for _, s := range streamServers {
		b.Run(s.name, func(b *testing.B) {
			c := streamClient(b, s.serve)
			d, err := c.FullDuplexCall(context.Background())
			require.NoError(b, err)
			req := &testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 16}}}
			b.ResetTimer()
			for b.Loop() {
				if err := d.Send(req); err != nil {
					b.Fatal(err)
				}
				if _, err := d.Recv(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			require.NoError(b, d.CloseSend())
			_, err = d.Recv()
			require.ErrorIs(b, err, io.EOF)
		})
	}
}
