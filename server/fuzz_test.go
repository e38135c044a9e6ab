//go:build linux

package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/stretchr/testify/assert"
	"io"
	"math"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// parseHeadSeeds are the seeds of FuzzParseHead, also checked in under
// testdata/fuzz/FuzzParseHead.
var parseHeadSeeds = []string{
	"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nx-tenant: a\r\nX-Tenant: b\r\nX-Tenant:\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\n  b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX-Tenant:\r\nContent-Length: 0\r\n\r\n",
	"GET /a?b=c HTTP/1.0\r\n\r\n",
	"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
	"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nConnection: clo\u017fe\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chun\u212aed\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
	"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n \r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: Content-Length\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n  b\r\n\tc\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n \r\n\r\n",
	"GET / HTTP/1.1\r\n Host: x\r\n\r\n",
	"GET / HTTP/1.1\nHost: x\nX-A: 1\n\n",
	"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET http://example.org:8080/p?q HTTP/1.1\r\nHost: other\r\n\r\n",
	"CONNECT example.org:443 HTTP/1.1\r\n\r\n",
	"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
	"G(T / HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET / HTTP/1.10\r\nHost: x\r\n\r\n",
	"GET / HTTP/2.0\r\nHost: x\r\n\r\n",
	"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	"GET / HTTP/1.2\r\nHost: x\r\n\r\n",
	"GET  / HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX-A : 1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX-A: caf\xc3\xa9\r\nx-b: 1\r\nX-B: 2\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nPragma: no-cache\r\n\r\n",
	"5;ext=1\r\n",
	"FFFFFFFFFFFFFFFF\r\n",
}

// FuzzParseHead checks findHeadEnd and parseHead on any bytes, and that a
// head sluice accepts is one net/http's parser accepts and reads the same
// way; every line of the input is also tried as a chunk-size line.
func FuzzParseHead(f *testing.F) {
	for _, s := range parseHeadSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			checkChunkSize(t, bytes.TrimSuffix(line, []byte("\r")))
		}

		end := findHeadEnd(data, 0)
		if end >= 0 {
			require.LessOrEqual(t, end, len(data))
			require.True(t, bytes.HasSuffix(data[:end], []byte("\n\n")) || bytes.HasSuffix(data[:end], []byte("\n\r\n")),
				"findHeadEnd: %q does not end with an empty line", data[:end])
		}
		require.Equal(t, refHeadEnd(data), end, "findHeadEnd")
		// The connection resumes the search where the last one stopped.
		step := max(1, len(data)/64)
		for k := 0; k <= len(data); k += step {
			if findHeadEnd(data[:k], 0) < 0 {
				require.Equal(t, end, findHeadEnd(data, k), "findHeadEnd resumed at %d", k)
			}
		}
		if end < 0 {
			return
		}

		// Fields picked out for the admission's keys agree with the map
		// (Host and Transfer-Encoding, which check takes out, read as
		// absent in both).
		// The value slices in room, as the server's request state gives
		// them, when the head has few enough fields.
		h := head{pick: []string{"X-Tenant", "Host", "Content-Length", "Transfer-Encoding"}}
		var room [7]string
		if err := parseHead(data[:end], &h, room[:]); err != nil {
			switch err.status {
			case http.StatusBadRequest, http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
			default:
				t.Fatalf("parseHead: unexpected status %d", err.status)
			}
			return
		}
		checkHead(t, &h)
		if !h.pickFailed {
			for i, name := range h.pick {
				require.Equal(t, name, h.picked[i].Name)
				want := ""
				if v := h.header[name]; len(v) > 0 {
					want = v[0]
				}
				require.Equal(t, want, h.picked[i].Value, "picked %s", name)
			}
		}
		u := new(url.URL)
		if err := parseTarget(h.method, h.target, u); err != nil {
			return // the connection answers 400, as net/http does
		}
		compareReadRequest(t, data[:end], &h, u.String(), u.Host)
	})
}

// refHeadEnd is findHeadEnd written plainly: the end of the first empty
// line (LF or CRLF) that follows a LF.
func refHeadEnd(data []byte) int {
	for p := 0; p < len(data); p++ {
		if data[p] != '\n' {
			continue
		}
		if p+1 < len(data) && data[p+1] == '\n' {
			return p + 2
		}
		if p+2 < len(data) && data[p+1] == '\r' && data[p+2] == '\n' {
			return p + 3
		}
	}
	return -1
}

