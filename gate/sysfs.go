package gate

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-go/sluice/internal/cgroup"
)

// Manual, as a refresh interval, starts no background refresher: the gate
// keeps the state of its last Refresh, and the caller refreshes it.
const Manual time.Duration = -1

// refresher calls fn every interval on its own goroutine until closed.
type refresher struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func startRefresher(every time.Duration, fn func()) *refresher {
	r := &refresher{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
				fn()
			}
		}
	}()
	return r
}

// close stops the refresher and waits for its goroutine; it may be called
// more than once, and on nil.
func (r *refresher) close() {
	if r == nil {
		return
	}
	r.once.Do(func() { close(r.stop) })
	<-r.done
}

// readHead reads up to len(buf) bytes of the file at path into buf: enough
// for the first lines of /proc/stat, whose later lines can be long.
func readHead(path string, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := io.ReadFull(f, buf)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	}
	return buf[:n], err
}

// readInt reads a file that holds one integer, or "max" (reported as -1).
func readInt(path string, buf []byte) (int64, error) {
	b, err := readHead(path, buf)
	if err != nil {
		return 0, err
	}
	s := string(bytes.TrimSpace(b))
	if s == "max" {
		return -1, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// field returns the integer after key (a line's first word) in a file of
// "key value" or "key: value kB" lines, and whether key was there.
func field(b []byte, key string) (int64, bool) {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		rest, ok := bytes.CutPrefix(line, []byte(key))
		if !ok || len(rest) == 0 || (rest[0] != ' ' && rest[0] != ':' && rest[0] != '\t') {
			continue
		}
		f := bytes.Fields(bytes.TrimPrefix(rest, []byte(":")))
		if len(f) == 0 {
			return 0, false
		}
		v, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, false
		}
		if len(f) > 1 && string(f[1]) == "kB" {
			v *= 1024
		}
		return v, true
	}
	return 0, false
}

// cgroupLevels returns the directories of the cgroup at path and of its
// ancestors up to the mount's root, leaf first, under the file system root.
// If the cgroup's own directory is not visible (a container that shows the
// host's path but mounts only its own subtree), it starts at the mount point.
func cgroupLevels(fsRoot string, m cgroup.Mount, path string) []string {
	point := filepath.Join(fsRoot, m.Point)
	rel := path
	if m.Root != "/" && m.Root != "" {
		r, ok := strings.CutPrefix(path, m.Root)
		if ok && (r == "" || r[0] == '/') {
			rel = r
		}
	}
	leaf := filepath.Join(point, rel)
	if st, err := os.Stat(leaf); err != nil || !st.IsDir() {
		leaf = point
	}
	var dirs []string
	for d := leaf; ; d = filepath.Dir(d) {
		dirs = append(dirs, d)
		if d == point || len(d) <= len(point) {
			break
		}
	}
	return dirs
}

var errNoSource = errors.New("gate: no memory source readable")
