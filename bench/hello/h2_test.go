//go:build linux

package hello

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/selfsigned"
	"github.com/sluice-go/sluice/server"
)

// BenchmarkHelloH2 serves the hello over HTTP/2 on TLS (h2 by ALPN), and
// with the -h2c targets over h2c with prior knowledge, from sluice (the
// http.Handler adapter: HTTP/2 needs one) and from net/http,
// and runs b.N requests through Go's own HTTP/2 client in this process:
// SLUICE_BENCH_CONNS goroutines (64 by default), each sending its next
// request when the previous answer is read, all multiplexed as streams on
// the client's connection. The -post targets serve a POST of
// SLUICE_BENCH_POST_SIZE bytes (1 KiB by default) whose handler reads the
// body whole and answers hello, as the HTTP/1.1 POST targets do. It
// reports req/s, and the process's CPU time
// per request (process-cpu-µs/op), the client's included: the client
// shares the process, and so the CPUs and the Go scheduler, with the
// server, alike for both targets.
func BenchmarkHelloH2(b *testing.B) {
	conns, err := envInt(envConns, 64)
	if err != nil {
		b.Fatal(err)
	}
	postSize, err := envInt(envPostSize, 1<<10)
	if err != nil {
		b.Fatal(err)
	}
	type target struct {
		name  string
		start func(*tls.Config, http.Handler) (string, func() error, error)
		h2c   bool
		post  bool
	}
	var targets []target
	for _, h2c := range []bool{false, true} {
		for _, post := range []bool{false, true} {
			for _, srv := range []struct {
				name  string
				start func(*tls.Config, http.Handler) (string, func() error, error)
			}{{"sluice", startSluiceH2}, {"nethttp", startNetHTTPH2}} {
				name := srv.name
				if h2c {
					name += "-h2c"
				}
				if post {
					name += "-post"
				}
				targets = append(targets, target{name, srv.start, h2c, post})
			}
		}
	}
	for _, t := range targets {
		b.Run(t.name, func(b *testing.B) {
			var h http.Handler = http.HandlerFunc(helloHTTP)
			var body []byte
			if t.post {
				h = postHandler(postSize)
				body = make([]byte, postSize)
			}
			tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
			var scfg *tls.Config
			scheme := "https://"
			if t.h2c {
				// Prior knowledge: HTTP/2 from the first byte.
				tr.Protocols = new(http.Protocols)
				tr.Protocols.SetUnencryptedHTTP2(true)
				scheme = "http://"
			} else {
				cert, _, err := selfsigned.New()
				if err != nil {
					b.Fatal(err)
				}
				scfg = &tls.Config{Certificates: []tls.Certificate{cert}}
			}
			addr, stop, err := t.start(scfg, h)
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				if err := stop(); err != nil {
					b.Errorf("stop %s: %v", t.name, err)
				}
			}()
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
			url := scheme + addr + "/"
			get := func() error {
				var resp *http.Response
				var err error
				if t.post {
					resp, err = c.Post(url, "application/octet-stream", bytes.NewReader(body))
				} else {
					resp, err = c.Get(url)
				}
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				if resp.ProtoMajor != 2 {
					return fmt.Errorf("%s: want HTTP/2", resp.Proto)
				}
				body, err := io.ReadAll(resp.Body)
				if err == nil && string(body) != string(helloBody) {
					err = fmt.Errorf("unexpected body %q", body)
				}
				return err
			}
			if err := get(); err != nil { // the connection, before the clock
				b.Fatal(err)
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			var once sync.Once
			var firstErr error
			b.ResetTimer()
			cpu0, _ := processCPU()
			start := time.Now()
			for range conns {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if err := get(); err != nil {
							once.Do(func() { firstErr = err })
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			cpu, _ := processCPU()
			b.StopTimer()
			if firstErr != nil {
				b.Fatal(firstErr)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
			b.ReportMetric(float64(cpu-cpu0)/1e3/float64(b.N), "process-cpu-µs/op")
		})
	}
}

// startSluiceH2 serves h through the adapter, HTTP/2 on: over TLS with
// cfg, or h2c with prior knowledge when cfg is nil.
func startSluiceH2(cfg *tls.Config, h http.Handler) (string, func() error, error) {
	r, err := startSluiceConfig(server.HTTPHandler(h), server.Config{TLS: cfg})
	if err != nil {
		return "", nil, err
	}
	return r.addr, r.stop, nil
}

// startNetHTTPH2 serves h with net/http over TLS with cfg, where HTTP/2
// is on by default, or, when cfg is nil, h2c as well as HTTP/1.1 on a
// plain listener (http.Protocols).
func startNetHTTPH2(cfg *tls.Config, h http.Handler) (string, func() error, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: h, TLSConfig: cfg}
	done := make(chan error, 1)
	if cfg == nil {
		hs.Protocols = new(http.Protocols)
		hs.Protocols.SetHTTP1(true)
		hs.Protocols.SetUnencryptedHTTP2(true)
		go func() { done <- hs.Serve(ln) }()
	} else {
		go func() { done <- hs.ServeTLS(ln, "", "") }()
	}
	return ln.Addr().String(), func() error {
		err := hs.Close()
		if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		return err
	}, nil
}