// checkHead asserts what a successfully parsed head guarantees.
func checkHead(t *testing.T, h *head) {
	t.Helper()
	require.True(t, isToken(h.method), "method %q", h.method)
	require.Equal(t, 1, h.major)
	require.Equal(t, "HTTP/1."+strconv.Itoa(h.minor), h.proto)
	require.NotEmpty(t, h.target)
	require.NotContains(t, h.target, " ")
	for k, vv := range h.header {
		require.True(t, isToken(k), "field name %q", k)
		require.Equal(t, textproto.CanonicalMIMEHeaderKey(k), k, "field name not canonical")
		require.NotEmpty(t, vv, "field %s", k)
		for _, v := range vv {
			for i := 0; i < len(v); i++ {
				c := v[i]
				require.False(t, c < ' ' && c != '\t' || c == 0x7f, "field %s: control byte %#x in %q", k, c, v)
			}
			require.Equal(t, strings.Trim(v, " \t"), v, "field %s: blanks around %q", k, v)
		}
	}
	require.NotContains(t, h.header, "Host")
	require.NotContains(t, h.header, "Transfer-Encoding")
	for i := 0; i < len(h.host); i++ {
		require.True(t, isHostByte(h.host[i]), "host %q", h.host)
	}
	require.GreaterOrEqual(t, h.contentLength, int64(-1))
	if cl, ok := h.header["Content-Length"]; ok {
		require.Len(t, cl, 1)
		n, err := strconv.ParseInt(cl[0], 10, 64)
		require.NoError(t, err)
		require.Equal(t, n, h.contentLength)
		require.False(t, h.chunked, "chunked with a Content-Length")
	} else {
		require.Equal(t, int64(-1), h.contentLength)
	}
	if h.chunked {
		require.Equal(t, 1, h.minor, "chunked on HTTP/1.0")
	}
	conn := h.header["Connection"]
	hasClose, hasKeepAlive := refHasToken(conn, "close"), refHasToken(conn, "keep-alive")
	require.Equal(t, hasClose || h.minor == 0 && !hasKeepAlive, h.wantsClose, "wantsClose, Connection: %q", conn)
}

// compareReadRequest checks that net/http's parser accepts a head sluice
// accepted and reads it the same way (the server's own checks in net/http,
// stricter, are not callable; sluice is allowed to refuse more).
func compareReadRequest(t *testing.T, raw []byte, h *head, url, urlHost string) {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		// Trailer fields are dropped by sluice, so a Trailer field naming
		// a framing field is harmless to it; net/http refuses it.
		if strings.Contains(err.Error(), "bad trailer key") {
			return
		}
		t.Fatalf("sluice accepts a head net/http refuses: %v\n%q", err, raw)
	}
	require.Equal(t, h.method, r.Method)
	require.Equal(t, h.target, r.RequestURI)
	require.Equal(t, h.proto, r.Proto)
	require.Equal(t, h.major, r.ProtoMajor)
	require.Equal(t, h.minor, r.ProtoMinor)
	require.Equal(t, url, r.URL.String())
	require.Equal(t, h.wantsClose, r.Close, "Close")
	require.Equal(t, h.chunked, len(r.TransferEncoding) > 0, "chunked")
	switch {
	case h.chunked:
		require.Equal(t, int64(-1), r.ContentLength)
	case h.contentLength >= 0:
		require.Equal(t, h.contentLength, r.ContentLength)
	default:
		require.Equal(t, int64(0), r.ContentLength)
	}
	// ReadRequest removes the Host field, leaving Request.Host.
	host := urlHost
	if host == "" {
		host = h.host
	}
	require.Equal(t, host, r.Host)

	folded := hasFold(raw)
	for k, vv := range h.header {
		if k == "Trailer" && h.chunked {
			continue // net/http moves it to Request.Trailer
		}
		rv, ok := r.Header[k]
		require.True(t, ok, "field %s: net/http does not see it", k)
		if !slicesEqual(vv, rv) && !(folded && slicesEqual(normalizeBlanks(vv), normalizeBlanks(rv))) {
			t.Fatalf("field %s: sluice %q, net/http %q", k, vv, rv)
		}
	}
	for k := range r.Header {
		switch k {
		case "Host", "Transfer-Encoding":
			continue // sluice removes them
		case "Cache-Control":
			if _, ok := r.Header["Pragma"]; ok {
				continue // net/http adds it for "Pragma: no-cache"
			}
		}
		_, ok := h.header[k]
		require.True(t, ok, "field %s: sluice does not see it", k)
	}
}

