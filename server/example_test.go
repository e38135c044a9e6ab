package server_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"

	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/server"
)

// A server on a runtime of one's own, with a native handler (the server's
// own Request and ResponseWriter, no net/http allocation per request);
// server.HTTPHandler runs any http.Handler instead. The front door,
// package sluice, does the same in one call.
func ExampleListen() {
	rt, err := srt.New(srt.WithWorkers(2), srt.WithPinning(false))
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
