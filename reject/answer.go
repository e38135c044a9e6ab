package reject

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Answer holds what the rejections of one server or middleware share,
// built once, and counts them. Writing a rejection then copies a few shared
// value slices into the response's header map and allocates almost nothing;
// nothing may write to those slices.
type Answer struct {
	fields  http.Header // every rejection's fields, without the reason
	status  int
	total   atomic.Int64
	reasons sync.Map // string → *Reason
}

// Reason is what the rejections for one reason share, and their count.
type Reason struct {
	n      atomic.Int64
	field  []string // the ReasonHeader value
	length []string // the body's Content-Length
	// Body is the text body: "request not started: <reason>\n".
	Body string
	// Fields is the wire form of the answer's header fields for this
	// reason, Content-Length included, each "Name: value\r\n", in sorted
	// order; a server that writes the answer itself appends its status
	// line, these, its Date field, the empty line and Body.
	Fields []byte
}

// NewAnswer builds the answer: status (zero means 503), Retry-After rounded
// up to whole seconds (zero means 1 s, negative means none), the
// NotStartedHeader marker, a text Content-Type, and the extra fields.
func NewAnswer(status int, retryAfter time.Duration, extra http.Header) *Answer {
	a := &Answer{fields: http.Header{}, status: status}
	if a.status == 0 {
		a.status = http.StatusServiceUnavailable
	}
	for k, vv := range extra {
		a.fields[http.CanonicalHeaderKey(k)] = append([]string(nil), vv...)
	}
	a.fields[NotStartedHeader] = []string{"1"}
	if d := retryAfter; d >= 0 {
		if d == 0 {
			d = time.Second
		}
		a.fields["Retry-After"] = []string{strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)}
	}
	a.fields["Content-Type"] = []string{"text/plain; charset=utf-8"}
	return a
}

// Status returns the rejections' status code.
func (a *Answer) Status() int { return a.status }

// Count counts one rejection for reason and returns what its answer shares.
func (a *Answer) Count(reason string) *Reason {
	e := a.reason(reason)
	a.total.Add(1)
	e.n.Add(1)
	return e
}

func (a *Answer) reason(reason string) *Reason {
	if v, ok := a.reasons.Load(reason); ok {
		return v.(*Reason)
	}
	body := "request not started: " + reason + "\n"
	e := &Reason{
		field:  []string{reason},
		length: []string{strconv.Itoa(len(body))},
		Body:   body,
	}
	h := http.Header{}
	a.SetHeader(h, e, true)
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(h)) {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") {
			continue // not a field name: dropped, as net/http does
		}
		for _, v := range h[k] {
			b.WriteString(k + ": " + wireValue(v) + "\r\n")
		}
	}
	e.Fields = []byte(b.String())
	v, _ := a.reasons.LoadOrStore(reason, e)
	return v.(*Reason)
}

// wireValue replaces CR and LF with spaces, so that a configured field or a
// reason cannot split the answer.
func wireValue(v string) string {
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, v)
}

// SetHeader fills h with the fields of a rejection for e, Content-Length
// included when withLength is set.
func (a *Answer) SetHeader(h http.Header, e *Reason, withLength bool) {
	for k, vv := range a.fields {
		h[k] = vv
	}
	h[ReasonHeader] = e.field
	if withLength {
		h["Content-Length"] = e.length
	}
}

// Counts returns the rejections counted, in all and by reason.
func (a *Answer) Counts() (total int64, by map[string]int64) {
	by = map[string]int64{}
	a.reasons.Range(func(k, v any) bool {
		by[k.(string)] = v.(*Reason).n.Load()
		return true
	})
	return a.total.Load(), by
}