// hasFold reports whether the head raw has an obs-fold line.
func hasFold(raw []byte) bool {
	return bytes.Contains(raw, []byte("\n ")) || bytes.Contains(raw, []byte("\n\t"))
}

// normalizeBlanks turns every run of blanks into one space and trims the
// ends: the two parsers unfold differently around empty continuation lines.
func normalizeBlanks(vv []string) []string {
	out := make([]string, len(vv))
	for i, v := range vv {
		out[i] = strings.Join(strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == '\t' }), " ")
	}
	return out
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// isToken is RFC 9110's token, written apart from the parser's table.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func isHostByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!$%&'()*+,-.:;=[]_~", c) >= 0
}

// refHasToken is hasToken written apart: comma-separated elements, blanks
// trimmed, ASCII case folded.
func refHasToken(vv []string, tok string) bool {
	for _, v := range vv {
		for _, e := range strings.Split(v, ",") {
			e = strings.Trim(e, " \t")
			if len(e) == len(tok) && strings.ToLower(asciiOnly(e)) == tok {
				return true
			}
		}
	}
	return false
}

// asciiOnly returns s, or "" if s has a byte beyond ASCII (so that
// strings.ToLower folds ASCII letters only).
func asciiOnly(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return ""
		}
	}
	return s
}

// checkChunkSize compares parseChunkSize on line with refChunkSize.
func checkChunkSize(t *testing.T, line []byte) {
	t.Helper()
	n, err := parseChunkSize(line)
	want, ok := refChunkSize(line)
	require.Equal(t, ok, err == nil, "parseChunkSize(%q): %v", line, err)
	if ok {
		require.Equal(t, want, n, "parseChunkSize(%q)", line)
	}
}

// refChunkSize parses a chunk-size line as parseChunkSize should: up to
// 16 hex digits with a value that fits an int64, then blanks and
// extensions.
func refChunkSize(line []byte) (int64, bool) {
	size, _, _ := bytes.Cut(line, []byte(";"))
	size = bytes.TrimRight(size, " \t")
	if len(size) == 0 || len(size) > 16 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(size), 16, 64)
	if err != nil || n > math.MaxInt64 {
		return 0, false
	}
	return int64(n), true
}

// chunkedResult is what a chunked decoder made of an input.
type chunkedResult struct {
	ok       bool
	body     string
	consumed int // bytes of the input up to the end of the body
}

// FuzzChunkedBody runs sluice's body reader over a chunked body (the first
// split bytes already buffered, the rest arriving from a pipe) and checks
// it against a plain decoder and against net/http's.
func FuzzChunkedBody(f *testing.F) {
	for _, s := range []string{
		"0\r\n\r\n",
		"5\r\nhello\r\n0\r\n\r\n",
		"5;a=b\r\nhello\r\n6\r\n world\r\n0;c\r\n\r\nGET / HTTP/1.1\r\n\r\n",
		"5 ;a=b\r\nhello\r\n0\r\n\r\n",
		"A\r\n0123456789\r\n0\r\nX-T: v\r\n folded\r\nX-U: w\n\r\n",
		"5\r\nhello\r\n0\r\ngarbage\r\n\r\n",
		"5\r\nhello\r\n0\r\n X-T: v\r\n\r\n",
		"5\nhello\r\n0\r\n\r\n",
		"5\r\nhello\n0\r\n\r\n",
		"5;a\rb\r\nhello\r\n0\r\n\r\n",
		"0000000000000005\r\nhello\r\n0\r\n\r\n",
		"00000000000000005\r\nhello\r\n0\r\n\r\n",
		"8000000000000000\r\nhello",
		"5\r\nhel",
		strings.Repeat("1;"+strings.Repeat("e", 500)+"\r\na\r\n", 40) + "0\r\n\r\n",
	} {
		for _, split := range []uint16{0, 3, 4096} {
			f.Add(split, []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, split uint16, data []byte) {
		if len(data) > 32<<10 {
			return // the pipe must take the rest at once
		}
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			if len(line) >= maxChunkLine-8 {
				// The longest line sluice takes depends on what its
				// buffer holds: not compared.
				return
			}
		}
		got, _ := sluiceChunked(t, data, min(int(split), len(data)), 0)
		want, bws := refChunked(data)
		require.Equal(t, want, got, "sluice against the plain decoder")
		if !got.ok || bws {
			return // sluice accepts blanks before ";", net/http does not
		}
		require.Equal(t, got, netHTTPChunked(data), "sluice accepts a body net/http reads otherwise")
	})
}

