package scenario

import (
	"fmt"
	"net/http"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluice-go/sluice/bench"
)

// Paths of the longlived scenario's target (a child with its hook,
// LongLived.ChildHook), beside the weather's /forecast and TrivialPath.
const (
	// WebSocketPath is a WebSocket echo served inside its handler, as
	// gorilla/websocket's examples serve one: upgrade, then read a
	// message and write it back, until the client leaves.
	WebSocketPath = "/ws"
	// EventsPath is a server-sent-events stream: an event every
	// EventInterval, the first at once, each "data: " and the unix time
	// of its send in nanoseconds, flushed, until the request's context
	// ends.
	EventsPath = "/events"
	// HeapPath answers the child's live Go memory, in bytes, after a
	// collection: its heap objects and its goroutines' stacks
	// (runtime/metrics' /memory/classes/heap/objects:bytes and
	// /memory/classes/heap/stacks:bytes), in decimal.
	HeapPath = "/heap"
)

// EventInterval is the gap between two events of EventsPath.
const EventInterval = time.Second

// ChildHook returns the longlived scenario's part in its targets' child
// processes: the weather service beside WebSocketPath, EventsPath and
// TrivialPath.
func (ll *LongLived) ChildHook() bench.ChildHook {
	return bench.ChildHook{Name: ll.Name(), Open: func(_ bench.ChildSpec, weather http.Handler) (*bench.ChildPart, error) {
		return &bench.ChildPart{Handler: longLivedHandler(weather)}, nil
	}}
}

// longLivedHandler is the longlived scenario's target handler: the
// weather service h, WebSocketPath, EventsPath and TrivialPath.
func longLivedHandler(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("GET "+WebSocketPath, wsEcho)
	mux.HandleFunc("GET "+EventsPath, events)
	mux.HandleFunc("GET "+TrivialPath, trivial)
	mux.HandleFunc("GET "+HeapPath, liveHeap)
	return mux
}

// liveHeap answers the process's live heap objects and goroutine stacks,
// in bytes, after a collection (HeapPath).
func liveHeap(w http.ResponseWriter, _ *http.Request) {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	fmt.Fprintf(w, "%d", s[0].Value.Uint64()+s[1].Value.Uint64())
}

// wsEcho upgrades the request to a WebSocket and echoes every message
// back until the client leaves, in the handler itself.
func wsEcho(w http.ResponseWriter, r *http.Request) {
	var up websocket.Upgrader // the scenario's clients send no Origin
	c, err := up.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade has answered the client
	}
	defer c.Close()
	for {
		kind, msg, err := c.ReadMessage()
		if err != nil {
			return
		}
		if err := c.WriteMessage(kind, msg); err != nil {
			return
		}
	}
}

// events streams server-sent events, one every EventInterval (the first
// at once), each stamped with its send time, until the request's context
// ends or a write fails.
func events(w http.ResponseWriter, r *http.Request) {
	f, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	tick := time.NewTicker(EventInterval)
	defer tick.Stop()
	for {
		if _, err := fmt.Fprintf(w, "data: %d\n\n", time.Now().UnixNano()); err != nil {
			return
		}
		f.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}
