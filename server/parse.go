package server

import (
	"bytes"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/ascii"
)

// head is a parsed request head: the request line, the header fields and
// what they say about framing and the connection.
type head struct {
	method string
	target string
	proto  string
	major  int
	minor  int
	header http.Header
	host   string // the first Host field's value; Host is not in header
	hosts  int    // the Host fields seen
	// framing marks the fields that check reads from header (the field*
	// bits), seen while parsing, so that check looks up only those present.
	framing uint8

	contentLength int64 // -1: none given (chunked, or no body)
	chunked       bool
	wantsClose    bool // Connection: close, or HTTP/1.0 without keep-alive
	expect        string

	// pick names the fields whose first values the admission wants
	// picked out (admit.Pipeline.PickedHeaders), set before parsing;
	// parseFields fills picked[:len(pick)], unless a picked field was
	// folded over two lines (pickFailed: the admission looks in the map).
	pick       []string
	picked     [admit.MaxPicked]admit.Field
	pickFailed bool
}

// reqError is a request the server refuses before any handler runs: a
// status, a short public reason, and always a closed connection.
type reqError struct {
	status int
	reason string // appended to the status text; empty for none
	detail string // sentences for the body only, after the status; empty for none
	empty  bool   // answer with no body (Content-Length: 0)
}

func (e *reqError) Error() string {
	if e.reason == "" {
		return http.StatusText(e.status)
	}
	return http.StatusText(e.status) + ": " + e.reason
}

// line is the status line's code and text: "413 Request Entity Too
// Large".
func (e *reqError) line() string { return strconv.Itoa(e.status) + " " + e.Error() }

// body is the answer's text: the status line's, then the detail.
func (e *reqError) body() string {
	if e.detail == "" {
		return e.line()
	}
	return e.line() + "\n\n" + e.detail + "\n"
}

func badRequest(reason string) *reqError {
	return &reqError{status: http.StatusBadRequest, reason: reason}
}

var (
	errHeaderTooLarge = &reqError{status: http.StatusRequestHeaderFieldsTooLarge}
	errUnsupportedTE  = &reqError{status: http.StatusNotImplemented}
	errMalformed      = badRequest("")
	errHeadTimeout    = &reqError{status: http.StatusRequestTimeout}
	errTLSHandshake   = badRequest("TLS handshake on a plain HTTP port")
)

// tlsHandshakeRecord is the first byte of a TLS handshake record, and so
// of every TLS ClientHello (RFC 8446 section 5.1: ContentType handshake).
const tlsHandshakeRecord = 0x16

// bodyTooLarge is the answer to a request whose Content-Length exceeds
// Config.MaxBodyBytes: it says what was exceeded and, for the people who
// run the server, how to change it.
func bodyTooLarge(length, limit int64) *reqError {
	return &reqError{
		status: http.StatusRequestEntityTooLarge,
		detail: "The request's body (Content-Length: " + strconv.FormatInt(length, 10) + ") is larger than this " +
			"server accepts: " + formatBytes(limit) + ". The limit is the server's Config.MaxBodyBytes " +
			"(server.Config and sluice.Config; 64 MiB unless set): raise it where larger bodies are expected, " +
			"or set it negative for no limit.",
	}
}

// formatBytes writes n bytes for people: "67108864 bytes (64 MiB)",
// "1500000 bytes (1.4 MiB)".
func formatBytes(n int64) string {
	s := strconv.FormatInt(n, 10) + " bytes"
	for _, u := range [...]struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n < u.size {
			continue
		}
		if n%u.size == 0 {
			return s + " (" + strconv.FormatInt(n/u.size, 10) + " " + u.name + ")"
		}
		return s + " (" + strconv.FormatFloat(float64(n)/float64(u.size), 'f', 1, 64) + " " + u.name + ")"
	}
	return s
}

