//go:build linux

package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// curl runs curl with args and returns its standard output and error.
func curl(t *testing.T, args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, "curl", append([]string{"-sS", "--max-time", "20"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), "curl %v: %s", args, errb.String())
	return out.String(), errb.String()
}

// TestCurlConformance talks to the server with curl, a client written
// independently of Go's.
func TestCurlConformance(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is not installed (apt-get install -y curl)")
		}
		t.Skip("curl is not installed; install it (apt-get install -y curl) to run this test")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%s %s %s len=%d body=%s", r.Proto, r.Method, r.URL.RequestURI(), len(b), b)
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 {
			fmt.Fprintf(w, "part%d\n", i)
			w.(http.Flusher).Flush()
		}
	})
	_, addr := serveHTTP(t, mux, Config{})
	base := "http://" + addr

	out, _ := curl(t, base+"/echo?x=1")
	assert.Equal(t, "HTTP/1.1 GET /echo?x=1 len=0 body=", out)

	out, _ = curl(t, "--data-binary", "hello", base+"/echo")
	assert.Equal(t, "HTTP/1.1 POST /echo len=5 body=hello", out)

	out, _ = curl(t, "-H", "Transfer-Encoding: chunked", "--data-binary", "chunky", base+"/echo")
	assert.Equal(t, "HTTP/1.1 POST /echo len=6 body=chunky", out)

	out, _ = curl(t, "-H", "Expect: 100-continue", "--expect100-timeout", "10", "--data-binary", "cont", base+"/echo")
	assert.Equal(t, "HTTP/1.1 POST /echo len=4 body=cont", out)

	out, _ = curl(t, "--http1.0", base+"/echo")
	assert.Equal(t, "HTTP/1.0 GET /echo len=0 body=", out)

	out, _ = curl(t, base+"/stream")
	assert.Equal(t, "part0\npart1\npart2\n", out)

	out, _ = curl(t, "-I", base+"/echo")
	assert.True(t, strings.HasPrefix(out, "HTTP/1.1 200 OK\r\n"), out)
	assert.Contains(t, out, "Content-Length: 31\r\n") // "HTTP/1.1 HEAD /echo len=0 body="
	assert.Contains(t, out, "Content-Type: text/plain; charset=utf-8\r\n")

	// Two URLs in one run reuse the kept-alive connection.
	out, errs := curl(t, "-v", base+"/echo?a", base+"/echo?b")
	assert.Equal(t, "HTTP/1.1 GET /echo?a len=0 body=HTTP/1.1 GET /echo?b len=0 body=", out)
	assert.Contains(t, errs, "Re-using existing connection")
}
