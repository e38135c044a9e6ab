package httpgate_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/httpgate"
	"github.com/sluice-go/sluice/queue"
)

// A plain net/http server behind a concurrency limit with a timed queue:
// while the limit is reached, a request waits up to MaxAge, then gets a 503
// that says it was not started.
func Example() {
	limit, err := gate.NewConcurrency(gate.ConcurrencyConfig{Limit: 64})
	if err != nil {
		log.Fatal(err)
	}
	a, err := httpgate.New(admit.Config{
		Gates:  []admit.Policy{limit},
		Queue:  &admit.QueueConfig{Order: queue.CoDel, Classify: admit.ClassFromHeader("X-Priority")},
		MaxAge: 20 * time.Millisecond,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello\n")
	})
	srv := httptest.NewServer(a.Wrap(hello)) // http.ListenAndServe(":8080", a.Wrap(hello))
	defer srv.Close()

	show := func() {
		resp, err := http.Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		fmt.Printf("%d %q retry-after=%q not-started=%q reason=%q\n", resp.StatusCode, body,
			resp.Header.Get("Retry-After"), resp.Header.Get("Sluice-Not-Started"), resp.Header.Get("Sluice-Reject-Reason"))
	}
	show()
	if err := limit.SetLimit(0); err != nil { // as if 64 requests were in flight
		log.Fatal(err)
	}
	show()

	// Output:
	// 200 "hello\n" retry-after="" not-started="" reason=""
	// 503 "request not started: queue-timeout\n" retry-after="1" not-started="1" reason="queue-timeout"
}

// The counters; here the busy-CPU gate on the Go scheduler, then a memory
// gate, without a queue.
func ExampleAdmission_Stats() {
	sched, err := gate.NewGoSched(gate.GoSchedConfig{}) // admit while ≤ 50% of GOMAXPROCS run
	if err != nil {
		log.Fatal(err)
	}
	mem, err := gate.NewMemory(gate.MemoryConfig{}) // refuse under 10% free memory
	if err != nil {
		log.Fatal(err)
	}
	defer mem.Close()
	a, err := httpgate.New(admit.Config{
		Gates: []admit.Policy{sched, mem},
		Rejection: admit.Rejection{
			RetryAfter: 2 * time.Second,
			OnReject:   func(a *admit.Attempt, reason string) { /* log, count per route... */ },
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello\n") })
	handler := a.Wrap(mux)
	_ = handler // http.ListenAndServe(":8080", handler)

	st := a.Stats()
	fmt.Println(st.InFlight, st.Admitted, st.Rejected, st.RejectedBy)
	// Output:
	// 0 0 0 map[]
}
