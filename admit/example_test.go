package admit_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/httpgate"
)

// maintenance is a policy of its own: while on, it refuses writes with 503
// and a Retry-After of a minute, unstarted, and lets reads through.
type maintenance struct {
	on      atomic.Bool
	refusal *admit.Refusal
}

func (m *maintenance) Admit(a *admit.Attempt) *admit.Refusal {
	if m.on.Load() && a.Method != http.MethodGet {
		return m.refusal
	}
	return nil
}

func (m *maintenance) Done(*admit.Attempt, admit.Outcome) {}

// A rule of one's own is one type with Admit and Done; it goes in
// Config.Policies, and neither the sluice server nor the net/http
// middleware changes for it. Here it runs in front of a plain net/http
// handler.
func Example_policy() {
	m := &maintenance{refusal: &admit.Refusal{Reason: "maintenance", RetryAfter: time.Minute}}
	m.on.Store(true)
	a, err := httpgate.New(admit.Config{Policies: []admit.Policy{m}})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	srv := httptest.NewServer(a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "done\n")
	})))
	defer srv.Close()

	for _, method := range []string{http.MethodGet, http.MethodPost} {
		req, _ := http.NewRequest(method, srv.URL, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%s: %d retry-after=%q %q\n", method, resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	fmt.Println(a.Stats().RejectedBy)
	// Output:
	// GET: 200 retry-after="" "done\n"
	// POST: 503 retry-after="60" "request not started: maintenance\n"
	// map[maintenance:1]
}

// An adapter's side of the pipeline, as the sluice server and httpgate use
// it: a Ticket per request, Decide before any work, Done at the end, the
// Ticket's Answer for a rejection. Here with the age limit alone: a request
// whose kernel stamp says it arrived 150 ms ago is rejected.
func ExampleNew() {
	p, err := admit.New(admit.Config{}, admit.Host{})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	for _, age := range []time.Duration{time.Millisecond, 150 * time.Millisecond} {
		var t admit.Ticket
		t.Method, t.Path = http.MethodGet, "/hello"
		t.Stamp = time.Now().Add(-age).UnixNano() // when the kernel received it
		switch p.Decide(&t) {
		case admit.Admitted:
			fmt.Println("admitted; run it")
			p.Done(&t, admit.Outcome{Status: http.StatusOK})
		case admit.Rejected:
			a, _ := t.Answer()
			fmt.Println("rejected:", a.Status, a.Reason)
		}
	}
	// Output:
	// admitted; run it
	// rejected: 503 queue-timeout
}