// findHeadEnd returns the length of the request head at the start of buf
// (through the empty line that ends it), or -1 if buf does not hold all of
// it yet. from is where the previous search stopped, so a head arriving in
// many pieces is scanned once. Lines end in CRLF or, as net/http accepts, a
// bare LF.
func findHeadEnd(buf []byte, from int) int {
	i := max(from-3, 0)
	for {
		j := bytes.IndexByte(buf[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
		// An empty line: LF, or CR LF, right after a LF.
		if i < len(buf) && buf[i] == '\n' {
			return i + 1
		}
		if i+1 < len(buf) && buf[i] == '\r' && buf[i+1] == '\n' {
			return i + 2
		}
	}
}

// parseHead parses the request head in buf, which findHeadEnd delimited.
// The strings of the result share one copy of buf, made for this head
// alone: a string a handler keeps keeps this request's head alive, and
// nothing else. The header's value slices are taken from room, the
// request's own, when it is long enough, else made for this head.
func parseHead(buf []byte, h *head, room []string) *reqError {
	s := string(buf)
	line, rest := nextLine(s)
	if err := parseRequestLine(line, h); err != nil {
		return err
	}
	if err := parseFields(rest, h, room); err != nil {
		return err
	}
	if h.major != 1 {
		return &reqError{status: http.StatusHTTPVersionNotSupported, reason: "unsupported protocol version"}
	}
	return h.check()
}

// parseRequestLine parses the request line (without its line end) into
// h's method, target and version, with net/http's checks.
func parseRequestLine(line string, h *head) *reqError {
	var ok1, ok2 bool
	h.method, line, ok1 = strings.Cut(line, " ")
	h.target, h.proto, ok2 = strings.Cut(line, " ")
	if !ok1 || !ok2 {
		return badRequest("malformed request line")
	}
	var ok bool
	if h.major, h.minor, ok = parseVersion(h.proto); !ok {
		return badRequest("malformed HTTP version " + strconv.Quote(h.proto))
	}
	if !validToken(h.method) {
		return badRequest("invalid method")
	}
	if h.target == "" {
		return badRequest("malformed request URI")
	}
	return nil
}

// nextLine splits s after its first line, dropping the line's CRLF or LF.
func nextLine(s string) (line, rest string) {
	i := strings.IndexByte(s, '\n')
	if i < 0 {
		return s, ""
	}
	line, rest = s[:i], s[i+1:]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, rest
}

func parseVersion(p string) (major, minor int, ok bool) {
	switch p {
	case "HTTP/1.1":
		return 1, 1, true
	case "HTTP/1.0":
		return 1, 0, true
	}
	if len(p) != 8 || !strings.HasPrefix(p, "HTTP/") || p[6] != '.' {
		return 0, 0, false
	}
	if p[5] < '0' || p[5] > '9' || p[7] < '0' || p[7] > '9' {
		return 0, 0, false
	}
	return int(p[5] - '0'), int(p[7] - '0'), true
}

// parseFields parses the header lines in s (which ends with the empty
// line) into h.header, with canonical keys, as net/textproto does:
// continuation lines are folded into the value before them with one space,
// values lose surrounding blanks, and a field name must be a token. The
// value slices share one array: room when it is long enough, else one made
// for this head.
func parseFields(s string, h *head, room []string) *reqError {
	n := strings.Count(s, "\n")
	if n > 0 {
		n-- // the empty line
	}
	// The counts are line counts: a head of many continuation or empty
	// lines must not size the map and the values by them.
	n = min(n, maxFieldsPresized)
	h.header = make(http.Header, n)
	for i, name := range h.pick {
		h.picked[i] = admit.Field{Name: name}
	}
	if n == 0 {
		return nil
	}
	var seen uint8 // of pick, the names found
	var vals []string
	if n <= len(room) {
		vals = room[:n:n]
	} else {
		vals = make([]string, n)
	}
	if s[0] == ' ' || s[0] == '\t' {
		return errMalformed // the first line cannot continue anything
	}
	var lastKey string
	var fold folding
	for {
		var line string
		line, s = nextLine(s)
		if line == "" {
			fold.end()
			return nil
		}
		if line[0] == ' ' || line[0] == '\t' {
			// obs-fold: continues the previous field's value. The fields
			// that frame the message or name its host have no reason to
			// be folded, and unfolding them is where parsers disagree
			// (net/http keeps the blank of an empty continuation, making
			// "chunked" "chunked "): refuse those.
			if foldRefused(lastKey) {
				return errMalformed
			}
			if slices.Contains(h.pick, lastKey) {
				h.pickFailed = true
			}
			vv := h.header[lastKey]
			v := trimBlanks(line)
			if !validValue(v) {
				return errMalformed
			}
			fold.add(&vv[len(vv)-1], v)
			continue
		}
		fold.end()
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return errMalformed
		}
		key, ok := canonicalKey(k)
		if !ok {
			if strings.IndexByte(k, ' ') >= 0 && k != "" {
				return badRequest("invalid header name")
			}
			return errMalformed
		}
		v = trimBlanks(v)
		if !validValue(v) {
			return errMalformed
		}
		lastKey = key
		if key == "Host" {
			// Taken out of the header, as net/http does: check validates
			// it, and the request carries it in its own field.
			if h.hosts++; h.hosts == 1 {
				h.host = v
			}
			continue
		}
		h.framing |= framingField(key)
		for i, name := range h.pick {
			if seen&(1<<i) == 0 && key == name && !takenOut(name) {
				h.picked[i].Value = v
				seen |= 1 << i
			}
		}
		if vv := h.header[key]; vv != nil {
			h.header[key] = append(vv, v)
		} else {
			if len(vals) == 0 {
				vals = make([]string, maxFieldsPresized)
			}
			vals[0] = v
			h.header[key] = vals[:1:1]
			vals = vals[1:]
		}
	}
}

// folding gathers a run of continuation lines and sets the value they
// continue once, at the run's end, so that unfolding is linear in the
// head's length (concatenating at each line was quadratic).
type folding struct {
	into *string // the value being continued; nil outside a run
	buf  []byte
}

// add continues the value at into with v, as net/textproto does: one space
// between non-empty parts.
func (f *folding) add(into *string, v string) {
	if f.into == nil {
		f.into = into
		f.buf = append(f.buf[:0], *into...)
	}
	if len(f.buf) == 0 {
		f.buf = append(f.buf, v...)
	} else if v != "" {
		f.buf = append(append(f.buf, ' '), v...)
	}
}

// end sets the value of the run, if one is under way.
func (f *folding) end() {
	if f.into != nil {
		*f.into = string(f.buf)
		f.into = nil
	}
}

// maxFieldsPresized bounds the number of fields the header map and the
// value slices are sized for before the fields are parsed; more are added
// as they come.
const maxFieldsPresized = 64

// foldRefused reports whether a continuation line of the field key makes
// the request malformed.
func foldRefused(key string) bool {
	return key == "Host" || key == "Content-Length" || key == "Transfer-Encoding"
}

func trimBlanks(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// canonicalKey returns k in canonical form without allocating when it is
// already canonical (the usual case), and false when k is not a token.
func canonicalKey(k string) (string, bool) {
	if !validToken(k) {
		return "", false
	}
	upper := true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if (upper && 'a' <= c && c <= 'z') || (!upper && 'A' <= c && c <= 'Z') {
			return textproto.CanonicalMIMEHeaderKey(k), true
		}
		upper = c == '-'
	}
	return k, true
}

// tokenChars marks the bytes allowed in a token (RFC 9110 tchar).
var tokenChars = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tokenChars[s[i]] {
			return false
		}
	}
	return true
}

