package attack

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// readAnswer reads one response from nc within d, or returns nil (the
// target closed the connection, or took longer).
func readAnswer(nc net.Conn, d time.Duration) (*http.Response, []byte) {
	_ = nc.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		return nil, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp, b
}

// obsFold: a head whose one field goes on over 100,000 folded lines (RFC
// 9112 section 5.2's obs-fold), 400 KB, under the 1 MB head limit; sluice
// once concatenated each line to the value, quadratic in the head.
func obsFold() Attack {
	var b strings.Builder
	b.WriteString("GET / HTTP/1.1\r\nHost: attack\r\nX-Fold: a\r\n")
	for range 100_000 {
		b.WriteString(" b\r\n")
	}
	b.WriteString("\r\n")
	head := []byte(b.String())
	return Attack{
		Name:  "obs-fold",
		About: "4 connections each sending, again and again, a 400 KB head of one field folded over 100,000 lines",
		Run: func(ctx context.Context, env Env) error {
			return flood(ctx, env, 4, func(_ context.Context, nc net.Conn) error {
				if _, err := nc.Write(head); err != nil {
					return nil
				}
				readAnswer(nc, 30*time.Second)
				return nil
			})
		},
	}
}

// chunkOverflow: a chunked body of a chunk of 1 byte, then one announced
// at 2^63-1, followed by a megabyte more than the body limit; a sum that
// overflowed once let the handler read past the limit. The target must
// refuse the body (413, or a closed connection); an answer saying the
// handler read more than Env.BodyLimit is what the attack finds.
func chunkOverflow() Attack {
	head := []byte("POST /echo HTTP/1.1\r\nHost: attack\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n7fffffffffffffff\r\n")
	block := bytes.Repeat([]byte("x"), 64<<10)
	return Attack{
		Name:  "chunk-overflow",
		About: "2 connections each sending a chunk of 1 byte, then one of 2^63-1 bytes with 1 MiB more than the body limit",
		Run: func(ctx context.Context, env Env) error {
			return flood(ctx, env, 2, func(_ context.Context, nc net.Conn) error {
				_ = nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
				if _, err := nc.Write(head); err != nil {
					return nil
				}
				for sent := int64(0); sent < env.BodyLimit+1<<20; sent += int64(len(block)) {
					if _, err := nc.Write(block); err != nil {
						break // the target stopped reading
					}
				}
				if tc, ok := nc.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				resp, body := readAnswer(nc, 10*time.Second)
				if resp == nil || resp.StatusCode == http.StatusRequestEntityTooLarge {
					return nil
				}
				if n, err := strconv.ParseInt(string(body), 10, 64); err == nil && env.BodyLimit > 0 && n > env.BodyLimit {
					return fmt.Errorf("the handler read %d bytes of a body limited to %d", n, env.BodyLimit)
				}
				return nil
			})
		},
	}
}

// slowHeads: slowloris, connections that send a head a line a second and
// never end it.
func slowHeads() Attack {
	return Attack{
		Name:  "slow-heads",
		About: "1,000 connections each sending a head a field line a second, never ending it",
		Run: func(ctx context.Context, env Env) error {
			holdOpen(ctx, env, env.conns(1000), trickle("GET / HTTP/1.1\r\nHost: attack\r\n", "X-Slow: a\r\n"))
			return nil
		},
	}
}

// slowBodies: connections that announce a body and send it a byte a
// second.
func slowBodies() Attack {
	return Attack{
		Name:  "slow-bodies",
		About: "500 connections each announcing a 100 KB body to /echo and sending it a byte a second",
		Run: func(ctx context.Context, env Env) error {
			holdOpen(ctx, env, env.conns(500), trickle("POST /echo HTTP/1.1\r\nHost: attack\r\nContent-Length: 100000\r\n\r\n", "x"))
			return nil
		},
	}
}

// neverRead: connections that pipeline requests for large answers and
// never read them, so that the target's writes to them block. Its first
// part is a burst of CPU work: the answers that fill the sockets' buffers
// until the writes block, 0.4 s of a CPU for 200 connections. A loaded
// machine stretches it past the age limit, and sluice then refuses the
// new connections whose wait passed it (net/http serves them late).
// That is overload shedding, not this attack's fault, so the probes start
// once the burst is past and meet the writes that block.
func neverRead() Attack {
	reqs := strings.Repeat("GET /large HTTP/1.1\r\nHost: attack\r\n\r\n", 8)
	return Attack{
		Name:   "never-read",
		About:  "500 connections each pipelining 8 requests for 256 KB answers and reading nothing",
		Settle: time.Second,
		Run: func(ctx context.Context, env Env) error {
			holdOpen(ctx, env, env.conns(500), func(ctx context.Context, nc net.Conn) {
				if _, err := io.WriteString(nc, reqs); err != nil {
					return
				}
				<-ctx.Done()
			})
			return nil
		},
	}
}

// pipelineFlood: connections that pipeline requests as fast as the target
// takes them, reading the answers as they come.
func pipelineFlood() Attack {
	batch := []byte(strings.Repeat("GET / HTTP/1.1\r\nHost: attack\r\n\r\n", 1000))
	return Attack{
		Name:  "pipeline-flood",
		About: "8 connections each pipelining GET / in batches of 1,000 as fast as the target reads them",
		Run: func(ctx context.Context, env Env) error {
			return flood(ctx, env, 8, func(ctx context.Context, nc net.Conn) error {
				drained := make(chan struct{})
				go func() {
					defer close(drained)
					_, _ = io.Copy(io.Discard, nc)
				}()
				for ctx.Err() == nil {
					if _, err := nc.Write(batch); err != nil {
						break
					}
				}
				nc.Close()
				<-drained
				return nil
			})
		},
	}
}
