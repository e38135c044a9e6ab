package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/queue"
)

// Lanes sends requests to lanes of the runtime, which decide who gets the
// CPU once requests have started: "health checks and checkout first", "the
// batch export gets a tenth of the CPU while interactive traffic waits".
// Register the lanes on the runtime before it starts
// (runtime.Runtime.RegisterLane, or runtime.Config.Lanes for the sluice
// package's front door), then name them here; their shares and priorities
// can be changed while serving (rt.Lanes(), package laneadmin, the
// dashboard).
//
// A request in a lane of its own starts in that lane, behind the lane's
// queued work, and every resumption of its handler (after Await, a read of
// its body, Yield) is queued in the same lane, ahead of the lane's new
// requests: each lane keeps the built-in order of Continuation before
// Upstream within itself. A request no rule matches runs in the built-in
// lanes, as without Lanes: it starts at once, in the Upstream task that read
// its head, and resumes in Continuation. The executor cannot preempt a
// handler: one that computes for long calls sluice.Yield between slices of
// its work, or its lane's share means nothing while it runs.
//
// The rules are tried in order: Func, Routes, Header, Classes; the first
// that names a lane decides. The lane is known before admission: the
// request's admit.Attempt carries its name (Attempt.Lane), so that a gate
// can be given to one lane (gate.ForLanes), and the queue can classify by
// lane (admit.ClassByLane).
//
// The zero value sends every request to the built-in lanes.
type Lanes struct {
	// Func, if set, is asked first: it returns the name of a lane, or ""
	// to let the other rules decide. It runs on the worker for every
	// request, before admission: it must be quick.
	Func func(r *Request) string
	// Routes maps http.ServeMux patterns ("GET /export/", "/report/{id}",
	// "api.example.com/") to lane names: the most specific pattern that
	// matches a request decides, by ServeMux's rules. Patterns that
	// ServeMux would refuse, or that conflict, fail the server's
	// construction. Routers other than ServeMux use Func.
	Routes map[string]string
	// Header names a request header field whose value picks the lane
	// through HeaderValues ("X-Priority: batch" with {"batch":
	// "background"}); values not in HeaderValues decide nothing. Clients
	// can claim any listed value: use it behind a proxy of your own that
	// controls the field.
	Header       string
	HeaderValues map[string]string
	// Classes maps the request's admission class, as the admission
	// pipeline gives it (Config.Admission.Queue.Classify), to a lane name;
	// it needs that Classify.
	Classes map[queue.Class]string
}

// laneRef is a lane the rules name, resolved on the runtime's lane set.
type laneRef struct {
	id   lanes.ID
	name string
}

// laneRouter is Lanes resolved at construction: names to IDs, the routes in
// a ServeMux of their own.
type laneRouter struct {
	set      *lanes.Set
	fn       func(r *Request) string
	mux      *http.ServeMux
	prefixes []string // the routes' literal path prefixes (literalPrefixes)
	header   string
	byHeader map[string]laneRef
	classes  classifier // the admission's classes, for byClass
	byClass  map[queue.Class]laneRef
}

// classifier gives requests their admission class: the server's
// *admit.Pipeline.
type classifier interface {
	Classify(a *admit.Attempt) (queue.Class, bool)
	Classifies() bool
}

// laneHandler marks, in the router's ServeMux, the lane of a pattern; rest
// marks the catch-all the router adds, which decides nothing.
type laneHandler struct {
	ref  laneRef
	rest bool
}

func (laneHandler) ServeHTTP(http.ResponseWriter, *http.Request) {}

