package server

import (
	"context"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/sluice-go/sluice/sched"
)

// ResponseWriter writes a response. It implements http.ResponseWriter,
// http.Flusher, http.Hijacker, io.StringWriter, io.ReaderFrom (a file
// goes by sendfile(2); see ReadFrom), and the methods
// http.ResponseController looks for: FlushError, SetReadDeadline,
// SetWriteDeadline and EnableFullDuplex.
//
// A response that fits its 4 KB buffer and is complete when the handler
// returns is sent in one write with a Content-Length. A longer one, or one
// flushed early, is sent with chunked encoding (HTTP/1.1) or delimited by
// closing the connection (HTTP/1.0). Like net/http's, it is the handler's:
// use it from the handler's coroutine or from one goroutine at a time the
// handler waits for; writes that must wait for the client release the
// worker in the first case and block in the second.
type ResponseWriter struct {
	c   *conn
	req *Request
	ctx context.Context

	header      http.Header
	headerOut   bool      // Header gave the map out: it is not reused
	set         [4]string // SetHeader's values
	nset        int       // of set, used
	status      int
	wroteHeader bool // the handler chose the status
	headerSent  bool // the status line and header are on their way
	chunking    bool
	bodyless    bool  // HEAD, 1xx, 204, 304: no body on the wire
	declared    int64 // Content-Length the handler set, or -1
	written     int64 // body bytes the handler wrote
	out         []byte
	err         error // a write failed: the connection closes
	hijacked    bool  // Hijack gave the connection to the handler
	// trailers: the handler declared trailers (a Trailer field) or set a
	// key with http.TrailerPrefix when the header went out; the body is
	// then chunked, and they follow its last chunk.
	trailers bool
	// returned is set once the handler has returned, before the end of
	// the response goes out: the writer is dead. Atomic: a goroutine that
	// outlived the handler may still call it, and must be told.
	returned atomic.Bool
}

var (
	// ErrBodyNotAllowed is returned by Write for a status that has no body
	// (1xx, 204, 304).
	ErrBodyNotAllowed = http.ErrBodyNotAllowed
	// ErrContentLength is returned by Write beyond the Content-Length the
	// handler declared.
	ErrContentLength = http.ErrContentLength
)

// Header returns the header map to fill before the first Write or
// WriteHeader. SetHeader does what Header().Set does without allocating.
// After the handler returned, it returns a map of its own, which nothing
// reads.
func (w *ResponseWriter) Header() http.Header {
	if w.returned.Load() {
		return make(http.Header)
	}
	w.headerOut = true
	return w.header
}

// SetHeader sets the header field key to value, replacing any values it
// had, as Header().Set does. Unlike that, it allocates nothing for the
// first four fields it sets (nor for the header map when the handler does
// not call Header): the native path's way to set fields on a busy server.
// Call it before the first Write or WriteHeader; after the handler
// returned, it does nothing.
func (w *ResponseWriter) SetHeader(key, value string) {
	if w.returned.Load() {
		return
	}
	key = textproto.CanonicalMIMEHeaderKey(key) // no allocation if canonical
	if w.nset == len(w.set) {
		w.header[key] = []string{value}
		return
	}
	w.set[w.nset] = value
	w.header[key] = w.set[w.nset : w.nset+1 : w.nset+1]
	w.nset++
}

// WriteHeader sends the status code with the header. Informational codes
// (1xx except 101) are sent at once and may be followed by another; the
// rest are sent with the first flush of the body. Later calls are ignored,
// as are calls after the handler returned.
func (w *ResponseWriter) WriteHeader(code int) {
	if w.returned.Load() {
		return
	}
	w.writeHeader(code)
}

