package await_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/await"
	srt "github.com/sluice-go/sluice/runtime"
)

// A handler that calls another service through a client from NewClient:
// while it waits for the answer, its worker serves other requests, and it
// resumes on the same worker. Make the client once, not per request, and
// give the request the handler's context.
func ExampleNewClient() {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "forecast for "+r.URL.Query().Get("city"))
	}))
	defer backend.Close()

	client := await.NewClient(nil)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /weather/{city}", func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, backend.URL+"?city="+r.PathValue("city"), nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		resp, err := client.Do(req) // the worker is free meanwhile
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		io.Copy(w, resp.Body)
	})
	srv, err := sluice.Listen("127.0.0.1:0", mux, sluice.Config{Runtime: srt.Config{Workers: 1, Pinning: srt.PinOff}})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop(context.Background())

	resp, err := http.Get("http://" + srv.Addr().String() + "/weather/Lisbon")
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	client.CloseIdleConnections()
	fmt.Println(string(body))
	// Output:
	// forecast for Lisbon
}
