package client_test

import (
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/client"
	"github.com/sluice-go/sluice/shed"
)

// Outgoing calls shed the way loadshed's transport wrapper sheds them:
// here on the share of calls that failed in the last 10 s, from 20%
// (nothing shed) to 100% (everything). A shed call is not sent: it fails
// at once with a *client.ShedError (or, with ShedResponse as the Fallback,
// is answered by a synthetic 503 that says so).
func ExampleNewShedTransport() {
	dependency := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusBadGateway)
	}))
	defer dependency.Close()

	errs, err := shed.NewErrorRate(shed.ErrorRateConfig{
		Window: shed.Window{MinSamples: 3},             // count from 3 outcomes (default 20)
		Config: shed.Config{Interval: time.Nanosecond}, // recompute at every outcome (default 100 ms)
	})
	if err != nil {
		log.Fatal(err)
	}
	tr, err := client.NewShedTransport(client.ShedConfig{
		Policies: []admit.Policy{errs},
		Base:     http.DefaultTransport, // in a sluice handler, leave it nil: await's transport
	})
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	c := &http.Client{Transport: tr}
	for range 4 {
		resp, err := c.Get(dependency.URL)
		var se *client.ShedError
		if errors.As(err, &se) { // or errors.Is(err, client.ErrShed)
			fmt.Println("shed:", se.Reason, "retry after", se.RetryAfter)
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		_ = resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	fmt.Printf("%+v\n", tr.Stats())
	// Output:
	// 502
	// 502
	// 502
	// shed: shed-errors retry after 1s
	// {Sent:3 Shed:1}
}
