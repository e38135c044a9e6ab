package httpgate_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/httpgate"
	"github.com/sluice-go/sluice/queue"
)

// A plain net/http server behind a concurrency limit with a timed queue:
// while the limit is reached, a request waits up to the queue's timeout,
// then gets a 503 that says it was not started.
func ExampleMiddleware() {
	limit := gate.NewConcurrency(64)
	mw := httpgate.Middleware(httpgate.Options{
		Gate:        limit,
		Queue:       &queue.Options{Timeout: 20 * time.Millisecond, Order: queue.CoDel},
		ClassHeader: "X-Priority", // set by a proxy of our own
	})
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello\n")
	})
	srv := httptest.NewServer(mw(hello))
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
	limit.SetLimit(0) // as if 64 requests were in flight
	show()

	// Output:
	// 200 "hello\n" retry-after="" not-started="" reason=""
	// 503 "request not started: queue-timeout\n" retry-after="1" not-started="1" reason="queue-timeout"
}

// New gives access to the counters and to Close; here the busy-CPU gate on
// the Go scheduler, chained with a memory gate, without a queue.
func ExampleNew() {
	sched := gate.NewGoSched(gate.GoSchedOptions{}) // admit while ≤ 50% of GOMAXPROCS run
	mem := gate.NewMemory(gate.MemoryOptions{})     // refuse under 10% free memory
	defer mem.Close()
	a := httpgate.New(httpgate.Options{
		Gate: gate.All(sched, mem),
		Rejection: httpgate.Rejection{
			RetryAfter: 2 * time.Second,
			OnReject:   func(r *http.Request, reason string) { /* log, count per route... */ },
		},
	})
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
