//go:build linux

package load

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With Clients, every client has a connection of its own and its answers
// are counted for it: a server that serves every connection alike gives a
// Jain index of 1, one that refuses one connection's requests leaves that
// client starved.
func TestClientsCountPerClient(t *testing.T) {
	var mu sync.Mutex
	var first string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if first == "" {
			first = r.RemoteAddr
		}
		starve := r.URL.Query().Get("starve") != "" && r.RemoteAddr == first
		mu.Unlock()
		if starve {
			http.Error(w, "not you", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()

	res, err := Run(context.Background(), Config{URL: srv.URL + "/", Rate: 400, Duration: 500 * time.Millisecond, Clients: 4})
	require.NoError(t, err)
	require.Len(t, res.Clients, 4)
	var sum int64
	for _, n := range res.Clients {
		sum += n
	}
	assert.Equal(t, res.OK, sum)
	assert.Equal(t, res.Offered, res.OK, "far below capacity")
	assert.EqualValues(t, 4, res.Dials, "a connection per client")
	jain, starved := res.Fairness()
	assert.InDelta(t, 1, jain, 0.01)
	assert.Zero(t, starved)

	mu.Lock()
	first = ""
	mu.Unlock()
	res, err = Run(context.Background(), Config{URL: srv.URL + "/?starve=1", Rate: 400, Duration: 500 * time.Millisecond, Clients: 4})
	require.NoError(t, err)
	jain, starved = res.Fairness()
	assert.Equal(t, 0.25, starved, "the first connection's client got nothing")
	assert.InDelta(t, 0.75, jain, 0.02, "three of four served alike: 9/12")
}

// A client's request waits for its connection until its own deadline at
// most: behind a slow answer it fails at its deadline. A keeping client
// (which waits for the late answer on its connection rather than dialling
// anew) never has two requests at the server at once.
func TestClientsWaitForTheirConnection(t *testing.T) {
	release := make(chan struct{})
	var inFlight, most atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	start := time.Now()
	res, err := Run(context.Background(), Config{URL: srv.URL + "/", Rate: 20, Duration: 200 * time.Millisecond, Clients: 1, Deadline: 300 * time.Millisecond, Arrival: Constant, ClientMode: ClientKeep})
	require.NoError(t, err)
	assert.Zero(t, res.OK)
	assert.Equal(t, res.Offered, res.Failed)
	assert.EqualValues(t, 1, most.Load(), "one request of the client at a time")
	assert.Less(t, time.Since(start), 5*time.Second, "nothing waited past its deadline")
}

func TestClientsConfigErrors(t *testing.T) {
	base := Config{URL: "http://127.0.0.1:1/", Rate: 1, Duration: time.Second}
	for name, change := range map[string]func(*Config){
		"negative":    func(c *Config) { c.Clients = -1 },
		"with Client": func(c *Config) { c.Clients, c.Client = 2, &http.Client{} },
		"with URLs": func(c *Config) {
			c.Clients, c.URL, c.URLs = 2, "", []string{"http://127.0.0.1:1/", "http://127.0.0.1:2/"}
		},
		"with NewConn": func(c *Config) {
			c.Clients, c.NewConn = 2, func(int) bool { return true }
		},
	} {
		cfg := base
		change(&cfg)
		_, err := newPlan(cfg)
		assert.Error(t, err, name)
	}
}