// writeHeader is WriteHeader, also for the server after the handler
// returned.
func (w *ResponseWriter) writeHeader(code int) {
	defer w.c.leave(w.c.enter())
	if w.hijacked {
		w.c.srv.log.Warn("sluice server: WriteHeader on a hijacked connection", "code", code, "caller", callerOf(2))
		return
	}
	if w.wroteHeader || w.err != nil {
		return
	}
	if code < 100 || code > 999 {
		panic("server: invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		w.sendInformational(code)
		return
	}
	w.wroteHeader = true
	w.status = code
	w.declared = -1
	if cl := firstValue(w.header, "Content-Length"); cl != "" {
		if n, ok := parseContentLength(cl); ok {
			w.declared = n
		} else {
			delete(w.header, "Content-Length")
		}
	}
	w.bodyless = w.req.Method == "HEAD" || !bodyAllowed(code)
}

// bodyAllowed reports whether a response of status code may have a body:
// not 101 Switching Protocols (what follows is the new protocol's), 204 or
// 304.
func bodyAllowed(code int) bool {
	return code != http.StatusSwitchingProtocols && code != http.StatusNoContent && code != http.StatusNotModified
}

func (w *ResponseWriter) sendInformational(code int) {
	if w.req.ProtoMajor == 1 && w.req.ProtoMinor == 0 {
		return // an HTTP/1.0 client does not expect them
	}
	b := w.getOut()
	b = appendStatusLine(b, 1, code)
	b = w.appendFields(b, w.collectFields(true), -1, nil)
	b = append(b, "\r\n"...)
	w.fail(w.c.send(w.ctx, b))
	w.putOut(b)
}

// Write buffers p as body, sending what the buffer cannot hold. After
// Hijack it returns http.ErrHijacked; after the handler returned (a
// goroutine it left behind), an error and nothing written, as the
// connection may carry the next request by then.
func (w *ResponseWriter) Write(p []byte) (int, error) {
	if w.returned.Load() {
		return 0, errWriterDone // the connection may be serving the next request
	}
	defer w.c.leave(w.c.enter())
	if w.hijacked {
		if len(p) > 0 {
			w.c.srv.log.Warn("sluice server: Write on a hijacked connection", "caller", callerOf(2))
		}
		return 0, http.ErrHijacked
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !bodyAllowed(w.status) {
		return 0, ErrBodyNotAllowed
	}
	if w.declared >= 0 && w.written+int64(len(p)) > w.declared {
		return 0, ErrContentLength
	}
	w.written += int64(len(p))
	if w.bodyless {
		// HEAD: counted, not sent; the start is kept to sniff the
		// Content-Type a GET would get.
		if k := min(len(p), sniffLen-len(w.out)); k > 0 {
			w.out = append(w.out, p[:k]...)
		}
		return len(p), nil
	}
	if len(w.out)+len(p) <= cap(w.out) {
		w.out = append(w.out, p...)
		return len(p), nil
	}
	n := len(p)
	if !w.headerSent && len(w.out) < sniffLen {
		// The header goes out with this write: the Content-Type sniffer
		// gets its first 512 bytes, whatever the size of the write, as
		// in net/http.
		k := min(sniffLen-len(w.out), len(p))
		w.out = append(w.out, p[:k]...)
		p = p[k:]
	}
	if err := w.flush(false); err != nil {
		return 0, err
	}
	if len(p) < cap(w.out)/2 {
		w.out = append(w.out, p...)
		return n, nil
	}
	if err := w.sendBody(p); err != nil {
		return 0, err
	}
	return n, nil
}

// sniffLen is how much of a body http.DetectContentType looks at.
const sniffLen = 512

// WriteString is Write for a string.
func (w *ResponseWriter) WriteString(s string) (int, error) {
	if w.returned.Load() {
		return 0, errWriterDone
	}
	defer w.c.leave(w.c.enter())
	if w.hijacked {
		if len(s) > 0 {
			w.c.srv.log.Warn("sluice server: Write on a hijacked connection", "caller", callerOf(2))
		}
		return 0, http.ErrHijacked
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.err == nil && !w.bodyless && len(w.out)+len(s) <= cap(w.out) &&
		(w.declared < 0 || w.written+int64(len(s)) <= w.declared) {
		w.out = append(w.out, s...)
		w.written += int64(len(s))
		return len(s), nil
	}
	return w.Write([]byte(s))
}

// Flush sends the header and what the body buffer holds.
func (w *ResponseWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush, returning the error of the write; after Hijack,
// http.ErrHijacked (where net/http's panics). A handler that flushes
// streams its response (server-sent events, a long poll) and commonly
// waits after each Flush for what it sends next: so when the handler's
// own coroutine flushes, the worker goes to a spare thread as soon as the
// bytes are written (sched.Worker.Release), and serves its other
// connections while the handler waits; the handler takes the worker back
// when it writes again. From its first Flush on, a wait of the handler's
// is no longer logged as one that forgot sched.Await (sched.Worker.Quiet).
func (w *ResponseWriter) FlushError() error {
	if w.returned.Load() {
		return errWriterDone
	}
	if c := w.c; c.w != nil && !w.foreign() && !w.hijacked {
		c.w.Quiet()
		defer c.w.Release() // once the write below has left the worker
	}
	defer w.c.leave(w.c.enter())
	if c := w.c; c.w != nil && !w.foreign() && !w.headerSent && !c.streamed && !w.hijacked {
		// A stream: its route's next requests start alone (routeBook).
		c.streamed = true
		c.ws.routes.streamed(w.req.Method, w.req.URL.Path)
	}
	if w.hijacked {
		return http.ErrHijacked
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return w.err
	}
	return w.flush(false)
}

// flush sends the header if it is not yet sent, then the buffered body.
// final is set when the handler has returned: the body is complete, so a
// response that was never flushed gets a Content-Length.
func (w *ResponseWriter) flush(final bool) error {
	c := w.c
	if !w.headerSent {
		w.headerSent = true
		c.respStarted = true
		b := w.getOut()
		b = w.appendHead(b, final)
		if w.chunking && len(w.out) > 0 {
			b = appendChunkHead(b, len(w.out))
		}
		if !w.bodyless {
			b = append(b, w.out...)
		}
		if w.chunking && len(w.out) > 0 {
			b = append(b, "\r\n"...)
		}
		if final && w.chunking {
			b = w.appendLastChunk(b)
		}
		w.out = w.out[:0]
		err := c.send(w.ctx, b)
		w.putOut(b)
		return w.fail(err)
	}
	if len(w.out) > 0 {
		err := w.sendBody(w.out)
		w.out = w.out[:0]
		if err != nil {
			return err
		}
	}
	if final && w.chunking {
		b := w.appendLastChunk(w.getOut())
		err := c.send(w.ctx, b)
		w.putOut(b)
		return w.fail(err)
	}
	return nil
}

// appendLastChunk appends the chunked body's last chunk and the trailer
// section: the fields the handler declared in its Trailer field (those a
// trailer may carry) and those it set with http.TrailerPrefix, as net/http
// sends them.
func (w *ResponseWriter) appendLastChunk(b []byte) []byte {
	b = append(b, "0\r\n"...)
	if w.trailers {
		fields := w.scratch()
		for k, vv := range w.header {
			if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
				fields = append(fields, field{name, vv})
			}
		}
		for _, v := range w.header["Trailer"] {
			for name := range strings.SplitSeq(v, ",") {
				name = textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name))
				if vv := w.header[name]; len(vv) > 0 && httpguts.ValidTrailerHeader(name) {
					fields = append(fields, field{name, vv})
				}
			}
		}
		b = w.appendSorted(b, fields)
	}
	return append(b, "\r\n"...)
}

// sendBody sends p as body after the header, framed as the response is.
func (w *ResponseWriter) sendBody(p []byte) error {
	if w.bodyless || len(p) == 0 {
		return nil
	}
	if !w.chunking {
		return w.fail(w.c.send(w.ctx, p))
	}
	var hdr [20]byte
	if err := w.c.send(w.ctx, appendChunkHead(hdr[:0], len(p))); err != nil {
		return w.fail(err)
	}
	if err := w.c.send(w.ctx, p); err != nil {
		return w.fail(err)
	}
	return w.fail(w.c.send(w.ctx, []byte("\r\n")))
}

func (w *ResponseWriter) fail(err error) error {
	if err != nil && w.err == nil {
		w.err = err
		w.c.closeAfter.Store(true)
	}
	return err
}

// finish completes the response after the handler returned.
func (w *ResponseWriter) finish() {
	if !w.wroteHeader {
		w.writeHeader(http.StatusOK)
	}
	if w.err == nil {
		_ = w.flush(true)
	}
	if w.declared >= 0 && w.written < w.declared && !w.bodyless {
		// The handler promised more than it wrote: the framing is broken.
		w.c.closeAfter.Store(true)
	}
	w.c.ws.putOut(w.out)
	w.out = nil
	w.c.respStarted = false
}

// reset drops what the handler set and wrote, if nothing was sent yet.
func (w *ResponseWriter) reset() {
	clear(w.header)
	w.wroteHeader, w.status, w.written, w.declared, w.bodyless = false, 0, 0, -1, false
	w.out = w.out[:0]
}

// appendHead appends the status line and header fields, deciding the
// framing of the body.
func (w *ResponseWriter) appendHead(b []byte, final bool) []byte {
	c, r, h := w.c, w.req, w.header
	code := w.status
	noBody := !bodyAllowed(code)
	fs := w.collectFields(false)
	if hasToken(fs.conn, "close") {
		c.closeAfter.Store(true)
	}
	var extra [4][2]string
	ne := 0
	add := func(k, v string) { extra[ne] = [2]string{k, v}; ne++ }

	w.trailers = !noBody && r.ProtoMinor >= 1 && fs.trailers
	// A Transfer-Encoding of the handler's is framed as net/http frames
	// it: the server writes the field itself (or none), so that it never
	// goes out beside a Content-Length, which would leave the client to
	// guess the framing (RFC 9112 section 6.3).
	// So is a Content-Length: the server writes the one the handler
	// declared before WriteHeader (a field set after it is not one, as in
	// net/http, and would go out beside the server's own), or none.
	te := fs.te
	if w.declared >= 0 && te != "" && te != "identity" {
		w.declared = -1 // chunked wins
	}
	length := int64(-1) // written as the Content-Length field when not negative
	switch {
	case noBody:
	case w.declared >= 0:
		length = w.declared
	case final && !(w.bodyless && w.written == 0) && !w.trailers && te == "":
		length = w.written
	}
	if !noBody && length < 0 && !w.bodyless {
		if r.ProtoMinor >= 1 && te != "identity" {
			w.chunking = true
			add("Transfer-Encoding", "chunked")
		} else {
			// HTTP/1.0, or identity asked for: the close delimits the body.
			c.closeAfter.Store(true)
		}
	}
	// The body is sniffed for a Content-Type unless the handler set one,
	// said nosniff, or encoded the body (Content-Encoding: its bytes are
	// gzip's, say, not the content's; as net/http, golang/go#31753).
	if !fs.ctype && !noBody && len(w.out) > 0 && firstValue(h, "X-Content-Type-Options") != "nosniff" && firstValue(h, "Content-Encoding") == "" {
		add("Content-Type", http.DetectContentType(w.out))
	}
	if c.srv.stopping.Load() {
		c.closeAfter.Store(true)
	}
	switch {
	case code == http.StatusSwitchingProtocols:
		// The handler's Connection (Upgrade) says it all: the connection
		// becomes another protocol's, through Hijack.
	case c.closeAfter.Load():
		// The Connection field says what happens, as in net/http: a
		// handler's keep-alive is replaced by close (HTTP/1.0 closes
		// by default: nothing to say).
		if !hasToken(fs.conn, "close") {
			fs.omit("Connection")
			if r.ProtoMinor >= 1 {
				add("Connection", "close")
			}
		}
	case r.ProtoMinor == 0:
		// It asked for keep-alive, or closeAfter would be set.
		if !hasToken(fs.conn, "keep-alive") {
			add("Connection", "keep-alive")
		}
	}

	if c.srv.cfg.LoadHint {
		add(c.srv.loadHint())
	}
	b = appendStatusLine(b, r.ProtoMinor, code)
	b = w.appendFields(b, fs, length, extra[:ne])
	return append(b, "\r\n"...)
}

// headFields are the handler's header fields as they go out, gathered in
// one pass over its map, with what the framing needs to know of them.
type headFields struct {
	fields   []field  // scratch (ResponseWriter.scratch)
	date     bool     // a Date field
	ctype    bool     // a Content-Type field
	te       string   // the Transfer-Encoding field's first value
	conn     []string // the Connection field's values
	trailers bool     // a Trailer field, or a key with http.TrailerPrefix
}

// collectFields gathers the handler's fields into the worker's scratch,
// leaving out the keys with http.TrailerPrefix (trailers set early, sent
// after the body) and the fields that frame a body, which the server
// writes itself (a 1xx carries none: RFC 9110 section 8.6, as net/http).
func (w *ResponseWriter) collectFields(informational bool) headFields {
	fs := headFields{fields: w.scratch()}
	for k, vv := range w.header {
		switch {
		case strings.HasPrefix(k, http.TrailerPrefix):
			fs.trailers = true
			continue
		case k == "Content-Length":
			continue // the server writes its own, or none
		case k == "Transfer-Encoding":
			if len(vv) > 0 && !informational {
				fs.te = vv[0]
			}
			continue // likewise
		case k == "Trailer":
			fs.trailers = true
		case k == "Date":
			fs.date = true
		case k == "Content-Type":
			fs.ctype = true
		case k == "Connection":
			fs.conn = vv
		}
		fs.fields = append(fs.fields, field{k, vv})
	}
	return fs
}

// omit leaves key out of the gathered fields: the server writes its own.
func (fs *headFields) omit(key string) {
	fs.fields = slices.DeleteFunc(fs.fields, func(f field) bool { return f.key == key })
}

// appendFields appends the gathered fields in sorted order, a Date unless
// the handler set one, a Content-Length of length unless it is negative
// (appended as digits: no string to allocate), and the server's extra
// fields, and gives the scratch back to the worker.
func (w *ResponseWriter) appendFields(b []byte, fs headFields, length int64, extra [][2]string) []byte {
	b = w.appendSorted(b, fs.fields)
	if !fs.date {
		b = append(b, "Date: "...)
		if w.foreign() {
			b = appendDate(b, time.Now())
		} else {
			b = append(b, w.c.ws.dateHeader()...)
		}
		b = append(b, "\r\n"...)
	}
	if length >= 0 {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, length, 10)
		b = append(b, "\r\n"...)
	}
	for _, kv := range extra {
		b = appendField(b, kv[0], kv[1])
	}
	return b
}