// sluiceChunked decodes data with sluice's body reader on a connection
// whose buffer holds data[:split] and whose socket, a pipe, the rest, with
// the body limit limit (0: none); tooLarge reports that the read ended
// with *http.MaxBytesError.
func sluiceChunked(t *testing.T, data []byte, split int, limit int64) (res chunkedResult, tooLarge bool) {
	t.Helper()
	var p [2]int
	require.NoError(t, unix.Pipe2(p[:], unix.O_CLOEXEC))
	rd, wr := os.NewFile(uintptr(p[0]), "pipe"), os.NewFile(uintptr(p[1]), "pipe")
	defer rd.Close()
	// The writer may have to wait for the reader: a pipe can hold as
	// little as a page.
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		_, _ = wr.Write(data[split:])
		wr.Close()
	})

	c := &conn{ws: &workerState{}, fd: p[0]}
	c.buf = make([]byte, max(readBufSize, split))
	c.n = copy(c.buf, data[:split])
	b := &body{c: c, ctx: context.Background(), remaining: -1, chunked: true, limit: limit}
	var out bytes.Buffer
	var err error
	buf := make([]byte, 7) // small reads: chunks end inside them
	for err == nil {
		var n int
		n, err = b.Read(buf)
		out.Write(buf[:n])
	}
	rest, rerr := io.ReadAll(rd) // and lets the writer finish
	require.NoError(t, rerr)
	if limit > 0 && int64(out.Len()) > limit {
		t.Fatalf("%d bytes of body read, past the limit of %d", out.Len(), limit)
	}
	if !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		return chunkedResult{}, errors.As(err, &mbe)
	}
	fromPipe := len(data) - split - len(rest)
	return chunkedResult{ok: true, body: out.String(), consumed: split + fromPipe - (c.n - c.r)}, false
}

// FuzzChunkedBodyLimit runs sluice's body reader over a chunked body with
// a body limit, chunk sizes drawn from the input (so that their sums reach
// the ends of int64), and checks that no byte past the limit is ever read,
// and that a body the plain decoder reads whole is refused exactly when it
// is longer than the limit.
func FuzzChunkedBodyLimit(f *testing.F) {
	f.Add(uint64(100), uint64(1), uint64(1<<63-1), []byte("c"))
	f.Add(uint64(100), uint64(64), uint64(64), []byte("abc"))
	f.Add(uint64(1<<20), uint64(1<<63-1), uint64(1<<63-1), []byte("x"))
	f.Add(uint64(10), uint64(5), uint64(5), []byte("0123456789"))
	f.Fuzz(func(t *testing.T, limit, size1, size2 uint64, fill []byte) {
		lim := int64(limit%(1<<20)) + 1
		if len(fill) == 0 {
			fill = []byte{'x'}
		}
		// Two chunks announced with sizes from the input; the data sent
		// is at most 4 KB of each, so a huge size is left unfinished.
		var in bytes.Buffer
		for _, size := range []uint64{size1, size2} {
			size &= 1<<63 - 1
			fmt.Fprintf(&in, "%x\r\n", size)
			n := min(size, 4096)
			for i := uint64(0); i < n; i++ {
				in.WriteByte(fill[i%uint64(len(fill))])
			}
			if size > 4096 {
				break
			}
			in.WriteString("\r\n")
		}
		in.WriteString("0\r\n\r\n")
		data := in.Bytes()
		got, tooLarge := sluiceChunked(t, data, min(len(data), 7), lim)
		want, _ := refChunked(data)
		if want.ok {
			require.Equal(t, int64(len(want.body)) > lim, tooLarge, "refused exactly when the body is longer than the limit")
			if !tooLarge {
				require.Equal(t, want, got)
			}
		}
		if size1&(1<<63-1) > uint64(lim) {
			require.True(t, tooLarge, "a first chunk announced beyond the limit is refused")
		}
	})
}

