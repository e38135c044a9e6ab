package scenario

import (
	"io"
	"net/http"
	"time"

	"github.com/sluice-go/sluice/bench"
)

// Paths of the stray and longlived scenarios' targets, beside the
// weather's /forecast.
const (
	// StrayPath is the stray blocking handler: it calls a slow service
	// with a plain net/http client (not through package await), which
	// holds the thread it runs on, a sluice worker, until the answer.
	StrayPath = "/stray"
	// TrivialPath answers "ok" at once.
	TrivialPath = "/trivial"
)

// strayClientTimeout bounds a stray call in the target, should the slow
// service never answer.
const strayClientTimeout = 30 * time.Second

// strayChild is the stray hook's settings: the URL StrayPath calls.
type strayChild struct {
	URL string `json:"url"`
}

// ChildHook returns the stray scenario's part in its targets' child
// processes: the weather service beside StrayPath, which calls the slow
// service the parent named, and TrivialPath.
func (st *Stray) ChildHook() bench.ChildHook {
	return bench.ChildHook{Name: st.Name(), Open: func(cs bench.ChildSpec, weather http.Handler) (*bench.ChildPart, error) {
		sc, err := bench.DecodeHookConfig[strayChild](cs)
		if err != nil {
			return nil, err
		}
		return &bench.ChildPart{Handler: strayHandler(weather, sc.URL)}, nil
	}}
}

// strayHandler is the stray scenario's target handler: the weather
// service h, StrayPath (a plain net/http client call to slowURL, which
// holds the thread) and TrivialPath.
func strayHandler(h http.Handler, slowURL string) http.Handler {
	client := &http.Client{Timeout: strayClientTimeout} // a plain client: no await
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("GET "+StrayPath, func(w http.ResponseWriter, _ *http.Request) {
		resp, err := client.Get(slowURL)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		_, _ = io.WriteString(w, "done\n")
	})
	mux.HandleFunc("GET "+TrivialPath, trivial)
	return mux
}

// trivial answers TrivialPath: "ok" at once.
func trivial(w http.ResponseWriter, _ *http.Request) {
	_, _ = io.WriteString(w, "ok\n")
}