// validValue reports whether s holds only field-value bytes: visible
// characters, blanks and obs-text, no controls.
func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// takenOut reports whether check takes the field key out of the header
// map (into head's own fields): a picked one then reads as absent, as it
// does in the map. (Host never enters the map: parseFields keeps it apart
// before it picks.)
func takenOut(key string) bool { return key == "Transfer-Encoding" }

// The fields check reads from the header, as bits of head.framing.
const (
	fieldContentLength uint8 = 1 << iota
	fieldTransferEncoding
	fieldConnection
	fieldExpect
)

// framingField returns key's bit among those check reads, or 0.
func framingField(key string) uint8 {
	switch key {
	case "Content-Length":
		return fieldContentLength
	case "Transfer-Encoding":
		return fieldTransferEncoding
	case "Connection":
		return fieldConnection
	case "Expect":
		return fieldExpect
	}
	return 0
}

// lookup returns the header's values for key, a field whose bit in
// h.framing says whether it was seen: a field not seen costs no lookup.
func (h *head) lookup(key string, bit uint8) []string {
	if h.framing&bit == 0 {
		return nil
	}
	return h.header[key]
}

// check applies the rules that span fields: Host, framing (the request
// smuggling defences) and the connection's fate.
func (h *head) check() *reqError {
	hdr := h.header
	if h.hosts > 1 {
		return badRequest("too many Host headers")
	}
	if h.minor >= 1 && h.hosts == 0 && h.method != "CONNECT" {
		return badRequest("missing required Host header")
	}
	if h.hosts == 1 && !validHost(h.host) {
		return badRequest("malformed Host header")
	}

	h.contentLength = -1
	cls := h.lookup("Content-Length", fieldContentLength)
	if len(cls) > 0 {
		first := cls[0]
		for _, cl := range cls[1:] {
			if cl != first {
				return badRequest("conflicting Content-Length headers")
			}
		}
		n, ok := parseContentLength(first)
		if !ok {
			return badRequest("bad Content-Length")
		}
		h.contentLength = n
		if len(cls) > 1 {
			hdr["Content-Length"] = cls[:1]
		}
	}
	if te := h.lookup("Transfer-Encoding", fieldTransferEncoding); te != nil {
		// Stricter than net/http, which ignores Transfer-Encoding on
		// HTTP/1.0 and lets chunked override a Content-Length: both are
		// the framing disagreements request smuggling is made of, and
		// RFC 9112 section 6.1 allows (for 1.0, requires) treating them
		// as faulty framing.
		if h.minor == 0 {
			return badRequest("Transfer-Encoding in an HTTP/1.0 request")
		}
		// ASCII case only: with Unicode folding "chun\u212aed" (Kelvin
		// sign) would be chunked here and unknown to net/http and proxies.
		if len(te) != 1 || !ascii.EqualFold(te[0], "chunked") {
			return errUnsupportedTE
		}
		if len(cls) > 0 {
			return badRequest("both Transfer-Encoding and Content-Length")
		}
		h.chunked = true
		delete(hdr, "Transfer-Encoding")
	}

	conn := h.lookup("Connection", fieldConnection)
	// A close option always wins (RFC 9112 section 9.6), even beside
	// keep-alive on HTTP/1.0, where net/http keeps the connection.
	// HTTP/1.0 closes unless it asks for keep-alive.
	h.wantsClose = hasToken(conn, "close") || h.minor == 0 && !hasToken(conn, "keep-alive")
	if e := h.lookup("Expect", fieldExpect); len(e) > 0 {
		// As net/http: a 100-continue token anywhere is honoured; any
		// other expectation alone is refused (417).
		if hasToken(e, "100-continue") {
			h.expect = "100-continue"
		} else {
			h.expect = e[0]
		}
	}
	return nil
}

// parseContentLength accepts only digits, as net/http does (no sign, no
// blanks inside), up to the largest int64.
func parseContentLength(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (1<<63-1-int64(c-'0'))/10 {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// hasToken reports whether the comma-separated values vv contain tok,
// compared without regard to ASCII case only: strings.EqualFold would take
// "\u212aeep-alive", with a Kelvin sign, for keep-alive, which net/http
// does not.
func hasToken(vv []string, tok string) bool {
	for _, v := range vv {
		for v != "" {
			var t string
			t, v, _ = strings.Cut(v, ",")
			if ascii.EqualFold(trimBlanks(t), tok) {
				return true
			}
		}
	}
	return false
}

// validHost is net/http's lenient Host check: bytes that may appear in a
// host, a port, brackets, or a percent-encoded or user-info part.
func validHost(h string) bool {
	for i := 0; i < len(h); i++ {
		if !hostChars[h[i]] {
			return false
		}
	}
	return true
}

var hostChars = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!$%&'()*+,-.:;=[]_~" {
		t[c] = true
	}
	return t
}()

// bytesToString views b as a string without copying; b must not change
// while the string is in use.
func bytesToString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
