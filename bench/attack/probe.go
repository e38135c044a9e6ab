package attack

import (
	"context"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/sluice-go/sluice/reject"
)

// ProbeTimeout is how long a probe waits for its answer, connection and
// handshake included, before it counts as failed.
const ProbeTimeout = 2 * time.Second

// ProbeResult is what the legitimate probes got during an attack.
type ProbeResult struct {
	// Sent probes, and those answered 200 with their whole body in time.
	Sent, OK int
	// P50 and P99 are the latencies of the probes answered 200.
	P50, P99 time.Duration
	// MaxBody is the largest body a probe read (a scrape of /metrics
	// swollen by tenant names shows here).
	MaxBody int64
	// FirstError is the first failure's error or status, for the report.
	FirstError string
}

// Success is the share of probes answered 200 in time; 1 when none were
// sent.
func (p ProbeResult) Success() float64 {
	if p.Sent == 0 {
		return 1
	}
	return float64(p.OK) / float64(p.Sent)
}

// probe asks env's target for path, on a new connection each time (a new
// client: accepting and handshaking are what many attacks wear out), rate
// times a second until ctx ends, and returns what the probes got once the
// last has ended.
func probe(ctx context.Context, env Env, path string, rate int) ProbeResult {
	scheme := "http://"
	if env.TLS != nil {
		scheme = "https://"
	}
	tr := &http.Transport{TLSClientConfig: env.TLS, DisableKeepAlives: true, ForceAttemptHTTP2: false}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: ProbeTimeout}
	url := scheme + env.Addr + path

	var mu sync.Mutex
	var res ProbeResult
	var lat []time.Duration
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(max(rate, 1)))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			slices.Sort(lat)
			if n := len(lat); n > 0 {
				res.P50, res.P99 = lat[n/2], lat[min(n-1, n*99/100)]
			}
			return res
		case <-tick.C:
		}
		res.Sent++ // only this goroutine writes Sent
		wg.Go(func() {
			began := time.Now()
			n, errText := get(client, url)
			took := time.Since(began)
			mu.Lock()
			defer mu.Unlock()
			if errText != "" {
				if res.FirstError == "" {
					res.FirstError = errText
				}
				return
			}
			res.OK++
			res.MaxBody = max(res.MaxBody, n)
			lat = append(lat, took)
		})
	}
}

// get asks for url and reads the answer: its length, or what went wrong.
func get(client *http.Client, url string) (int64, string) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	switch {
	case err != nil:
		return n, err.Error()
	case resp.StatusCode != http.StatusOK:
		if why := resp.Header.Get(reject.ReasonHeader); why != "" {
			return n, resp.Status + " (" + why + ")"
		}
		return n, resp.Status
	}
	return n, ""
}
