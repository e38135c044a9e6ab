package scenario

import (
	"bytes"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/sluice-go/sluice/bench"
)

// SoakLargePath is the soak target's large answer, SoakLargeSize bytes:
// the no-read chaos clients ask for it, so that a few unread answers fill
// the server's socket buffer (up to 4 MiB on Linux) and block its writes.
const (
	SoakLargePath = "/soak/large"
	SoakLargeSize = 256 << 10
)

// SoakPanicValue is what the soak target's handler panics with.
const SoakPanicValue = "bench: the soak handler panics on purpose"

// soakChild is the soak hook's settings: the weather's /forecast panics
// on every PanicEvery-th request when that is positive.
type soakChild struct {
	PanicEvery int `json:"panic_every,omitempty"`
}

// ChildHook returns the soak scenario's part in its targets' child
// processes: the weather service whose /forecast panics on every
// PanicEvery-th request (soakHandler), and SoakLargePath.
func (so *Soak) ChildHook() bench.ChildHook {
	return bench.ChildHook{Name: so.Name(), Open: func(cs bench.ChildSpec, weather http.Handler) (*bench.ChildPart, error) {
		sc, err := bench.DecodeHookConfig[soakChild](cs)
		if err != nil {
			return nil, err
		}
		return &bench.ChildPart{Handler: soakHandler(weather, sc.PanicEvery)}, nil
	}}
}

// soakHandler is the soak's target handler: the weather service h, whose
// /forecast panics on every panicEvery-th request when that is positive,
// and SoakLargePath, which the no-read chaos clients ask for.
func soakHandler(h http.Handler, panicEvery int) http.Handler {
	mux := http.NewServeMux()
	forecast := h
	if panicEvery > 0 {
		forecast = panicking(panicEvery, h)
	}
	mux.Handle("/forecast", forecast)
	mux.Handle("GET "+SoakLargePath, large())
	mux.Handle("/", h) // 404 for everything else, as the service says it
	return mux
}

// large answers SoakLargeSize bytes.
func large() http.Handler {
	body := bytes.Repeat([]byte("sluice soak\n"), SoakLargeSize/12+1)[:SoakLargeSize]
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})
}

// panicking wraps h so that every n-th request panics: alternately before
// h runs (nothing written yet: servers answer 500) and after it has
// written its answer (which a server may have begun to send: it then cuts
// the connection).
func panicking(n int, h http.Handler) http.Handler {
	var count atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := count.Add(1)
		if i%int64(n) != 0 {
			h.ServeHTTP(w, r)
			return
		}
		if (i/int64(n))%2 == 1 {
			panic(SoakPanicValue)
		}
		h.ServeHTTP(w, r)
		panic(SoakPanicValue)
	})
}
