package httpgate

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/reject"
)

// maxDrain is how much of a rejected request's body is read to keep its
// connection: net/http's own limit for bodies left unread by a handler.
const maxDrain = 256 << 10

// rejecter writes rejections and counts them.
type rejecter struct {
	fields   http.Header // shared by every rejection; nothing writes to them
	status   int
	onReject func(*http.Request, string)
	reasons  sync.Map // string → *reasonEntry
	_        [64]byte
	rejected atomic.Int64
}

// reasonEntry counts the rejections for one reason and holds what their
// answers share, built once.
type reasonEntry struct {
	n      atomic.Int64
	field  []string // the ReasonHeader value
	length []string // Content-Length
	body   string
}

var closeField = []string{"close"}

func (rj *rejecter) init(o *Rejection) {
	rj.fields = http.Header{}
	for k, vv := range o.Header {
		rj.fields[http.CanonicalHeaderKey(k)] = append([]string(nil), vv...)
	}
	rj.fields[reject.NotStartedHeader] = []string{"1"}
	if d := o.RetryAfter; d >= 0 {
		if d == 0 {
			d = time.Second
		}
		rj.fields["Retry-After"] = []string{strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)}
	}
	rj.fields["Content-Type"] = []string{"text/plain; charset=utf-8"}
	rj.status = o.Status
	if rj.status == 0 {
		rj.status = http.StatusServiceUnavailable
	}
	rj.onReject = o.OnReject
}

func (rj *rejecter) reason(reason string) *reasonEntry {
	if v, ok := rj.reasons.Load(reason); ok {
		return v.(*reasonEntry)
	}
	body := "request not started: " + reason + "\n"
	v, _ := rj.reasons.LoadOrStore(reason, &reasonEntry{
		field:  []string{reason},
		length: []string{strconv.Itoa(len(body))},
		body:   body,
	})
	return v.(*reasonEntry)
}

func (rj *rejecter) stats() (int64, map[string]int64) {
	by := map[string]int64{}
	rj.reasons.Range(func(k, v any) bool {
		by[k.(string)] = v.(*reasonEntry).n.Load()
		return true
	})
	return rj.rejected.Load(), by
}

// reject answers r with the rejection for reason.
func (rj *rejecter) reject(w http.ResponseWriter, r *http.Request, reason string) {
	e := rj.reason(reason)
	rj.rejected.Add(1)
	e.n.Add(1)
	if fn := rj.onReject; fn != nil {
		fn(r, reason)
	}
	h := w.Header()
	for k, vv := range rj.fields {
		h[k] = vv
	}
	h[reject.ReasonHeader] = e.field
	h["Content-Length"] = e.length
	if !drain(r) {
		h["Connection"] = closeField
	}
	w.WriteHeader(rj.status)
	_, _ = io.WriteString(w, e.body)
}

var drainBufs = sync.Pool{New: func() any { return new([16 << 10]byte) }}

// drain reads and discards the rest of an HTTP/1.x request's body, up to
// maxDrain bytes, and reports whether the connection can carry another
// request afterwards. HTTP/2 streams need nothing: reports true.
func drain(r *http.Request) (keep bool) {
	if r.ProtoMajor != 1 || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return true
	}
	if r.ContentLength > maxDrain {
		return false
	}
	if expectsContinue(r) {
		// The client waits for "100 Continue" before sending the body:
		// reading it would ask for it. net/http closes such a connection
		// after the answer.
		return false
	}
	buf := drainBufs.Get().(*[16 << 10]byte)
	defer drainBufs.Put(buf)
	var n int64
	for {
		m, err := r.Body.Read(buf[:])
		n += int64(m)
		if n > maxDrain {
			return false
		}
		if err == io.EOF {
			return true
		}
		if err != nil {
			return false
		}
	}
}

func expectsContinue(r *http.Request) bool {
	for _, v := range r.Header["Expect"] {
		if strings.Contains(strings.ToLower(v), "100-continue") {
			return true
		}
	}
	return false
}
