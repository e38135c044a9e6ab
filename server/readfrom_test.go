//go:build linux

package server

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
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
)

// writeFile writes n random bytes to a file named name in dir and returns
// them.
func writeFile(t *testing.T, dir, name string, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	return b
}

// http.FileServer serves files through ReadFrom: whole, in a range, as
// HEAD, over a plain connection by sendfile(2) and over TLS through the
// copy buffer, byte for byte what the file holds.
func TestFileServerThroughReadFrom(t *testing.T) {
	dir := t.TempDir()
	big := writeFile(t, dir, "big.bin", 1<<20+123)
	small := writeFile(t, dir, "small.bin", 700)
	fs := http.FileServer(http.Dir(dir))

	srv, addr := serveHTTP(t, fs, Config{})
	c := &http.Client{Timeout: 30 * time.Second}
	defer c.CloseIdleConnections()
	get := func(c *http.Client, url string, hdr ...string) (*http.Response, []byte) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		if len(hdr) == 2 {
			req.Header.Set(hdr[0], hdr[1])
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, b
	}
	base := "http://" + addr
	resp, b := get(c, base+"/big.bin")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, bytes.Equal(big, b), "the whole file, %d bytes of %d", len(b), len(big))
	// Counted once sendfile has returned, which may be after the client
	// has read the last byte.
	sentByFile := func(n int64) func() bool { return func() bool { return srv.fileBytes.Load() == n } }
	assert.Eventually(t, sentByFile(int64(len(big))), 5*time.Second, time.Millisecond, "sent by sendfile")

	resp, b = get(c, base+"/big.bin", "Range", "bytes=1000-1999")
	assert.Equal(t, http.StatusPartialContent, resp.StatusCode)
	assert.Equal(t, big[1000:2000], b)
	assert.Eventually(t, sentByFile(int64(len(big)+1000)), 5*time.Second, time.Millisecond, "a range by sendfile too")

	resp, b = get(c, base+"/small.bin")
	assert.Equal(t, small, b)

	req, err := http.NewRequest(http.MethodHead, base+"/big.bin", nil)
	require.NoError(t, err)
	resp, err = c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, int64(len(big)), resp.ContentLength)

	scfg, ccfg := testTLS(t)
	tsrv, taddr := serveHTTP(t, fs, Config{TLS: scfg})
	resp, b = get(tlsClient(t, ccfg), "https://"+taddr+"/big.bin")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, bytes.Equal(big, b), "over TLS, %d bytes of %d", len(b), len(big))
	assert.Zero(t, tsrv.fileBytes.Load(), "no sendfile over TLS")
}

// A file larger than what the socket holds goes out whole to a client that
// reads slowly: from the handler's coroutine the copy waits for room
// through the worker's poller, from a goroutine of the handler's with
// poll(2).
func TestReadFromWaitsForRoom(t *testing.T) {
	dir := t.TempDir()
	big := writeFile(t, dir, "big.bin", 24<<20)
	for _, fromGoroutine := range []bool{false, true} {
		t.Run(fmt.Sprintf("goroutine=%v", fromGoroutine), func(t *testing.T) {
			copied := make(chan error, 1)
			h := copyFileHandler(filepath.Join(dir, "big.bin"), len(big), fromGoroutine, copied)
			srv, addr := serveHTTP(t, h, Config{})
			nc, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer nc.Close()
			require.NoError(t, nc.SetDeadline(time.Now().Add(60*time.Second)))
			_, err = io.WriteString(nc, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
			require.NoError(t, err)
			time.Sleep(100 * time.Millisecond) // the socket fills
			resp, err := http.ReadResponse(bufio.NewReader(&slowReader{nc: nc}), nil)
			require.NoError(t, err)
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(big, b), "%d bytes of %d", len(b), len(big))
			require.NoError(t, <-copied)
			assert.Equal(t, int64(len(big)), srv.fileBytes.Load())
		})
	}
}

// copyFileHandler answers with the file name of size bytes, its type and
// length declared, copied by io.Copy: from the handler's coroutine, or
// from a goroutine the handler waits for when fromGoroutine is set. It
// sends the copy's outcome on copied (an error also when fewer than size
// bytes went).
func copyFileHandler(name string, size int, fromGoroutine bool, copied chan<- error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(name)
		if err != nil {
			copied <- err
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", fmt.Sprint(size))
		send := func() error {
			n, err := io.Copy(w, f)
			if err == nil && n != int64(size) {
				err = fmt.Errorf("copied %d of %d", n, size)
			}
			return err
		}
		if !fromGoroutine {
			copied <- send()
			return
		}
		done := make(chan error)
		go func() { done <- send() }()
		copied <- <-done
	})
}

// slowReader reads nc in small pieces, pausing between them at first.
type slowReader struct {
	nc    net.Conn
	reads int
}

func (r *slowReader) Read(p []byte) (int, error) {
	if r.reads++; r.reads < 50 {
		time.Sleep(time.Millisecond)
		p = p[:min(len(p), 16<<10)]
	}
	return r.nc.Read(p)
}

// A client that reads nothing does not hold a sendfile copy past the write
// deadline: the copy fails with a timeout and the connection closes.
func TestReadFromUnderWriteTimeout(t *testing.T) {
	dir := t.TempDir()
	big := writeFile(t, dir, "big.bin", 64<<20)
	copied := make(chan error, 1)
	h := copyFileHandler(filepath.Join(dir, "big.bin"), len(big), false, copied)
	_, addr := serveHTTP(t, h, Config{WriteTimeout: 300 * time.Millisecond})
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	_, err = io.WriteString(nc, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	select {
	case err := <-copied:
		require.Error(t, err)
		assert.True(t, isTimeout(err), "%v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the copy outlived its write deadline")
	}
}

// ReadFrom keeps Write's rules: a reader that is no file is copied through
// the buffer (chunked, without a Content-Length), a file longer than the
// Content-Length is cut at it with ErrContentLength, and HEAD sends no body.
func TestReadFromKeepsWritesRules(t *testing.T) {
	dir := t.TempDir()
	data := writeFile(t, dir, "f.bin", 100<<10)
	errs := make(chan error, 4)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/reader":
			_, err := io.Copy(w, struct{ io.Reader }{bytes.NewReader(data)})
			errs <- err
		case "/cut":
			f, err := os.Open(filepath.Join(dir, "f.bin"))
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Length", "1000")
			_, err = io.Copy(w, f)
			errs <- err
		}
	})
	srv, addr := serveHTTP(t, h, Config{})
	c := &http.Client{Timeout: 30 * time.Second}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://" + addr + "/reader")
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, data, b)
	assert.Equal(t, []string{"chunked"}, resp.TransferEncoding)
	require.NoError(t, <-errs)

	resp, err = c.Get("http://" + addr + "/cut")
	require.NoError(t, err)
	b, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, data[:1000], b)
	assert.True(t, errors.Is(<-errs, http.ErrContentLength))
	assert.Equal(t, int64(1000), srv.fileBytes.Load())
	assert.False(t, strings.Contains(resp.Header.Get("Content-Length"), ","))
}