// refChunked decodes a chunked body by RFC 9112 section 7.1 as sluice reads
// it: chunk lines end in CRLF without other CR, chunk sizes as
// refChunkSize, framing overhead bounded as net/http bounds it, trailer
// lines ending in CRLF or LF and shaped as field lines. bws reports a blank
// before a chunk extension, which net/http refuses.
func refChunked(data []byte) (res chunkedResult, bws bool) {
	pos := 0
	nextLine := func() ([]byte, bool) {
		i := bytes.IndexByte(data[pos:], '\n')
		if i < 0 {
			return nil, false
		}
		line := data[pos : pos+i]
		pos += i + 1
		return line, true
	}
	var body []byte
	var excess int64
	for {
		line, ok := nextLine()
		if !ok || len(line) == 0 || line[len(line)-1] != '\r' {
			return chunkedResult{}, bws
		}
		line = line[:len(line)-1]
		if bytes.IndexByte(line, '\r') >= 0 {
			return chunkedResult{}, bws
		}
		if i := bytes.IndexByte(line, ';'); i > 0 && (line[i-1] == ' ' || line[i-1] == '\t') {
			bws = true
		}
		n, ok := refChunkSize(line)
		if !ok {
			return chunkedResult{}, bws
		}
		excess += int64(len(line)) + 2
		if n >= 16<<10 {
			excess = 0
		} else {
			excess = max(excess-16-2*n, 0)
		}
		if excess > 16<<10 {
			return chunkedResult{}, bws
		}
		if n == 0 {
			break
		}
		if int64(len(data)-pos)-2 < n || string(data[pos+int(n):pos+int(n)+2]) != "\r\n" {
			return chunkedResult{}, bws
		}
		body = append(body, data[pos:pos+int(n)]...)
		pos += int(n) + 2
	}
	for first := true; ; first = false {
		line, ok := nextLine()
		if !ok {
			return chunkedResult{}, bws
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			return chunkedResult{ok: true, body: string(body), consumed: pos}, bws
		}
		s := string(line)
		var value string
		if s[0] == ' ' || s[0] == '\t' {
			if first {
				return chunkedResult{}, bws
			}
			value = s
		} else {
			name, v, ok := strings.Cut(s, ":")
			if !ok || !isToken(name) {
				return chunkedResult{}, bws
			}
			value = v
		}
		for i := 0; i < len(value); i++ {
			if c := value[i]; c < ' ' && c != '\t' || c == 0x7f {
				return chunkedResult{}, bws
			}
		}
	}
}

// netHTTPChunked decodes data as net/http's server does: its chunked
// reader, then the trailer section through net/textproto (without the
// server's look-ahead for a CRLFCRLF, which only makes it refuse more).
func netHTTPChunked(data []byte) chunkedResult {
	rd := bytes.NewReader(data)
	br := bufio.NewReader(rd)
	body, err := io.ReadAll(httputil.NewChunkedReader(br))
	if err != nil {
		return chunkedResult{}
	}
	if _, err := textproto.NewReader(br).ReadMIMEHeader(); err != nil {
		return chunkedResult{}
	}
	return chunkedResult{ok: true, body: string(body), consumed: len(data) - rd.Len() - br.Buffered()}
}

// FuzzPlainPath checks the allocation-free parse of a plain origin-form
// target against url.ParseRequestURI: when it takes a target, the URL is
// the same.
func FuzzPlainPath(f *testing.F) {
	for _, s := range []string{"/", "/hello", "/a/b?c=d&e", "//x", "/a%20b", "/p?", "/p??", "/a!b",
		"/q?#f", "/q?a b", "/:@;=+$,~", "/a?b?c", "/é", "*", "http://h/p"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		var u url.URL
		if !parsePlainPath(target, &u) {
			return
		}
		want, err := url.ParseRequestURI(target)
		require.NoError(t, err, "taken as plain: %q", target)
		assert.Equal(t, *want, u, "target %q", target)
	})
}

func TestPlainPathTakesTheUsualTargets(t *testing.T) {
	for _, s := range []string{"/", "/hello", "/a/b?c=d&e", "//x", "/:@;=+$,~", "/a?b?c", "/q?#f", "/q?a%20b"} {
		var u url.URL
		assert.True(t, parsePlainPath(s, &u), "%q", s)
	}
	for _, s := range []string{"", "*", "/a%20b", "/p?", "/a!b", "/é", "http://h/p", "/q?a b", "/a#b"} {
		var u url.URL
		assert.False(t, parsePlainPath(s, &u), "%q", s)
	}
}
