//go:build linux

package hello

import (
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"os"

	"github.com/sluice-go/sluice/server"
)

// envFileSize sets the size of the file targets' file (1 MiB by default).
const envFileSize = "SLUICE_BENCH_FILE_SIZE"

// serveFile makes a target of start that answers every GET with one file
// of random bytes, SLUICE_BENCH_FILE_SIZE of them, through
// http.ServeFile: the path of http.FileServer, whose copy goes through the
// ResponseWriter's ReadFrom (sendfile(2) on plain connections, on both
// servers). The file is removed when the target stops.
func serveFile(start func(http.Handler) (*running, error)) func() (*running, error) {
	return func() (*running, error) {
		size, err := envInt(envFileSize, 1<<20)
		if err != nil {
			return nil, err
		}
		data := make([]byte, size)
		if _, err := rand.Read(data); err != nil {
			return nil, err
		}
		f, err := os.CreateTemp("", "sluice-bench-*.bin")
		if err != nil {
			return nil, err
		}
		name := f.Name()
		_, werr := f.Write(data)
		if err := errors.Join(werr, f.Close()); err != nil {
			return nil, errors.Join(err, os.Remove(name))
		}
		r, err := start(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			http.ServeFile(w, req, name)
		}))
		if err != nil {
			return nil, errors.Join(err, os.Remove(name))
		}
		r.want = expectation{status: "200", body: data, file: name}
		stop := r.stop
		r.stop = func() error { return errors.Join(stop(), os.Remove(name)) }
		return r, nil
	}
}

// envPostSize sets the body size of the POST targets (1 KiB by default).
const envPostSize = "SLUICE_BENCH_POST_SIZE"

// servePost makes a target of start whose handler reads a POST's body
// whole (io.ReadAll, as a JSON API's handler would decode it) and answers
// hello; the client posts SLUICE_BENCH_POST_SIZE bytes.
func servePost(start func(http.Handler) (*running, error)) func() (*running, error) {
	return func() (*running, error) {
		size, err := envInt(envPostSize, 1<<10)
		if err != nil {
			return nil, err
		}
		r, err := start(postHandler(size))
		if err != nil {
			return nil, err
		}
		r.want = expectation{status: "200", body: helloBody, post: size}
		return r, nil
	}
}

// postHandler reads a POST's body whole (io.ReadAll, as a JSON API's
// handler would decode it), checks that it has size bytes, and answers
// hello.
func postHandler(size int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, err := io.ReadAll(req.Body)
		if err != nil || len(b) != size {
			http.Error(w, "short body", http.StatusBadRequest)
			return
		}
		helloHTTP(w, req)
	})
}

// startSluiceAdapted serves the net/http handler h on sluice, through
// server.HTTPHandler, with the default options (startSluice).
func startSluiceAdapted(h http.Handler) (*running, error) {
	return startSluice(server.HTTPHandler(h))
}
