package gate_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/httpgate"
)

// A concurrency limit changes live: lowered to zero it refuses everything,
// raised again it admits, here in front of plain net/http.
func ExampleConcurrency_SetLimit() {
	limit, err := gate.NewConcurrency(gate.ConcurrencyConfig{Limit: 64})
	if err != nil {
		log.Fatal(err)
	}
	a, err := httpgate.New(admit.Config{Gates: []admit.Policy{limit}})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	srv := httptest.NewServer(a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})))
	defer srv.Close()
	get := func() {
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("Sluice-Reject-Reason"))
	}
	if err := limit.SetLimit(0); err != nil {
		log.Fatal(err)
	}
	get()
	if err := limit.SetLimit(64); err != nil {
		log.Fatal(err)
	}
	get()
	// Output:
	// 503 concurrency
	// 200
}
