package bench

import (
	"crypto/rand"
	"errors"
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

// startSluiceAdapted serves the net/http handler h on sluice, through
// server.HTTPHandler, with the default options (startSluice).
func startSluiceAdapted(h http.Handler) (*running, error) {
	return startSluice(server.HTTPHandler(h))
}