// newLaneRouter checks cfg's lanes against set; nil when there are none.
func newLaneRouter(cfg Lanes, set *lanes.Set, classes classifier) (*laneRouter, error) {
	if cfg.Func == nil && len(cfg.Routes) == 0 && cfg.Header == "" && len(cfg.HeaderValues) == 0 && len(cfg.Classes) == 0 {
		return nil, nil
	}
	lr := &laneRouter{set: set, fn: cfg.Func}
	var errs []error
	resolve := func(where, name string) (laneRef, bool) {
		id, ok := set.Lookup(name)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s names lane %q, which the runtime lacks: register it with Runtime.RegisterLane (or runtime.Config.Lanes) before the runtime starts", where, name))
			return laneRef{}, false
		case id == lanes.Continuation:
			errs = append(errs, fmt.Errorf("%s names lane %q: requests cannot start in the Continuation lane, which is for work already started; name a lane of your own, or %q for the default", where, name, set.Name(lanes.Upstream)))
			return laneRef{}, false
		}
		return laneRef{id: id, name: name}, true
	}
	if len(cfg.Routes) > 0 {
		lr.mux = http.NewServeMux()
		patterns := make([]string, 0, len(cfg.Routes))
		for p := range cfg.Routes {
			patterns = append(patterns, p)
		}
		sort.Strings(patterns)
		for _, p := range patterns {
			ref, ok := resolve(fmt.Sprintf("Lanes.Routes[%q]", p), cfg.Routes[p])
			if !ok {
				continue
			}
			if err := handlePattern(lr.mux, p, laneHandler{ref: ref}); err != nil {
				errs = append(errs, fmt.Errorf("Lanes.Routes[%q]: %w", p, err))
			}
		}
		if _, ok := cfg.Routes["/"]; !ok {
			// Everything else: the built-in lanes. Without it, a request
			// no pattern matches costs ServeMux's search for a redirect
			// and its not-found handler, about ten allocations.
			_ = handlePattern(lr.mux, "/", laneHandler{rest: true})
		}
		lr.prefixes = literalPrefixes(patterns)
	}
	if cfg.Header != "" || len(cfg.HeaderValues) > 0 {
		if cfg.Header == "" || len(cfg.HeaderValues) == 0 {
			errs = append(errs, errors.New("Lanes.Header and Lanes.HeaderValues go together: the field to read, and its values' lanes"))
		}
		lr.header = http.CanonicalHeaderKey(cfg.Header)
		lr.byHeader = map[string]laneRef{}
		for v, name := range cfg.HeaderValues {
			if ref, ok := resolve(fmt.Sprintf("Lanes.HeaderValues[%q]", v), name); ok {
				lr.byHeader[v] = ref
			}
		}
	}
	if len(cfg.Classes) > 0 {
		if classes == nil || !classes.Classifies() {
			errs = append(errs, errors.New("Lanes.Classes needs the requests' admission classes: set Config.Admission.Queue.Classify"))
		}
		lr.classes = classes
		lr.byClass = map[queue.Class]laneRef{}
		for cl, name := range cfg.Classes {
			if ref, ok := resolve(fmt.Sprintf("Lanes.Classes[%v]", cl), name); ok {
				lr.byClass[cl] = ref
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return lr, nil
}

// handlePattern registers h for pattern, turning ServeMux's panic on a bad
// or conflicting pattern into an error.
func handlePattern(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%v", v)
		}
	}()
	mux.Handle(pattern, h)
	return nil
}

// route returns the lane of the request r, whose admission attempt is a;
// ok is false for the built-in lanes. scratch is the connection's request
// for ServeMux, reused.
func (lr *laneRouter) route(r *Request, a *admit.Attempt, scratch *http.Request) (laneRef, bool) {
	if lr.fn != nil {
		if name := lr.fn(r); name != "" {
			return lr.named(name)
		}
	}
	if lr.mux != nil && lr.mayMatch(r.URL.Path) {
		*scratch = http.Request{Method: r.Method, URL: r.URL, Host: r.Host, Header: r.Header, RequestURI: r.RequestURI}
		h, _ := lr.mux.Handler(scratch)
		*scratch = http.Request{}
		if lh, ok := h.(laneHandler); ok && !lh.rest {
			return lh.ref, true
		}
	}
	if lr.byHeader != nil {
		if vs := r.Header[lr.header]; len(vs) > 0 {
			if ref, ok := lr.byHeader[vs[0]]; ok {
				return ref, true
			}
		}
	}
	if lr.byClass != nil {
		if cl, ok := lr.classes.Classify(a); ok {
			if ref, ok := lr.byClass[cl]; ok {
				return ref, true
			}
		}
	}
	return laneRef{}, false
}

// named resolves a lane name that Func returned and no other rule names. A
// name the runtime lacks, and Continuation, leave the request in the
// built-in lanes.
func (lr *laneRouter) named(name string) (laneRef, bool) {
	id, ok := lr.set.Lookup(name)
	if !ok || id == lanes.Continuation {
		return laneRef{}, false
	}
	return laneRef{id: id, name: lr.set.Name(id)}, true
}

// literalPrefixes returns the literal beginnings of the patterns' paths, up
// to their first wildcard: a request whose path begins with none of them
// matches no pattern, and ServeMux (a few allocations a request) need not
// be asked.
func literalPrefixes(patterns []string) []string {
	var out []string
	for _, p := range patterns {
		if i := strings.IndexByte(p, ' '); i >= 0 {
			p = strings.TrimLeft(p[i+1:], " \t")
		}
		i := strings.IndexByte(p, '/')
		if i < 0 {
			return nil // not a pattern ServeMux took: always ask it
		}
		p = p[i:] // without the host
		if j := strings.IndexByte(p, '{'); j >= 0 {
			p = p[:j]
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// mayMatch reports whether path begins with one of the routes' literal
// prefixes.
func (lr *laneRouter) mayMatch(path string) bool {
	if lr.prefixes == nil {
		return true
	}
	for _, p := range lr.prefixes {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}
