package ratelimit_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/httpgate"
	"github.com/sluice-go/sluice/ratelimit"
)

// A quota of 2 requests per minute per API key, in front of a plain
// net/http handler (the sluice server takes the same admit.Config). The
// third request of a key is refused, unstarted, with 429 and the fields
// that say which quota and when it has room again.
func Example() {
	lim, err := ratelimit.New(ratelimit.Config{
		Window: time.Minute,
		Quota:  2,
		// A fixed clock, 30 s into a window, for the output below; leave
		// it nil.
		Clock: func() int64 { return int64(30 * time.Second) },
	})
	if err != nil {
		log.Fatal(err)
	}
	quota, err := ratelimit.NewPolicy(lim, ratelimit.PolicyConfig{Key: admit.HeaderKey("X-Api-Key")})
	if err != nil {
		log.Fatal(err)
	}
	a, err := httpgate.New(admit.Config{Policies: []admit.Policy{quota}})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	srv := httptest.NewServer(a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	defer srv.Close()

	for range 3 {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.Header.Set("X-Api-Key", "k-123")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			fmt.Println(resp.StatusCode)
			continue
		}
		fmt.Println(resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("RateLimit-Policy"),
			resp.Header.Get("RateLimit"), resp.Header.Get("Sluice-Reject-Reason"))
	}
	// Output:
	// 200
	// 200
	// 429 60 "default";q=2;w=60 "default";r=0;t=60 rate-limit
}

// Per-key quotas for up to 100,000 keys in one table, rewritten whole by
// whoever owns them and reloaded whole every period: the same work whether
// one quota changed or all of them. A corrupt table is refused and the
// previous one stays.
func ExampleReloader() {
	lim, err := ratelimit.New(ratelimit.Config{Window: time.Minute, Quota: 100})
	if err != nil {
		log.Fatal(err)
	}
	path := filepath.Join(os.TempDir(), "sluice-example-quotas")
	defer os.Remove(path)
	write := func(quotas map[string]int64) {
		data, err := ratelimit.AppendTable(nil, quotas)
		if err != nil {
			log.Fatal(err)
		}
		// Write another file and rename it over: readers see all or nothing.
		if err := os.WriteFile(path+".new", data, 0o644); err != nil {
			log.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			log.Fatal(err)
		}
	}
	r, err := ratelimit.NewReloader(lim, ratelimit.FileSource{Path: path}, ratelimit.ReloadConfig{Period: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	// In a server: go r.Run(ctx). Here, one reload at a time.
	write(map[string]int64{"partner": 5000, "trial": 10})
	fmt.Println(r.Reload(context.Background()), lim.Quota("partner"), lim.Quota("trial"), lim.Quota("anyone"))

	if err := os.WriteFile(path, []byte("sluice-quotas 1 1\npartner 1\n"), 0o644); err != nil { // no checksum
		log.Fatal(err)
	}
	fmt.Println(r.Reload(context.Background()) != nil, lim.Quota("partner"), r.Stats().Failures)
	// Output:
	// <nil> 5000 10 100
	// true 5000 1
}
