package dashboard_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/dashboard"
)

// A protected server, and its dashboard on an admin address of its own,
// at /debug/sluice/, read-only.
func Example() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	srv, err := sluice.Listen(":8080", mux, sluice.Config{})
	if err != nil {
		log.Fatal(err)
	}

	dash, err := dashboard.New(dashboard.Config{Server: srv})
	if err != nil {
		log.Fatal(err)
	}
	defer dash.Close()
	admin := http.NewServeMux()
	admin.Handle("/debug/sluice/", dash)
	go func() { log.Println(http.ListenAndServe("127.0.0.1:9090", admin)) }()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := srv.Run(ctx); err != nil {
		log.Print(err)
	}
}
