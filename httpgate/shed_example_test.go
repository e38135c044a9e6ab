package httpgate_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/httpgate"
	"github.com/sluice-go/sluice/shed"
)

// loadshed's proportional shedding in front of plain net/http: here on the
// error rate of the last 10 s, from 20% failed (nothing shed) to 100%
// (everything shed). The shedder learns from each request's outcome, and
// its refusals are the pipeline's: 503, Retry-After, not started.
func Example_shed() {
	errs, err := shed.NewErrorRate(shed.ErrorRateConfig{
		Window: shed.Window{MinSamples: 5},             // count from 5 outcomes (default 20)
		Config: shed.Config{Interval: time.Nanosecond}, // recompute at every outcome (default 100 ms)
	})
	if err != nil {
		log.Fatal(err)
	}
	latency, err := shed.NewLatency(shed.LatencyConfig{Percentile: 0.99}) // p99 from 200 ms to 1 s
	if err != nil {
		log.Fatal(err)
	}
	a, err := httpgate.New(admit.Config{Policies: []admit.Policy{errs, latency}})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "database down", http.StatusInternalServerError) // every request fails
	})
	srv := httptest.NewServer(a.Wrap(h)) // http.ListenAndServe(":8080", a.Wrap(h))
	defer srv.Close()

	for range 6 {
		resp, err := http.Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		_ = resp.Body.Close()
		fmt.Printf("%d retry-after=%q reason=%q\n", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Sluice-Reject-Reason"))
	}
	fmt.Println(errs.Stats().ErrorRate, errs.Stats().Reject)

	// Output:
	// 500 retry-after="" reason=""
	// 500 retry-after="" reason=""
	// 500 retry-after="" reason=""
	// 500 retry-after="" reason=""
	// 500 retry-after="" reason=""
	// 503 retry-after="1" reason="shed-errors"
	// 1 1
}
