package laneadmin_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/laneadmin"
)

// A protected server, and its lane admin endpoint on an admin address of
// its own, behind a token taken from the environment. An operator then
// reads and tunes the lanes with
//
//	curl -H "Authorization: Bearer $SLUICE_LANES_TOKEN" http://127.0.0.1:9090/admin/lanes
//	curl -H "Authorization: Bearer $SLUICE_LANES_TOKEN" -H 'Content-Type: application/json' \
//	     -d '{"lane":"upstream","shares":300}' http://127.0.0.1:9090/admin/lanes
func Example() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	srv, err := sluice.Listen(":8080", mux, sluice.Config{})
	if err != nil {
		log.Fatal(err)
	}

	lanesAdmin, err := laneadmin.New(srv.Runtime().Lanes(), laneadmin.Config{
		Token: os.Getenv("SLUICE_LANES_TOKEN"),
	})
	if err != nil {
		log.Fatal(err) // no token, or one too short
	}
	admin := http.NewServeMux()
	admin.Handle("/admin/lanes", lanesAdmin)
	go func() { log.Println(http.ListenAndServe("127.0.0.1:9090", admin)) }()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := srv.Run(ctx); err != nil {
		log.Print(err)
	}
}
