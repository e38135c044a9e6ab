//go:build linux

package server_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/lanes"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/server"
)

// A server on a runtime of one's own, with a native handler (the server's
// own Request and ResponseWriter, no net/http allocation per request);
// server.HTTPHandler runs any http.Handler instead. The front door,
// package sluice, does the same in one call.
func ExampleListen() {
	rt, err := srt.New(srt.Config{Workers: 2, Pinning: srt.PinOff})
	if err != nil {
		log.Fatal(err)
	}
	if err := rt.Start(); err != nil {
		log.Fatal(err)
	}
	hello := server.HandlerFunc(func(w *server.ResponseWriter, r *server.Request) {
		w.WriteString("hello " + r.URL.Path + "\n")
	})
	srv, err := server.Listen(rt, "127.0.0.1:0", hello, server.Config{})
	if err != nil {
		log.Fatal(err)
	}

	resp, err := http.Get("http://" + srv.Addr().String() + "/you")
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	fmt.Print(resp.StatusCode, " ", string(body))

	// Stop the server, then the runtime.
	ctx := context.Background()
	fmt.Println(srv.Shutdown(ctx), rt.Stop(ctx))
	// Output:
	// 200 hello /you
	// <nil> <nil>
}

// Routes in lanes of their own: the batch export runs in a Background lane
// that gets the room interactive requests leave, and at least a tenth of
// each worker; its handler yields between slices of its work. Its
// admission has a gate of its own: at most 2 exports at a time.
func ExampleLanes() {
	rt, err := srt.New(srt.Config{Workers: 2, Pinning: srt.PinOff,
		Lanes: []lanes.Spec{{Name: "background", Priority: 2, Shares: 11}}})
	if err != nil {
		log.Fatal(err)
	}
	if err := rt.Start(); err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /export/", func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 { // three slices of work
			fmt.Fprintf(w, "part %d\n", i)
			if err := sluice.Yield(r.Context()); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	exports, err := gate.NewConcurrency(gate.ConcurrencyConfig{Limit: 2})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := server.Listen(rt, "127.0.0.1:0", server.HTTPHandler(mux), server.Config{
		Lanes: server.Lanes{Routes: map[string]string{"GET /export/": "background"}},
		Admission: admit.Config{Gates: []admit.Policy{
			gate.ForLanes(exports, "background"),
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, path := range []string{"/export/all", "/"} {
		resp, err := http.Get("http://" + srv.Addr().String() + path)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(string(body))
	}
	http.DefaultClient.CloseIdleConnections()
	bg, _ := rt.Lanes().Lookup("background")
	fmt.Println(rt.Lanes().SetShares(bg, 25)) // live, from now on
	ctx := context.Background()
	fmt.Println(srv.Shutdown(ctx), rt.Stop(ctx))
	// Output:
	// part 0
	// part 1
	// part 2
	// hello
	// <nil>
	// <nil> <nil>
}
