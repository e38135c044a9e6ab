package metrics_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/metrics"
)

// A protected server, and its metrics on an admin address of their own
// (a scrape sent through the protected server would be refused when it is
// overloaded, when its figures matter most).
func Example() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	srv, err := sluice.Listen(":8080", mux, sluice.Config{})
	if err != nil {
		log.Fatal(err)
	}

	col, err := metrics.New(metrics.Config{}, metrics.Server("api", srv))
	if err != nil {
		log.Fatal(err)
	}
	defer col.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	admin := http.NewServeMux()
	admin.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	go func() { log.Println(http.ListenAndServe("127.0.0.1:9090", admin)) }()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := srv.Run(ctx); err != nil {
		log.Print(err)
	}
}
