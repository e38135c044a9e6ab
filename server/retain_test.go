//go:build linux

package server

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"unsafe"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A string a handler keeps from its request keeps that request's head
// alive, and nothing of the requests after it: here a path kept from the
// first request must not keep the second request's head from being
// collected, as it would if the two heads shared memory.
func TestKeptStringKeepsOnlyItsOwnHead(t *testing.T) {
	var (
		kept  string             // the first request's path, kept
		other weak.Pointer[byte] // the second request's header value
		saw   = make(chan struct{}, 3)
	)
	_, addr := serveNative(t, HandlerFunc(func(w *ResponseWriter, r *Request) {
		switch r.URL.Path {
		case "/second":
			v := r.Header.Get("X-Data")
			other = weak.Make(unsafe.StringData(v))
		case "/third":
		default:
			kept = r.URL.Path
		}
		saw <- struct{}{}
		_, _ = io.WriteString(w, "ok")
	}), Config{})

	tr := &http.Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for _, path := range []string{"/kept-path", "/second", "/third"} {
		req, err := http.NewRequest("GET", "http://"+addr+path, nil)
		require.NoError(t, err)
		req.Header.Set("X-Data", strings.Repeat("d", 64))
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		<-saw
	}
	for range 3 {
		runtime.GC()
	}
	assert.Nil(t, other.Value(), "the second request's head is still alive")
	assert.Equal(t, "/kept-path", kept)
	runtime.KeepAlive(kept)
}

// The head's strings are a copy of the read buffer, which the connection
// reuses; the value slices are the request's room when the head has few
// enough fields, else made for it, and neither leaves room to append into
// the next field's value.
func TestParseHeadCopiesAndHoldsValues(t *testing.T) {
	for _, fields := range []int{0, 1, 7, 8, 20} {
		var b strings.Builder
		b.WriteString("GET /p?q=1 HTTP/1.1\r\nHost: h\r\n")
		for i := range fields - 1 {
			fmt.Fprintf(&b, "X-F%d: v%d\r\n", i, i)
		}
		b.WriteString("\r\n")
		buf := []byte(b.String())
		for _, room := range [][]string{nil, make([]string, 7)} {
			var h head
			require.Nil(t, parseHead(buf, &h, room), "%d fields", fields)
			want := http.Header{}
			for i := range fields - 1 {
				want.Add(fmt.Sprintf("X-F%d", i), fmt.Sprintf("v%d", i))
			}
			for i := range buf {
				buf[i] = '#' // the connection reads the next request over it
			}
			assert.Equal(t, "/p?q=1", h.target)
			assert.Equal(t, "h", h.host)
			assert.Equal(t, want, h.header, "%d fields", fields)
			for k, vv := range h.header {
				assert.Equal(t, len(vv), cap(vv), "%s: room to append into another's", k)
			}
			buf = []byte(b.String())
		}
	}
}

// Parsing allocates in proportion to the head, whatever its shape: a field
// folded over 20,000 continuation lines (unfolded by concatenation, each
// line copied the whole value so far: quadratic), and a head of 20,000
// empty continuation lines (the map and the value slices were sized by the
// line count). The value is what net/textproto makes of it.
func TestParseHeadIsLinear(t *testing.T) {
	const lines = 20000
	folded := "GET / HTTP/1.1\r\nHost: h\r\nX-Fold: a\r\n" + strings.Repeat(" b\r\n", lines) + "\r\n"
	empty := "GET / HTTP/1.1\r\nHost: h\r\nX-Fold: a\r\n" + strings.Repeat(" \r\n", lines) + "\r\n"
	for _, c := range []struct {
		name, head, want string
	}{
		{"folded", folded, "a" + strings.Repeat(" b", lines)},
		{"empty continuations", empty, "a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			buf := []byte(c.head)
			var h head
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			require.Nil(t, parseHead(buf, &h, nil))
			runtime.ReadMemStats(&after)
			assert.Equal(t, c.want, h.header.Get("X-Fold"))
			allocated := after.TotalAlloc - before.TotalAlloc
			assert.Less(t, allocated, uint64(8*len(buf)), "bytes allocated for a head of %d bytes", len(buf))
		})
	}
}
