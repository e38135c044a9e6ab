//go:build linux

package sluice

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/internal/gatetest"
	"github.com/sluice-go/sluice/internal/selfsigned"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/sched"
)

// small is the runtime of these tests: two unpinned workers, GOMAXPROCS
// left alone.
var small = srt.Config{Workers: 2, Pinning: srt.PinOff, GOMAXPROCS: -1}

func hello(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello %s", r.URL.Path) }

func get(t *testing.T, client *http.Client, url string) string {
	t.Helper()
	resp, err := client.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func TestListenAndServeStopsWithContext(t *testing.T) {
	// Port 0 cannot be learned from ListenAndServe: pick a free one.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	serveUntilCancelled(t, client, "http://"+addr+"/up", func(ctx context.Context) error {
		return ListenAndServe(ctx, addr, http.HandlerFunc(hello), Config{Runtime: small})
	})
}

// serveUntilCancelled runs serve with a context, waits until url answers
// "hello /up" through client, cancels the context, and checks that serve
// returns nil soon after.
func serveUntilCancelled(t *testing.T, client *http.Client, url string, serve func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serve(ctx) }()
	require.Eventually(t, func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(b) == "hello /up"
	}, 10*time.Second, 10*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not return after its context ended")
	}
}

// Serve takes a listener opened elsewhere and closes it, as net/http's
// Serve does.
func TestServeOnAListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s, err := NewServer(l, http.HandlerFunc(hello), Config{Runtime: small})
	require.NoError(t, err)
	_, err = l.Accept()
	assert.ErrorIs(t, err, net.ErrClosed, "NewServer closed the caller's listener")
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	assert.Equal(t, "hello /x", get(t, client, "http://"+s.Addr().String()+"/x"))
	assert.EqualValues(t, 1, s.Stats().Admitted)
	assert.Equal(t, 2, s.Runtime().NumWorkers())
	require.NoError(t, s.Stop(context.Background()))
	require.NoError(t, s.Stop(context.Background()), "a second Stop returns the first one's result")
}

// The one shutdown sequence: requests in progress finish, then the runtime
// stops.
func TestStopLetsRequestsFinish(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release // holds its worker: Stop must wait for it anyway
		_, _ = io.WriteString(w, "finished")
	})
	s, err := Listen("127.0.0.1:0", h, Config{Runtime: small})
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	body := make(chan string, 1)
	go func() { body <- get(t, client, "http://"+s.Addr().String()+"/slow") }()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(context.Background()) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned with a request in progress")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	assert.Equal(t, "finished", <-body)
	require.NoError(t, <-stopped)
}

// A request that outlasts Stop's context is cut: Stop closes what is left,
// the handler sees its context end, Stop returns the context's error, and
// the runtime stops all the same.
func TestStopCutsWhatOutlastsItsContext(t *testing.T) {
	entered := make(chan struct{})
	ended := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		_, err := sched.Await(r.Context(), func(ctx context.Context) (struct{}, error) {
			<-ctx.Done() // only the cut ends it
			return struct{}{}, ctx.Err()
		})
		ended <- err
	})
	s, err := Listen("127.0.0.1:0", h, Config{Runtime: small})
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	got := make(chan error, 1)
	go func() {
		resp, err := client.Get("http://" + s.Addr().String() + "/forever")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		got <- err
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = s.Stop(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, <-ended, context.Canceled, "the handler's context ended")
	assert.Error(t, <-got, "the client sees the cut")
	assert.ErrorIs(t, s.Stop(context.Background()), context.DeadlineExceeded, "a second Stop returns the first one's result")
}

// The README's protected server is Example's code, as written: the test
// makes "compiles as written" hold.
func TestReadmeExampleIsCompiled(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "## A protected server\n")
	require.True(t, ok, "the README has its protected-server section")
	_, block, ok := strings.Cut(section, "```go\n")
	require.True(t, ok)
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok)
	example, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	_, body, ok := strings.Cut(string(example), "func Example() {\n")
	require.True(t, ok)
	var want []string
	for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
		want = append(want, strings.TrimSpace(l))
	}
	var got []string
	for _, l := range strings.Split(body, "\n")[:len(want)] {
		got = append(got, strings.TrimSpace(l))
	}
	assert.Equal(t, want, got, "README.md's first example and Example() in example_test.go")
}

// What cannot work fails at once, naming the problem, and leaves nothing
// running (goleak checks the workers are gone).
func TestListenErrors(t *testing.T) {
	_, err := Listen("127.0.0.1:0", http.HandlerFunc(hello), Config{Admission: admit.Config{Queue: &admit.QueueConfig{}}, Runtime: small})
	assert.ErrorContains(t, err, "a queue needs a gate")
	_, err = Listen("not an address", http.HandlerFunc(hello), Config{Runtime: small})
	assert.ErrorContains(t, err, `listen address "not an address"`)
	_, err = Listen("127.0.0.1:0", nil, Config{Runtime: small})
	assert.ErrorContains(t, err, "nil http.Handler")
	_, err = NewServer(nil, http.HandlerFunc(hello), Config{Runtime: small})
	assert.ErrorContains(t, err, "nil net.Listener")
	_, err = Listen("127.0.0.1:0", http.HandlerFunc(hello), Config{Runtime: srt.Config{Workers: -1}})
	assert.ErrorContains(t, err, "Config.Workers -1 is negative")
	// The runtime's former options still apply, over Config.Runtime.
	_, err = Listen("127.0.0.1:0", http.HandlerFunc(hello), Config{Runtime: small}, srt.WithWorkers(-1))
	assert.ErrorContains(t, err, "Config.Workers -1 is negative")

	// A busy gate is bound to the server's runtime when it starts.
	busy := gatetest.Busy(t, gate.BusyConfig{})
	s, err := Listen("127.0.0.1:0", http.HandlerFunc(hello), Config{Admission: admit.Config{Gates: []admit.Policy{busy}}, Runtime: small})
	require.NoError(t, err)
	assert.Equal(t, 1, busy.Limit(), "half of 2 workers")
	require.NoError(t, s.Stop(context.Background()))
}

// ListenAndServeTLS serves HTTPS with the certificate and key of two PEM
// files, and names a missing file.
func TestListenAndServeTLS(t *testing.T) {
	cert, pool, err := selfsigned.New()
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600))

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	serveUntilCancelled(t, &http.Client{Transport: tr}, "https://"+addr+"/up", func(ctx context.Context) error {
		return ListenAndServeTLS(ctx, addr, certFile, keyFile, http.HandlerFunc(hello), Config{Runtime: small})
	})

	err = ListenAndServeTLS(context.Background(), addr, filepath.Join(dir, "nope.pem"), keyFile, http.HandlerFunc(hello), Config{Runtime: small})
	assert.ErrorContains(t, err, "loading the TLS certificate")
	assert.ErrorContains(t, err, "nope.pem")
}
