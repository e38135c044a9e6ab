package httpgate

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/sluice-go/sluice/admit"
)

// Admission is the admission middleware: Wrap puts it in front of a
// handler. It is safe for concurrent use; one Admission may wrap several
// handlers, which then share its pipeline (gates, queue and counters).
type Admission struct {
	p       *admit.Pipeline
	tickets sync.Pool // of *ticket
}

// New returns the middleware for cfg (see package admit). It fails, naming
// the problem, when cfg cannot work: a gate that needs the sluice executor
// (gate.Busy), a queue without a gate, a status that is not an error. The
// age limit of cfg applies only to the queue here: net/http does not say
// when the kernel received a request.
func New(cfg admit.Config) (*Admission, error) {
	p, err := admit.New(cfg, admit.Host{})
	if err != nil {
		return nil, fmt.Errorf("httpgate: %w", err)
	}
	a := &Admission{p: p}
	a.tickets.New = func() any {
		tk := &ticket{ch: make(chan outcome, 1)}
		tk.t.OnStart = func() { tk.ch <- started }
		tk.t.OnReject = func() { tk.ch <- refused }
		return tk
	}
	return a, nil
}

// Wrap returns next behind the admission control.
func (a *Admission) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.serve(w, r, next)
	})
}

// Stats returns the counters.
func (a *Admission) Stats() admit.Stats { return a.p.Stats() }

// Pipeline returns the admission pipeline, for its queue and to change its
// age limit live.
func (a *Admission) Pipeline() *admit.Pipeline { return a.p }

// Close closes the pipeline: the gates are detached, waiting requests and
// later refusals are rejected with "queue-closed", the queue's timer stops.
// Requests the gates admit are still served. Close may be called more than
// once.
func (a *Admission) Close() { a.p.Close() }

// outcome is what a waiting request's callbacks report.
type outcome uint8

const (
	started outcome = iota + 1
	refused
)

// ticket is one request's state, pooled: its passage through the pipeline,
// the channel its callbacks signal, and the writer that records its status.
type ticket struct {
	t  admit.Ticket
	ch chan outcome
	sw statusWriter
}

func (a *Admission) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	tk := a.tickets.Get().(*ticket)
	defer a.tickets.Put(tk)
	t := &tk.t
	t.Method, t.Path, t.Header, t.RemoteAddr, t.Request = r.Method, r.URL.Path, r.Header, r.RemoteAddr, r
	switch a.p.Decide(t) {
	case admit.Admitted:
		a.run(tk, w, r, next)
	case admit.Rejected:
		answer(w, r, t)
	case admit.Queued:
		var out outcome
		select {
		case out = <-tk.ch:
		case <-r.Context().Done():
			if a.p.Withdraw(t) {
				answer(w, r, t)
				return
			}
			out = <-tk.ch // started or rejected meanwhile
		}
		switch {
		case out == refused:
			answer(w, r, t)
		case r.Context().Err() != nil:
			// Started as its client went away: the place goes on.
			a.p.Cancel(t)
			answer(w, r, t)
		default:
			a.run(tk, w, r, next)
		}
	}
}

// run serves an admitted request and ends it with its outcome, also when
// the handler panics (the panic then goes on to net/http).
func (a *Admission) run(tk *ticket, w http.ResponseWriter, r *http.Request, next http.Handler) {
	tk.sw = statusWriter{ResponseWriter: w}
	r, stop := withDeadline(r, &tk.t)
	defer stop()
	done := false
	defer func() {
		if done {
			return
		}
		v := recover()
		a.p.Done(&tk.t, admit.Outcome{Status: http.StatusInternalServerError, Err: fmt.Errorf("httpgate: handler panic: %v", v)})
		tk.sw = statusWriter{}
		if v != nil {
			panic(v)
		} // nil: runtime.Goexit, which goes on by itself
	}()
	next.ServeHTTP(&tk.sw, r)
	done = true
	status := tk.sw.status
	if status == 0 {
		status = http.StatusOK
	}
	a.p.Done(&tk.t, admit.Outcome{Status: status})
	tk.sw = statusWriter{}
}

// statusWriter records the status a handler writes. It passes Flush and
// Hijack through, and Unwrap gives http.ResponseController the writer
// underneath.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// ReadFrom keeps io.Copy's fast path (sendfile) of the writer underneath.
func (w *statusWriter) ReadFrom(src io.Reader) (int64, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(struct{ io.Writer }{w.ResponseWriter}, src)
}

// Flush flushes the writer underneath, if it can.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack hijacks the connection underneath, if it can.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := w.ResponseWriter.(http.Hijacker); ok {
		return h.Hijack()
	}
	return nil, nil, errors.New("httpgate: the ResponseWriter underneath cannot hijack its connection")
}

// Unwrap returns the writer underneath, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
