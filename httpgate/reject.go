package httpgate

import (
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/sluice-go/sluice/reject"
)

// maxDrain is how much of a rejected request's body is read to keep its
// connection: net/http's own limit for bodies left unread by a handler.
const maxDrain = 256 << 10

// rejecter writes rejections; reject.Answer counts them.
type rejecter struct {
	answer   *reject.Answer
	onReject func(*http.Request, string)
}

var closeField = []string{"close"}

func (rj *rejecter) init(o *Rejection) {
	rj.answer = reject.NewAnswer(o.Status, o.RetryAfter, o.Header)
	rj.onReject = o.OnReject
}

func (rj *rejecter) stats() (int64, map[string]int64) { return rj.answer.Counts() }

// reject answers r with the rejection for reason.
func (rj *rejecter) reject(w http.ResponseWriter, r *http.Request, reason string) {
	e := rj.answer.Count(reason)
	if fn := rj.onReject; fn != nil {
		fn(r, reason)
	}
	h := w.Header()
	rj.answer.SetHeader(h, e, true)
	if !drain(r) {
		h["Connection"] = closeField
	}
	w.WriteHeader(rj.answer.Status())
	_, _ = io.WriteString(w, e.Body)
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