// appendSorted appends fields, taken from scratch, sorted by name (a name
// there twice, a trailer declared twice, once), and gives the worker's
// scratch back, cleared so that it keeps no handler's strings alive.
func (w *ResponseWriter) appendSorted(b []byte, fields []field) []byte {
	slices.SortStableFunc(fields, func(a, b field) int { return strings.Compare(a.key, b.key) })
	for i, f := range fields {
		if i > 0 && fields[i-1].key == f.key {
			continue
		}
		for _, v := range f.values {
			b = appendField(b, f.key, v)
		}
	}
	clear(fields)
	if !w.foreign() {
		w.c.ws.fields = fields[:0]
	}
	return b
}

// The worker's state (its buffer pools, its scratch for header fields,
// its cached Date) is the worker's alone. The handler's coroutine uses it,
// as every method takes the worker back first (enter). A goroutine of the
// handler's may call the writer too, one at a time, while the handler
// waits for it; it must not touch the worker's state, for the worker may be
// serving other connections meanwhile (the handler, blocked waiting, has
// been taken off it). Such a goroutine allocates what it needs instead.

// foreign reports whether the caller is a goroutine other than the
// handler's coroutine.
func (w *ResponseWriter) foreign() bool {
	return w.c.w != nil && !sched.InCoroutine(w.ctx)
}

