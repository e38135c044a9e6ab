package reject

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Answer is the answer to every rejection that shares a reason, a status
// and a Retry-After, built once: a server writes its status line, Fields,
// its Date field, the empty line and Body; a net/http handler copies the
// header fields with SetHeader. Nothing may modify an Answer or the value
// slices SetHeader puts in a header map.
type Answer struct {
	// Reason names why the request was refused (the ReasonHeader value).
	Reason string
	// Status is the status code.
	Status int
	// RetryAfter is the Retry-After value in whole seconds, or negative
	// when the answer has none.
	RetryAfter int64
	// Body is the text body: "request not started: <reason>\n".
	Body string
	// Fields is the wire form of every header field but Date, each
	// "Name: value\r\n", in sorted order, Content-Length included.
	Fields []byte

	header http.Header // every field, Content-Length included
}

// NewAnswer builds the answer for a refusal: the status, Retry-After rounded
// up to whole seconds (none when retryAfter is negative), the
// NotStartedHeader marker, the ReasonHeader field, a text Content-Type and
// Content-Length, and the extra fields. Field names that are not tokens are
// dropped and CR and LF in values are replaced by spaces, as net/http does,
// so that a configured field or a reason cannot split the answer.
func NewAnswer(reason string, status int, retryAfter time.Duration, extra http.Header) *Answer {
	body := "request not started: " + reason + "\n"
	a := &Answer{Reason: reason, Status: status, RetryAfter: -1, Body: body, header: http.Header{}}
	for k, vv := range extra {
		a.header[http.CanonicalHeaderKey(k)] = slices.Clone(vv)
	}
	if retryAfter >= 0 {
		a.RetryAfter = int64((retryAfter + time.Second - 1) / time.Second)
		a.header["Retry-After"] = []string{strconv.FormatInt(a.RetryAfter, 10)}
	}
	a.header[NotStartedHeader] = []string{"1"}
	a.header[ReasonHeader] = []string{reason}
	a.header["Content-Type"] = []string{"text/plain; charset=utf-8"}
	a.header["Content-Length"] = []string{strconv.Itoa(len(body))}
	a.Fields = AppendFields(nil, a.header)
	return a
}

// SetHeader fills h with the answer's header fields, Content-Length
// included when withLength is set (a writer that sets the length itself
// leaves it out), then with extra, the fields of one refusal (nil when it
// has none).
func (a *Answer) SetHeader(h http.Header, withLength bool, extra http.Header) {
	for k, vv := range a.header {
		h[k] = vv
	}
	if !withLength {
		delete(h, "Content-Length")
	}
	for k, vv := range extra {
		h[http.CanonicalHeaderKey(k)] = vv
	}
}

// AppendFields appends the wire form of h's fields to b, each
// "Name: value\r\n", sorted by name: fields whose name is not a token are
// dropped, CR and LF in values become spaces.
func AppendFields(b []byte, h http.Header) []byte {
	if len(h) == 0 {
		return b
	}
	for _, k := range slices.Sorted(maps.Keys(h)) {
		if !validName(k) {
			continue
		}
		for _, v := range h[k] {
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, wireValue(v)...)
			b = append(b, "\r\n"...)
		}
	}
	return b
}

func validName(k string) bool {
	return k != "" && !strings.ContainsAny(k, " \t\r\n:")
}

// wireValue replaces CR and LF with spaces.
func wireValue(v string) string {
	if !strings.ContainsAny(v, "\r\n") {
		return v
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, v)
}
