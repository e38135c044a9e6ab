package httpgate

import (
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/sluice-go/sluice/admit"
)

// maxDrain is how much of a rejected request's body is read to keep its
// connection: net/http's own limit for bodies left unread by a handler.
const maxDrain = 256 << 10

var closeField = []string{"close"}

// answer writes t's rejection: the prebuilt answer's fields, the refusal's
// own, and the body. Before that it reads what is left of the request's
// body, so that the connection can carry the next request, or asks for
// the connection to close when it cannot.
func answer(w http.ResponseWriter, r *http.Request, t *admit.Ticket) {
	a, extra := t.Answer()
	h := w.Header()
	a.SetHeader(h, true, extra)
	if !drain(r) {
		h["Connection"] = closeField
	}
	w.WriteHeader(a.Status)
	_, _ = io.WriteString(w, a.Body)
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