// getOut returns an empty output buffer: the worker's, or a new one.
func (w *ResponseWriter) getOut() []byte {
	if w.foreign() {
		return make([]byte, 0, outBufSize)
	}
	return w.c.ws.getOut()
}

// putOut gives a buffer of getOut back to the worker's pool, from the
// handler's coroutine.
func (w *ResponseWriter) putOut(b []byte) {
	if !w.foreign() {
		w.c.ws.putOut(b)
	}
}

// scratch returns an empty slice to gather header fields in: the
// worker's scratch (given back by appendSorted), or nil.
func (w *ResponseWriter) scratch() []field {
	if w.foreign() {
		return nil
	}
	return w.c.ws.fields[:0]
}

// firstValue is h.Get(key) for a key already canonical: the map lookup
// without canonicalising key again.
func firstValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// appendField appends "k: v", replacing CR and LF in the value with spaces
// (as net/http does) so that a handler cannot split the response.
func appendField(b []byte, k, v string) []byte {
	if !validToken(k) {
		return b // net/http drops invalid field names too
	}
	b = append(b, k...)
	b = append(b, ": "...)
	start := len(b)
	b = append(b, v...)
	for i, c := range b[start:] {
		if c == '\r' || c == '\n' {
			b[start+i] = ' '
		}
	}
	return append(b, "\r\n"...)
}

func appendStatusLine(b []byte, minor, code int) []byte {
	if minor >= 1 {
		b = append(b, "HTTP/1.1 "...)
	} else {
		b = append(b, "HTTP/1.0 "...)
	}
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	if text := http.StatusText(code); text != "" {
		b = append(b, text...)
	} else {
		b = append(b, "status code "...)
		b = strconv.AppendInt(b, int64(code), 10)
	}
	return append(b, "\r\n"...)
}

func appendChunkHead(b []byte, n int) []byte {
	b = strconv.AppendInt(b, int64(n), 16)
	return append(b, "\r\n"...)
}
