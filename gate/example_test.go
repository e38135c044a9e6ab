package gate_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/httpgate"
	srt "github.com/sluice-go/sluice/runtime"
)

// The busy-worker gate gets its executor when the server starts: on 2
// workers, half busy means a request is admitted while the other worker is
// idle.
func ExampleNewBusy() {
	busy, err := gate.NewBusy(gate.BusyConfig{Fraction: 0.5})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := sluice.Listen("127.0.0.1:0", http.NotFoundHandler(), sluice.Config{
		Admission: admit.Config{Gates: []admit.Policy{busy}, Queue: &admit.QueueConfig{}},
		Runtime:   srt.Config{Workers: 2, Pinning: srt.PinOff},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop(context.Background())
	fmt.Println("busy workers allowed, the deciding one included:", busy.Limit())
	// Output:
	// busy workers allowed, the deciding one included: 1
}

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
